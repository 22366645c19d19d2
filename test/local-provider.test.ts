/**
 * The local pool provider on real worker processes (`warmpool worker`, real Redis, S3 and ONNX
 * Runtime): workers it launches progress through the lifecycle to the state asked for, move
 * between standby and active when told, drain without being killed, and close() leaves no
 * process behind. The shared provider behaviour suite runs against it too.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import type { PoolProvider, PoolTarget, PoolWorker } from '../infra/contracts/pool.ts';
import { WORKER_STATES, type WorkerState } from '../infra/contracts/worker-state.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createLocalProvider } from '../infra/pool/local-provider.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { poolProviderBehaviour } from './support/pool-provider-behaviour.ts';
import { processAlive } from './support/process-alive.ts';
import { startStack, type TestStack } from './support/stack.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const target: PoolTarget = { model: 'lp-mlp', version: '1' };
let stack: TestStack;
let redis: RedisClient;
let provider: PoolProvider | undefined;

/** A provider the afterEach hook closes. */
function ownProvider(): PoolProvider {
  provider = makeProvider();
  return provider;
}

beforeAll(async () => {
  stack = await startStack({ HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TTL_MS: '2000', WARMUP_ITERATIONS: '1', INTRA_OP_THREADS: '1' });
  redis = createRedis(stack.config.redisUrl);
  const bytes = buildMlpModel({ features: 16, hidden: 32, layers: 2, seed: 11 });
  await stack.registry.publish({ name: target.model, version: target.version, bytes, maxBatch: 8, warmupBatches: [1, 8] });
}, 60_000);

afterEach(async () => {
  await provider?.close();
  provider = undefined;
});

afterAll(async () => {
  if (redis) await closeRedis(redis);
  await stack?.close();
});

function makeProvider(): PoolProvider {
  return createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    // The API's secrets set, as in a dev stack's environment: the workers must not get them.
    env: { ...stack.env, API_KEYS: 'lp:lp-key-0123456789abcdef', METRICS_TOKEN: 'lp-metrics-token-0123456789' },
    redis,
    prefix: stack.config.queuePrefix,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
    drainGraceMs: 5_000,
    drainTimeoutMs: 15_000,
  });
}

/** Polls list until `check` holds; `observe` sees every listing. */
async function poll(p: PoolProvider, check: (ws: PoolWorker[]) => boolean, observe?: (ws: PoolWorker[]) => void): Promise<PoolWorker[]> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const workers = await p.list(target);
    observe?.(workers);
    if (check(workers)) return workers;
    if (Date.now() > deadline) throw new Error(`condition not met; last list ${JSON.stringify(workers)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const byHandle = (ws: PoolWorker[], handle: string) => ws.find((w) => w.handle === handle);
const order = (s: WorkerState) => WORKER_STATES.indexOf(s);

it('launches workers that progress to the state asked for, steers them, drains one, closes the rest', async () => {
  const p = ownProvider();
  await p.launch(target, 1, { startAs: 'active' });
  await p.launch(target, 1, { startAs: 'standby' });
  const first = await p.list(target);
  expect(first).toHaveLength(2);
  const [a, b] = first.map((w) => w.handle) as [string, string];
  // A worker authenticates nobody: the API's keys are not in its environment (issue 33).
  for (const pid of [a, b]) {
    const environ = readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    expect(environ.some((v) => v.startsWith('QUEUE_PREFIX=') || v.startsWith('REDIS_URL='))).toBe(true);
    expect(environ.filter((v) => v.startsWith('API_KEYS=') || v.startsWith('METRICS_TOKEN='))).toEqual([]);
  }
  for (const w of first)
    if (w.id.startsWith('pending-')) expect(w).toEqual({ id: `pending-${w.handle}`, state: 'launching', handle: w.handle });

  // States only move forward through the lifecycle, and the listed id, once real, stays.
  const seen = new Map<string, WorkerState[]>();
  const ids = new Map<string, string>();
  const record = (ws: PoolWorker[]) => {
    for (const w of ws) {
      const states = seen.get(w.handle) ?? [];
      if (states.at(-1) !== w.state) states.push(w.state);
      seen.set(w.handle, states);
      if (w.id.startsWith('pending-')) continue;
      expect(ids.get(w.handle) ?? w.id).toBe(w.id);
      ids.set(w.handle, w.id);
    }
  };
  record(first);
  const warmed = await poll(p, (ws) => byHandle(ws, a)?.state === 'active' && byHandle(ws, b)?.state === 'standby', record);
  for (const states of seen.values()) expect(states.map(order)).toEqual([...states.map(order)].sort((x, y) => x - y));
  const idA = byHandle(warmed, a)!.id;
  const idB = byHandle(warmed, b)!.id;

  await p.setState(target, idB, 'active');
  await p.setState(target, idA, 'standby');
  await poll(p, (ws) => byHandle(ws, a)?.state === 'standby' && byHandle(ws, b)?.state === 'active');

  await p.drain(target, idA);
  await poll(
    p,
    (ws) => byHandle(ws, a) === undefined,
    (ws) => expect(byHandle(ws, b)?.state).toBe('active'),
  );
  await poll(p, () => !processAlive(Number(a)));

  await p.close();
  await p.close();
  expect(processAlive(Number(b))).toBe(false);
  expect(await p.list(target)).toEqual([]);
}, 180_000);

it('forwards a setState given before the first heartbeat, and drains a worker that is still starting', async () => {
  const p = ownProvider();
  await p.launch(target, 2, { startAs: 'standby' });
  const [early, starting] = (await p.list(target)) as [PoolWorker, PoolWorker];
  // A process takes far longer to boot than this list took: neither has a heartbeat id yet.
  expect([early.id, starting.id]).toEqual([`pending-${early.handle}`, `pending-${starting.handle}`]);
  await p.setState(target, early.id, 'active');
  await p.drain(target, starting.id);
  await p.drain(target, starting.id);
  const [only] = await poll(
    p,
    (ws) => ws.length === 1 && ws[0]!.state === 'active',
    (ws) => expect(ws.every((w) => w.state !== 'failed')).toBe(true),
  );
  expect(only!.handle).toBe(early.handle);
  await poll(p, () => !processAlive(Number(starting.handle)));
}, 180_000);

it('a crashed worker disappears from the list', async () => {
  const p = ownProvider();
  await p.launch(target, 1, { startAs: 'standby' });
  const [w] = await poll(p, (ws) => ws[0]?.state === 'standby');
  process.kill(Number(w!.handle), 'SIGKILL');
  await poll(p, (ws) => ws.length === 0);
}, 180_000);

poolProviderBehaviour('local', async () => ({ provider: makeProvider(), target, cleanup: async () => {} }));
