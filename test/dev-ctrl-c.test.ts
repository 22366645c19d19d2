/**
 * Stopping `warmpool dev`, against real `warmpool dev` processes (their own redis-server, S3
 * server, scaler and workers): Ctrl-C as a terminal sends it (SIGINT to the whole foreground
 * process group, and under `npm start` npm's forwarded copy right behind it) with jobs in
 * flight, several times in one folder (twice under `npm test`, once each way; 10 times under `npm run test:full`): every time the stack drains and exits 0 within 15 s, nothing
 * of it is left running (by process group, and its redis-server, which has a group of its own),
 * nothing complained of a Redis gone from under it, and every job submitted before a Ctrl-C
 * has succeeded by the end. A SIGTERM while it is still starting stops what it started.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type DevChild, devEnv, devFolder, killDev, leftovers, processesInGroup, readLock, spawnDev } from './support/dev-child.ts';
import { sized } from './support/test-scale.ts';
import { until } from './support/until.ts';

/** The key `warmpool dev` generated in `cwd` (the banner names the file, never the key). */
const devKey = (cwd: string) => readFileSync(path.join(cwd, '.warmpool', 'dev-key'), 'utf8').trim();

const DEMO = 'demo-scorer';
/** Even: every other round is signalled as under `npm start`, so both ways run as often. */
const ROUNDS = sized(2, 10);
const JOBS_PER_ROUND = 40;
/** What the issue asks of a Ctrl-C. */
const STOP_WITHIN_MS = 15_000;

describe('stopping warmpool dev', () => {
  let dev: DevChild | undefined;
  let redisPid: number | undefined;

  afterEach(() => {
    killDev(dev, redisPid);
    dev = undefined;
  });

  /** Waits for its exit; undefined when it has not exited within `ms`. */
  const exitWithin = (child: DevChild, ms: number) =>
    Promise.race([child.exited, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), ms).unref())]);

  it(`drains and exits 0 on Ctrl-C with jobs in flight, ${ROUNDS} times`, async () => {
    const cwd = devFolder('dev-ctrl-c');
    const env = await devEnv();
    const submitted: string[] = [];
    let api: ReturnType<typeof client> | undefined;
    for (let round = 0; round < ROUNDS; round++) {
      dev = spawnDev(cwd, env);
      const [, url] = await dev.waitFor(/warmpool is up: (\S+)\s+\(API key: in \.warmpool\/dev-key\)/);
      const key = devKey(cwd);
      // The banner says where the key is; it never prints it.
      expect(dev.output()).not.toContain(key);
      api = client(url as string, key);
      redisPid = readLock(cwd).redis?.pid;
      expect(redisPid).toBeDefined();
      // Work in flight: distinct rows (equal ones would be answered by the result cache).
      const ids = await Promise.all(Array.from({ length: JOBS_PER_ROUND }, (_, i) => api?.submit(round * JOBS_PER_ROUND + i)));
      submitted.push(...(ids as string[]));
      expect(processesInGroup(dev.pid).some((p) => /\bworker\b/.test(p.command))).toBe(true);

      process.kill(-dev.pid, 'SIGINT');
      // Every other round as under `npm start`: npm forwards its own SIGINT to its child too.
      if (round % 2 === 1) process.kill(dev.pid, 'SIGINT');
      const exit = await exitWithin(dev, STOP_WITHIN_MS);
      expect(exit, `round ${round}: not stopped within ${STOP_WITHIN_MS} ms:\n${dev.output()}`).toEqual({ code: 0, signal: null });
      expect(leftovers(dev, redisPid), `round ${round}`).toEqual([]);
      expect(dev.output()).toContain('draining… (Ctrl-C again to force)');
      expect(dev.output()).not.toMatch(/ECONNREFUSED|forced/);
      dev = undefined;
    }

    // Nothing submitted before a Ctrl-C was lost: once more up, every job has succeeded.
    dev = spawnDev(cwd, env);
    const [, url] = await dev.waitFor(/warmpool is up: (\S+)/);
    redisPid = readLock(cwd).redis?.pid;
    const key = devKey(cwd);
    api = client(url as string, key);
    for (const id of submitted)
      await until(`job ${id} to succeed`, async () => ((await api?.status(id)) === 'succeeded' ? true : undefined));
    process.kill(-dev.pid, 'SIGINT');
    expect(await dev.exited).toEqual({ code: 0, signal: null });
    expect(leftovers(dev, redisPid)).toEqual([]);
  }, 900_000);

  it('stops everything it started when SIGTERM comes while it is still starting', async () => {
    const cwd = devFolder('dev-start-term');
    const env = await devEnv();
    // Twice: once its first worker has just been spawned (the one a start-up signal orphaned),
    // once right after its redis-server started (before the API).
    for (const moment of ['worker', 'redis'] as const) {
      dev = spawnDev(cwd, env);
      const child = dev;
      if (moment === 'worker') {
        await until('a worker process', async () => processesInGroup(child.pid).find((p) => /\bworker\b/.test(p.command)), 120_000);
      } else {
        await child.waitFor(/^redis /m);
      }
      redisPid = await until('the lock to name its redis-server', async () => readLock(cwd).redis?.pid);
      process.kill(child.pid, 'SIGTERM');
      expect(await child.exited).toEqual({ code: 0, signal: null });
      expect(child.output()).toContain('start-up interrupted');
      expect(child.output()).not.toContain('warmpool is up');
      expect(leftovers(child, redisPid), moment).toEqual([]);
      dev = undefined;
    }
  }, 300_000);
});

function client(url: string, key: string) {
  const headers = { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' };
  return {
    async submit(n: number): Promise<string> {
      const data = Array.from({ length: 64 }, (_, j) => (((n * 64 + j) * 0.6180339887) % 1) - 0.5);
      const res = await fetch(`${url}/v1/models/${DEMO}/jobs`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 64], datatype: 'FP32', data }] }),
      });
      const body = (await res.json()) as { id: string };
      expect(res.status).toBe(202);
      return body.id;
    },
    async status(id: string): Promise<string> {
      const res = await fetch(`${url}/v1/jobs/${id}`, { headers });
      return ((await res.json()) as { status: string }).status;
    },
  };
}
