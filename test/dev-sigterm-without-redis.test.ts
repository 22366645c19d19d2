/**
 * A warmpool process whose Redis cannot be reached still stops on SIGTERM. Its drain waits on
 * Redis commands that are never answered (they wait to be resent), so without a bound on the
 * drain the dispatcher, the scaler and a worker each ignored SIGTERM until SIGKILL. Each runs
 * here as a user runs it (bin/warmpool.mjs), against a port nothing listens on; once it has
 * said it cannot reach Redis, SIGTERM: it must exit, forced, with 128 + SIGTERM, saying why.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { freePort } from '../scripts/dev/free-port.ts';
import { devEnv } from './support/dev-child.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));

async function sigtermWithoutRedis(args: string[]): Promise<{ code: number | null; output: string }> {
  // A short drain limit: the worker's drain is forced after it, the scaler's after it and 10 s
  // (what a drain that never ends costs is the point, not its default length).
  const env = await devEnv({ REDIS_URL: `redis://127.0.0.1:${await freePort()}`, LOG_LEVEL: 'warn', DRAIN_LIMIT_MS: '2000' });
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  let signalled = false;
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    // Running, with its signal handlers installed: it has tried Redis and said so.
    if (!signalled && /redis connection error/.test(output)) {
      signalled = true;
      child.kill('SIGTERM');
    }
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (c) => resolve(c)));
  return { code, output };
}

it('the dispatcher, the scaler and a worker stop on SIGTERM when Redis is unreachable', async () => {
  const results = await Promise.all([
    sigtermWithoutRedis(['dispatcher']),
    sigtermWithoutRedis(['scaler']),
    sigtermWithoutRedis(['worker', '--model', 'demo-scorer']),
  ]);
  for (const { code, output } of results) {
    expect(code, output).toBe(143);
    expect(output).toMatch(/"signal":"SIGTERM","reason":"timeout","msg":"forced exit"/);
  }
}, 120_000);
