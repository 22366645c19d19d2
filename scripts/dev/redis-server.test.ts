import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../infra/kernel/errors.ts';
import { processAlive } from '../../test/support/process-alive.ts';
import { isPortOpen } from './free-port.ts';
import { ensureRedisServer, findRedisServer, type RedisServerHandle, startRedisServer } from './redis-server.ts';

describe('redis-server', () => {
  let dir: string;
  let binary: string;
  const started: RedisServerHandle[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'redis-server-test-'));
    binary = await ensureRedisServer({ install: 'never' });
  });

  afterAll(async () => {
    await Promise.all(started.map((s) => s.close()));
    await rm(dir, { recursive: true, force: true });
  });

  it('finds the same binary that ensureRedisServer returns', async () => {
    expect(await findRedisServer()).toBe(binary);
    expect(path.basename(binary)).toBe('redis-server');
  });

  it('starts on a free port, serves commands, and stops for good on close (twice)', async () => {
    const server = await startRedisServer({ binary, dir });
    started.push(server);
    expect(server.url).toBe(`redis://127.0.0.1:${server.port}`);

    const client = new Redis(server.url, { maxRetriesPerRequest: 0, lazyConnect: true });
    try {
      await client.connect();
      await client.set('greeting', 'hello');
      expect(await client.get('greeting')).toBe('hello');
      // Persistence is off: nothing survives, nothing is written to dir.
      expect(await client.config('GET', 'save')).toEqual(['save', '']);
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'no']);
    } finally {
      client.disconnect();
    }

    await server.close();
    await server.close();
    expect(processAlive(server.pid)).toBe(false);
    expect(await isPortOpen(server.port)).toBe(false);
  });

  it('rejects with the server output when the child dies during start-up', async () => {
    const first = await startRedisServer({ binary, dir });
    started.push(first);
    await expect(startRedisServer({ binary, dir, port: first.port })).rejects.toThrow(/exited during start-up/);
    // The first server is untouched by the failed second start.
    const client = new Redis(first.url, { maxRetriesPerRequest: 0 });
    try {
      expect(await client.ping()).toBe('PONG');
    } finally {
      client.disconnect();
    }
    await first.close();
  });

  it('rejects with the reason when the binary cannot be spawned', async () => {
    await expect(startRedisServer({ binary: path.join(dir, 'no-such-redis'), dir })).rejects.toThrow(/ENOENT/);
  });
});

describe('ensureRedisServer when redis-server is missing', () => {
  let dir: string;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'ensure-redis-test-'));
  });

  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  /** A folder with an `apt-get` that logs its arguments and, on install, links the real server in. */
  async function fakeApt(realBinary: string, installs: boolean): Promise<{ dirs: string[]; calls: () => Promise<string[]> }> {
    const bin = await mkdtemp(path.join(dir, 'bin-'));
    const callLog = path.join(bin, 'calls.log');
    const install = installs ? `ln -s '${realBinary}' '${bin}/redis-server'` : 'true';
    const script = ['#!/bin/sh', `echo "$DEBIAN_FRONTEND $*" >> '${callLog}'`, `case " $* " in *" install "*) ${install};; esac`].join(
      '\n',
    );
    await writeFile(path.join(bin, 'apt-get'), `${script}\n`, { mode: 0o755 });
    const calls = async () => (await readFile(callLog, 'utf8')).trim().split('\n');
    return { dirs: [bin], calls };
  }

  it('refuses with install instructions when install is never', async () => {
    const error = await ensureRedisServer({ install: 'never', searchDirs: [dir] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigError);
    const message = (error as ConfigError).message;
    expect(message).toContain('sudo apt-get install redis-server');
    expect(message).toContain('brew install redis');
    expect(message).toContain('REDIS_URL');
    expect(message).toContain('automatic install is off');
  });

  it('refuses when there is no apt-get to install with', async () => {
    await expect(ensureRedisServer({ install: 'auto', searchDirs: [dir] })).rejects.toThrow(/apt-get is not available/);
  });

  it.runIf(process.getuid?.() === 0)('installs with apt-get update then install, as root', async () => {
    const real = await ensureRedisServer({ install: 'never' });
    const apt = await fakeApt(real, true);
    const lines: string[] = [];
    const installed = await ensureRedisServer({ install: 'auto', searchDirs: apt.dirs, log: (l) => lines.push(l) });
    expect(installed).toBe(path.join(apt.dirs[0]!, 'redis-server'));
    expect(await apt.calls()).toEqual([
      'noninteractive -o DPkg::Lock::Timeout=300 update -qq',
      'noninteractive -o DPkg::Lock::Timeout=300 install -y -qq redis-server',
    ]);
    expect(lines.length).toBeGreaterThan(0);
  });

  it.runIf(process.getuid?.() === 0)('says so when apt-get succeeds but no redis-server appears', async () => {
    const apt = await fakeApt('/nonexistent', false);
    await expect(ensureRedisServer({ install: 'auto', searchDirs: apt.dirs })).rejects.toThrow(/not in any of/);
  });

  it.runIf(process.getuid?.() !== 0)('asks for root instead of installing', async () => {
    const apt = await fakeApt('/nonexistent', true);
    await expect(ensureRedisServer({ install: 'auto', searchDirs: apt.dirs })).rejects.toThrow(/needs root/);
  });
});
