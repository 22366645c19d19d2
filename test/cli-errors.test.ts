/**
 * Expected failures through the real bin/warmpool.mjs: one line saying what is wrong and a hint,
 * never a stack trace unless --debug (or WARMPOOL_DEBUG=1) asks for one, and no command hangs on
 * a Redis that is down. Against the suite's real S3 server, and ports nobody listens on.
 */
import { mkdirSync, mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { type CliResult, runCli } from './support/cli-child.ts';
import { testEnv, testServices } from './support/services.ts';

/** The real CLI; one still running after 30 s is killed (a hang: its signal says so). */
function cli(args: string[], options: { env: NodeJS.ProcessEnv; cwd: string }): Promise<CliResult> {
  return runCli(args, options);
}

let dead: number;
/** A folder with what a stopped `warmpool dev` leaves: a dev.env naming endpoints nobody answers on. */
let staleDir: string;
/** The environment of a new terminal: nothing warmpool-specific set. */
let bareEnv: NodeJS.ProcessEnv;

beforeAll(async () => {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  dead = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  staleDir = mkdtempSync(path.join(testServices().tmpDir, 'cli-stale-'));
  mkdirSync(path.join(staleDir, '.warmpool'));
  writeFileSync(
    path.join(staleDir, '.warmpool', 'dev.env'),
    [
      `REDIS_URL=redis://127.0.0.1:${dead}`,
      `S3_ENDPOINT=http://127.0.0.1:${dead + 1}`,
      'S3_BUCKET=warmpool',
      'AWS_ACCESS_KEY_ID=S3RVER',
      'AWS_SECRET_ACCESS_KEY=S3RVER',
      `WARMPOOL_URL=http://127.0.0.1:${dead + 2}`,
      '',
    ].join('\n'),
  );
  // Written three hours ago, by a `warmpool dev` that has stopped since.
  const written = new Date(Date.now() - 3 * 3_600_000);
  utimesSync(path.join(staleDir, '.warmpool', 'dev.env'), written, written);
  bareEnv = { ...process.env };
  for (const name of ['REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'WARMPOOL_DEBUG'])
    delete bareEnv[name];
});

const staleRedis = (command: string) => [
  `warmpool ${command}: cannot reach Redis at redis://127.0.0.1:${dead} (from .warmpool/dev.env): is \`warmpool dev\` (npm start) running in this folder?`,
  '.warmpool/dev.env is stale: the `warmpool dev` that wrote it 3 h ago no longer answers there. Start `warmpool dev` (npm start) again, which rewrites it, or delete the file and set REDIS_URL.',
  '',
];

describe('the stack is not running: a stale .warmpool/dev.env', () => {
  it.each(
    [
      ['deployments'],
      ['deploy', 'm'],
      ['bulk', 'status', 'run-1'],
      ['bulk', 'cancel', 'run-1'],
      ['migrate-keys', '--dry-run'],
      ['api'],
    ].map((args) => [args.join(' '), args] as const),
  )('warmpool %s: two lines naming Redis, the file and what to do, exit 1, no hang', async (_, args) => {
    const res = await cli([...args], { env: bareEnv, cwd: staleDir });
    expect({ code: res.code, signal: res.signal, stderr: res.stderr }).toEqual({
      code: 1,
      signal: null,
      stderr: staleRedis(args[0] === 'bulk' ? `bulk ${args[1]}` : (args[0] as string)).join('\n'),
    });
  });

  it('warmpool models list: the same for S3', async () => {
    const res = await cli(['models', 'list'], { env: bareEnv, cwd: staleDir });
    expect(res.code).toBe(1);
    expect(res.stderr.split('\n')).toEqual([
      `warmpool models list: cannot reach S3 at http://127.0.0.1:${dead + 1} (from .warmpool/dev.env): is \`warmpool dev\` (npm start) running in this folder?`,
      expect.stringMatching(/^\.warmpool\/dev\.env is stale: .* or delete the file and set S3_ENDPOINT\.$/),
      '',
    ]);
  });

  it('--debug, or WARMPOOL_DEBUG=1, adds the stack trace under the same line', async () => {
    for (const [args, env] of [
      [['deployments', '--debug'], bareEnv],
      [['deployments'], { ...bareEnv, WARMPOOL_DEBUG: '1' }],
    ] as const) {
      const res = await cli([...args], { env, cwd: staleDir });
      expect(res.code).toBe(1);
      expect(res.stderr.startsWith(staleRedis('deployments').slice(0, 2).join('\n'))).toBe(true);
      expect(res.stderr).toMatch(/ServiceUnreachableError: cannot reach Redis[^\n]*\n\s+at /);
      expect(res.stderr).toContain('ECONNREFUSED');
    }
  });
});

describe('set in the environment', () => {
  it('Redis down: names REDIS_URL, one line, no dev.env talk', async () => {
    const env = testEnv({ REDIS_URL: `redis://127.0.0.1:${dead}` });
    const res = await cli(['deployments'], { env, cwd: staleDir });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(`warmpool deployments: cannot reach Redis at redis://127.0.0.1:${dead} (REDIS_URL): is Redis running there?\n`);
  });

  it('a bucket that does not exist', async () => {
    const env = testEnv({ S3_BUCKET: 'no-such-bucket-anywhere' });
    const res = await cli(['models', 'list'], { env, cwd: staleDir });
    expect(res.code).toBe(1);
    expect(res.stderr).toBe(
      `warmpool models list: S3 bucket "no-such-bucket-anywhere" does not exist at ${env.S3_ENDPOINT}\n` +
        'create it, or set S3_BUCKET to a bucket that exists (S3_BUCKET is "no-such-bucket-anywhere")\n',
    );
  });

  it('credentials S3 refuses', async () => {
    const env = testEnv({ AWS_ACCESS_KEY_ID: 'NOT-A-KEY' });
    const res = await cli(['models', 'list'], { env, cwd: staleDir });
    expect(res.code).toBe(1);
    expect(res.stderr.split('\n')[0]).toBe(`warmpool models list: S3 at ${env.S3_ENDPOINT} refused the credentials (InvalidAccessKeyId)`);
    expect(res.stderr.split('\n')[1]).toMatch(/^check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \(keys from the environment\)/);
  });

  it('a model that is not published, and a deployment that does not exist', async () => {
    const env = testEnv();
    const show = await cli(['models', 'show', 'nope'], { env, cwd: staleDir });
    expect(show.code).toBe(1);
    expect(show.stderr).toBe(
      'warmpool models show: no model named nope in the registry\n' +
        '`warmpool models list` shows what is published; `warmpool models publish` adds a model\n',
    );
    const rollback = await cli(['rollback', 'nope'], { env, cwd: staleDir });
    expect(rollback.code).toBe(2);
    expect(rollback.stderr).toBe(
      'warmpool rollback: model nope is not deployed\n`warmpool deployments` lists what is deployed; `warmpool deploy M` deploys a model\n',
    );
  });
});
