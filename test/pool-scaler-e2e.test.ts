/**
 * A shared pool end to end, wired as `warmpool dev` wires it: the scaler (with its pool
 * controller) and the local provider forking real `warmpool worker --pool` processes, two API
 * processes' worth of API, real Redis/S3 and ONNX Runtime. The pool boots a standby holding no
 * model; 50 concurrent first requests for a model no worker holds, split over two APIs, are all
 * queued (never refused), cause exactly one placement (counted from every holdings write the
 * workers were sent), and every answer equals ONNX Runtime's for that model. No assertion here is
 * about time: every wait is "eventually".
 */

import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PoolProvider } from '../infra/contracts/pool.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { type HoldingsMessage, parseHoldings } from '../infra/fleet/pool-holdings.ts';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createLocalProvider } from '../infra/pool/local-provider.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { holdingsChannel } from '../infra/redis/keys.ts';
import { type RunningScaler, startScaler } from '../infra/scaler/main.ts';
import { createPoolDecisionLog } from '../infra/scaler/pool-decisions.ts';
import { buildDistinctMlpModels } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { KEY_A, startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const F = 16;
const POOL = 'tail';
const MODELS = buildDistinctMlpModels(2, { features: F, hidden: 32, firstSeed: 3100 });
let stack: TestStack;
let otherApi: TestApi;
let provider: PoolProvider;
let scaler: RunningScaler;
let redis: RedisClient;
let subscriber: RedisClient;
const sessions = new Map<string, ort.InferenceSession>();
/** Every holdings write any worker was sent, in order. */
const writes: Array<{ workerId: string; message: HoldingsMessage }> = [];

beforeAll(async () => {
  stack = await startStack({
    SCALER_TICK_MS: '300',
    HEARTBEAT_INTERVAL_MS: '300',
    HEARTBEAT_TTL_MS: '3000',
    WARMUP_ITERATIONS: '1',
    INTRA_OP_THREADS: '1',
  });
  redis = createRedis(stack.config.redisUrl);
  const prefix = stack.config.queuePrefix;
  subscriber = createRedis(stack.config.redisUrl);
  const bell = holdingsChannel(prefix, '');
  subscriber.on('pmessage', (_pattern: string, channel: string, body: string) => {
    const message = parseHoldings(body);
    if (message) writes.push({ workerId: channel.slice(bell.length), message });
  });
  await subscriber.psubscribe(`${bell}*`);
  // At most one worker: every copy of a model is then a second load, which this test would count.
  await createSharedPoolStore(redis, prefix).put({ name: POOL, max: 1, min: 1, standby: 0, memoryMb: 512 });
  for (const [i, bytes] of MODELS.entries()) {
    const name = `tail-${i}`;
    await stack.registry.publish({ name, version: '1', bytes, maxBatch: 8, warmupBatches: [1, 8] });
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    sessions.set(name, await ort.InferenceSession.create(bytes));
  }
  provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    env: stack.env,
    redis,
    prefix,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });
  scaler = startScaler(stack.config, createLogger('silent'), provider);
  otherApi = await startTestApi(stack.config);
}, 120_000);

afterAll(async () => {
  await scaler?.close();
  await provider?.close();
  await otherApi?.close();
  if (subscriber) await closeRedis(subscriber);
  if (redis) await closeRedis(redis);
  for (const s of sessions.values()) await s.release();
  await stack?.close();
});

const row = (i: number) => Array.from({ length: F }, (_, k) => Math.sin(i + k));

async function submit(call: TestStack['call'], model: string, i: number): Promise<string> {
  const res = await call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    key: KEY_A,
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(i) }], cache: false }),
  });
  if (res.status !== 202) throw new Error(`submit to ${model} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

async function expected(model: string, i: number): Promise<number> {
  const out = await (sessions.get(model) as ort.InferenceSession).run({
    features: new ort.Tensor('float32', Float32Array.from(row(i)), [1, F]),
  });
  return (out.score as ort.Tensor).data[0] as number;
}

/** How many times a worker was told to hold `model` when its previous holdings did not list it: the placements. */
function placements(model: string): number {
  const last = new Map<string, boolean>();
  let count = 0;
  for (const { workerId, message } of writes) {
    const has = message.models.some((m) => m.model === model);
    if (has && !last.get(workerId)) count++;
    last.set(workerId, has);
  }
  return count;
}

const poolBeats = async () => (await listHeartbeats(redis, stack.config.queuePrefix)).filter((b) => b.pool === POOL);

it('50 concurrent first requests over two APIs are all queued, cause one placement, and are answered by that model', async () => {
  const standby = await until(
    'a standby pool worker holding nothing',
    async () => (await poolBeats()).find((b) => b.state === 'standby' && (b.models ?? []).length === 0),
    120_000,
  );
  expect(placements('tail-0')).toBe(0);

  const calls = [stack.call.bind(stack), otherApi.call.bind(otherApi)];
  const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => submit(calls[i % 2] as TestStack['call'], 'tail-0', i)));
  const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 120_000)));
  for (const [i, job] of jobs.entries()) {
    expect(job.status).toBe('succeeded');
    const score = (job.outputs as Array<{ name: string; data: number[] }>).find((o) => o.name === 'score')?.data[0];
    expect(score).toBeCloseTo(await expected('tail-0', i), 5);
  }
  expect(placements('tail-0')).toBe(1);
  const holders = (await poolBeats()).filter((b) => b.models?.some((m) => m.model === 'tail-0' && m.state === 'active'));
  expect(holders.map((b) => b.id)).toEqual([standby.id]);
  expect((await poolBeats()).length).toBeLessThanOrEqual(1);

  // The model no worker asked for stays unplaced, and the decisions explain the pool.
  expect(placements('tail-1')).toBe(0);
  const [latest] = await createPoolDecisionLog(redis, stack.config.queuePrefix).recent(POOL, 1);
  expect(latest?.models.map((m) => m.model).sort()).toEqual(['tail-0@1', 'tail-1@1']);
}, 240_000);
