/**
 * The worker's health endpoint (worker/health-server.ts) over a real worker — Redis, S3 and ONNX
 * Runtime, in this process — as Kubernetes probes and the AWS host agent use it: not ready while
 * the model downloads, loads and warms, ready once warmed (in standby too), and `/drain` (the
 * preStop hook) drains the worker and answers only once it has stopped.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { WorkerState } from '../infra/contracts/worker-state.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createRedis } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import { startHealthServer } from '../worker/health-server.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { testEnv } from './support/services.ts';

const config = loadConfig(testEnv({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TTL_MS: '5000' }));
const store = createS3ObjectStore(config.s3);
const registry = createModelRegistry({ store, prefix: config.s3.prefix });

beforeAll(async () => {
  const bytes = buildMlpModel({ features: 32, hidden: 256, layers: 2, seed: 3 });
  await registry.publish({ name: 'probed', version: '1', bytes, maxBatch: 16, warmupBatches: [1, 16] });
});

afterAll(() => store.close());

async function probe(url: string): Promise<{ status: number; state: WorkerState }> {
  const res = await fetch(url);
  return { status: res.status, state: ((await res.json()) as { state: WorkerState }).state };
}

it('is not ready until warm-up has finished, is ready in standby, and /drain answers once stopped', async () => {
  const worker = new WarmpoolWorker(
    {
      config,
      redis: createRedis(config.redisUrl),
      registry,
      engine: createThreadEngine(),
      clock: systemClock,
      log: createLogger('silent'),
    },
    { model: 'probed', version: '1' },
    { startAs: 'standby' },
  );
  // Probes sent as the worker enters each state; each answer names the state it was computed from.
  const seen: Array<Promise<{ status: number; state: WorkerState }>> = [];
  const health = await startHealthServer({ source: worker, port: 0, host: '127.0.0.1', drain: () => worker.close() });
  try {
    worker.on('worker:state', () => {
      seen.push(probe(`${health.url}/ready`));
    });
    expect(await probe(`${health.url}/ready`)).toEqual({ status: 503, state: 'launching' });
    expect((await probe(`${health.url}/live`)).status).toBe(200);

    await worker.start();
    const ready = await probe(`${health.url}/ready`);
    expect(ready).toEqual({ status: 200, state: 'standby' });
    const during = await Promise.all(seen);
    expect(during).toHaveLength(4); // downloading, loading, warming, standby
    // Whichever states the probes caught, only a warmed one was ready.
    for (const answer of during) expect(answer.status).toBe(answer.state === 'standby' ? 200 : 503);

    const drained = await probe(`${health.url}/drain`);
    expect(drained).toEqual({ status: 200, state: 'stopped' });
    expect(worker.currentState).toBe('stopped');
    expect(await probe(`${health.url}/ready`)).toEqual({ status: 503, state: 'stopped' });
    expect((await fetch(`${health.url}/nothing`)).status).toBe(404);
  } finally {
    await worker.close();
    await health.close();
    await health.close(); // idempotent
  }
});

it('/live turns 503 once the worker has failed', async () => {
  const worker = new WarmpoolWorker(
    {
      config,
      redis: createRedis(config.redisUrl),
      registry,
      engine: createThreadEngine(),
      clock: systemClock,
      log: createLogger('silent'),
    },
    { model: 'no-such-model', version: '1' },
  );
  const health = await startHealthServer({ source: worker, port: 0, host: '127.0.0.1' });
  try {
    await expect(worker.start()).rejects.toThrow();
    expect(await probe(`${health.url}/live`)).toEqual({ status: 503, state: 'failed' });
    expect((await probe(`${health.url}/ready`)).status).toBe(503);
    expect((await fetch(`${health.url}/drain`)).status).toBe(404); // no drain given: no such route
  } finally {
    await worker.close();
    await health.close();
  }
});
