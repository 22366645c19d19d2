/**
 * Serving's check on warm-up's thread count (worker/thread-governor.ts), through a real worker
 * (in-process, its sessions in a real inference thread), the real API, Redis and S3. Two things
 * are put in the test's hands: the host meter (worker/host-cpu.ts), so the rest of the host's load
 * is what the test says, and the time each forward pass takes at each thread count (a delay after
 * ONNX Runtime's own run), so warm-up chooses every core and the engine is busy while serving.
 * Asserted: on a quiet host the worker keeps its count under load; when the rest of the host
 * takes the cores while it serves, it reloads at 1 thread, once, and every job succeeds.
 */
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createRedis } from '../infra/redis/client.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import type { EngineLoadOptions, InferenceEngine } from '../worker/engine/engine.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import type { HostCpuMeter } from '../worker/host-cpu.ts';
import { STEP_DOWN_WINDOWS } from '../worker/thread-governor.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const MODEL = 'governed';
const F = 8;
const CORES = os.availableParallelism();
/** ms after each pass: every core's count 3× faster than 1 thread, and long enough to keep the engine busy. */
const DELAY_MS = (threads: number) => (threads === 1 ? 60 : 20);

let stack: TestStack;
let worker: WarmpoolWorker;
const loads: EngineLoadOptions[] = [];
/** The cores the rest of the host uses, as the test says. */
let others = 0;
const hostCpu: HostCpuMeter = {
  window: () => () => others,
  sample: async () => others,
};

function delayed(engine: InferenceEngine): InferenceEngine {
  let threads = 0;
  return {
    load: async (modelPath, options) => {
      loads.push(options);
      const info = await engine.load(modelPath, options);
      threads = options.intraOpThreads;
      return info;
    },
    run: async (inputs, outputNames) => {
      const out = await engine.run(inputs, outputNames);
      await new Promise((r) => setTimeout(r, DELAY_MS(threads)));
      return out;
    },
    close: () => engine.close(),
  };
}

beforeAll(async () => {
  if (CORES < 2) return;
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '200', INTRA_OP_THREADS: '0' });
  const bytes = buildMlpModel({ features: F, hidden: 16, layers: 2, seed: 3 });
  await stack.registry.publish({ name: MODEL, version: '1', bytes, maxBatch: 4, warmupBatches: [1, 4] });
  await stack.deployments.put({ model: MODEL, version: '1', min: 0, max: 1, standby: 0 });
  const deps = { config: stack.config, redis: createRedis(stack.config.redisUrl), registry: stack.registry, clock: systemClock };
  worker = new WarmpoolWorker({ ...deps, engine: delayed(createThreadEngine()), log: silentLog, hostCpu }, { model: MODEL, version: '1' });
  await worker.start();
}, 120_000);

afterAll(async () => {
  await worker?.close();
  await stack?.close();
});

/** `count` jobs of `rows` rows, served; each call a different `rows`: the API's result cache must not answer them. */
const served = async (count: number, rows: number) => {
  const ids = await stack.submitMany(MODEL, count, { features: F, rows });
  for (const id of ids) expect((await waitForJob(stack, id, 60_000)).status).toBe('succeeded');
};

describe.skipIf(CORES < 2)('the thread governor', () => {
  it('keeps the count warm-up chose while the host leaves it its cores', async () => {
    expect(worker.batchProfile?.threads).toBe(CORES);
    // The load of the next test, which steps down (STEP_DOWN_WINDOWS busy windows of 200 ms): passes of ≤ 4 rows at ≥ 20 ms.
    await served(300, 2);
    expect(worker.batchProfile?.threads).toBe(CORES);
    expect(loads.map((l) => l.intraOpThreads).at(-1)).toBe(CORES);
  }, 120_000);

  it('reloads at 1 thread, once, when the rest of the host takes the cores while it serves, and loses no job', async () => {
    const before = loads.length;
    others = CORES - 0.5;
    await served(300, 3);
    await until('the worker at 1 thread', async () => (worker.batchProfile?.threads === 1 ? true : undefined));
    expect(loads.slice(before).map((l) => l.intraOpThreads)).toEqual([1]);
    const profile = worker.batchProfile;
    expect(profile?.entries).toEqual(profile?.candidates.find((c) => c.threads === 1)?.entries);
    // It stays there, whatever the host does next (no flapping; a restart asks again).
    others = 0;
    await served(100, 1);
    expect(loads.length).toBe(before + 1);
    expect(STEP_DOWN_WINDOWS).toBeGreaterThan(1);
  }, 180_000);
});
