/**
 * A worker whose inference engine dies while serving stops serving: it reports `failed` (with
 * the reason) in its heartbeat, `engineLost` rejects so its entry exits non-zero and the pool
 * starts a fresh one, and the jobs it held go back for another attempt instead of failing.
 * The engine here is the real thread engine behind the narrow InferenceEngine interface, with
 * its thread's death simulated at the one call that matters.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import type { InferenceEngine } from '../worker/engine/engine.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { testEnv } from './support/services.ts';

const config = loadConfig(testEnv({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TTL_MS: '5000' }));
const store = createS3ObjectStore(config.s3);
const registry = createModelRegistry({ store, prefix: config.s3.prefix });
const redis = createRedis(config.redisUrl);
const jobs = createBullJobQueue({ connection: config.redisUrl, prefix: config.queuePrefix, retentionS: 600, attempts: 3 });

beforeAll(async () => {
  await registry.publish({ name: 'fragile', version: '1', bytes: buildMlpModel({ features: 8, hidden: 8, layers: 1 }), maxBatch: 8 });
});

afterAll(async () => {
  await jobs.close();
  await closeRedis(redis);
  store.close();
});

it('an engine that dies mid-service fails the worker and sends its jobs back for another attempt', async () => {
  const real = createThreadEngine();
  let dead = false;
  const engine: InferenceEngine = {
    load: (path, options) => real.load(path, options),
    run: (inputs, outputs) => (dead ? Promise.reject(new Error('inference thread exited (code 1)')) : real.run(inputs, outputs)),
    close: () => real.close(),
  };
  const worker = new WarmpoolWorker(
    { config, redis: createRedis(config.redisUrl), registry, engine, clock: systemClock, log: createLogger('silent') },
    { model: 'fragile', version: '1' },
  );
  await worker.start();
  dead = true;

  const id = 'job_engine_lost_1';
  await jobs.enqueue(
    {
      tenant: 't',
      model: 'fragile',
      version: '1',
      rows: 1,
      inputs: [{ name: 'features', shape: [1, 8], datatype: 'FP32', data: Float32Array.of(1, 2, 3, 4, 5, 6, 7, 8) }],
      submittedAt: Date.now(),
    },
    { priority: 'normal', jobId: id },
  );
  await expect(worker.engineLost).rejects.toThrow(/inference thread exited/);
  expect(worker.currentState).toBe('failed');
  await worker.close();

  const view = await jobs.get(id);
  expect(view?.status).toBe('queued'); // back off and retry, not failed
  expect(view?.attemptsMade).toBe(1);
  const beats = (await listHeartbeats(redis, config.queuePrefix)).filter((b) => b.model === 'fragile');
  expect(beats.map((b) => b.state)).toEqual(['stopped']);
  expect(beats[0]?.error).toMatch(/inference engine lost: inference thread exited/);
});
