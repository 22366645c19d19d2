/**
 * A shared pool loses a worker mid-traffic, on real processes as `warmpool dev` wires them (the
 * scaler's pool controller, the local provider's `warmpool worker --pool` processes, the API, real
 * Redis/S3 and ONNX Runtime): the worker holding the most models is SIGKILLed while jobs for all of
 * them keep coming. Nothing accepted is lost (BullMQ hands the killed worker's jobs back), every
 * answer equals ONNX Runtime's for its model, the killed worker's models are placed on the workers
 * left, and the pool never runs more workers than its max. Every wait is "eventually".
 */

import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { PoolProvider } from '../infra/contracts/pool.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { type HeartbeatPayload, listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createLocalProvider } from '../infra/pool/local-provider.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { type RunningScaler, startScaler } from '../infra/scaler/main.ts';
import { buildDistinctMlpModels } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const F = 16;
const POOL = 'kill';
const MAX = 2;
const NAMES = Array.from({ length: 8 }, (_, i) => `kill-${i}`);
const MODELS = buildDistinctMlpModels(NAMES.length, { features: F, hidden: 32, firstSeed: 4100 });
let stack: TestStack;
let provider: PoolProvider;
let scaler: RunningScaler;
let redis: RedisClient;
const sessions = new Map<string, ort.InferenceSession>();
let mostWorkers = 0;

beforeAll(async () => {
  stack = await startStack({
    SCALER_TICK_MS: '300',
    HEARTBEAT_INTERVAL_MS: '300',
    HEARTBEAT_TTL_MS: '2000',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    WARMUP_ITERATIONS: '1',
    INTRA_OP_THREADS: '1',
  });
  redis = createRedis(stack.config.redisUrl);
  await createSharedPoolStore(redis, stack.config.queuePrefix).put({ name: POOL, max: MAX, min: MAX, standby: 0, memoryMb: 1024 });
  for (const [i, name] of NAMES.entries()) {
    const bytes = MODELS[i] as Uint8Array;
    await stack.registry.publish({ name, version: '1', bytes, maxBatch: 8, warmupBatches: [1, 8] });
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    sessions.set(name, await ort.InferenceSession.create(bytes));
  }
  provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    env: stack.env,
    redis,
    prefix: stack.config.queuePrefix,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });
  scaler = startScaler(stack.config, createLogger('silent'), provider);
}, 120_000);

afterAll(async () => {
  await scaler?.close();
  await provider?.close();
  if (redis) await closeRedis(redis);
  for (const s of sessions.values()) await s.release();
  await stack?.close();
});

async function poolBeats(): Promise<HeartbeatPayload[]> {
  const beats = (await listHeartbeats(redis, stack.config.queuePrefix)).filter((b) => b.pool === POOL && b.state !== 'stopped');
  // A killed worker's last heartbeat outlives it by its TTL: only live processes count as running.
  mostWorkers = Math.max(mostWorkers, beats.filter((b) => alive(b.pid)).length);
  return beats;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const activeModels = (b: HeartbeatPayload) => (b.models ?? []).filter((m) => m.state === 'active').map((m) => m.model);

async function expected(model: string, i: number): Promise<number> {
  const row = Float32Array.from({ length: F }, (_, k) => Math.sin(i + k));
  const out = await (sessions.get(model) as ort.InferenceSession).run({ features: new ort.Tensor('float32', row, [1, F]) });
  return (out.score as ort.Tensor).data[0] as number;
}

/** Jobs for every model (`submitMany`'s data: job i's row is sin(i + k)), by model. */
async function traffic(perModel: number): Promise<Map<string, string[]>> {
  const ids = await Promise.all(NAMES.map((m) => stack.submitMany(m, perModel, { features: F })));
  return new Map(NAMES.map((m, i) => [m, ids[i] as string[]]));
}

async function expectAnswered(batches: Array<Map<string, string[]>>): Promise<void> {
  for (const batch of batches) {
    for (const [model, ids] of batch) {
      const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 180_000)));
      for (const [i, job] of jobs.entries()) {
        expect(job.status, `${model} job ${i}: ${JSON.stringify(job.error)}`).toBe('succeeded');
        const score = (job.outputs as Array<{ name: string; data: number[] }>).find((o) => o.name === 'score')?.data[0];
        expect(score).toBeCloseTo(await expected(model, i), 5);
      }
    }
  }
}

it('a worker SIGKILLed mid-traffic loses no job, and its models are placed on the workers left', async () => {
  await until(
    'the pool at its minimum, warm',
    async () => ((await poolBeats()).filter((b) => b.state === 'standby' || b.state === 'active').length === MAX ? true : undefined),
    120_000,
  );
  const first = await traffic(6);
  // Every model held somewhere, and some worker holding several.
  const placed = await until(
    'every model placed',
    async () => {
      const beats = await poolBeats();
      const held = new Set(beats.flatMap(activeModels));
      return NAMES.every((m) => held.has(m)) ? beats : undefined;
    },
    180_000,
  );
  const victim = [...placed].sort((a, b) => activeModels(b).length - activeModels(a).length)[0] as HeartbeatPayload;
  const itsModels = activeModels(victim);
  expect(itsModels.length).toBeGreaterThan(1);

  // More jobs, then the kill while they are in flight.
  const during = await traffic(6);
  process.kill(victim.pid, 'SIGKILL');
  const after = await traffic(4);
  await expectAnswered([first, during, after]);

  // Its models live on other workers now (once its heartbeat's TTL has run out).
  await until(
    "the killed worker's models placed on the workers left",
    async () => {
      const beats = await poolBeats();
      if (beats.some((b) => b.id === victim.id)) return undefined;
      const held = new Set(beats.flatMap(activeModels));
      return itsModels.every((m) => held.has(m)) ? true : undefined;
    },
    120_000,
  );
  expect(mostWorkers).toBeLessThanOrEqual(MAX);
}, 300_000);
