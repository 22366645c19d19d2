/**
 * A vision model whose images may be any size (`x` [b, 3, H, W], the shape of a PaddleOCR
 * text-direction classifier), end to end: published without a warm-up shape (warm-up tries
 * sizes: its old 1×1 pass failed this unpadded conv net, and the worker ended `failed`) and with
 * one (`--warmup-shape x:3,48,192`); real worker processes warm up and serve; requests of two
 * image sizes at once, which the API queues apart (an entry holds one shape) and the worker runs
 * as one forward pass per shape, all succeed with ONNX Runtime's own outputs. A model no
 * candidate size fits fails its warm-up naming the input and the flag.
 */
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { buildDynamicImageModel } from '../scripts/fixtures/onnx-models.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const CLASSES = 2;
const cls = buildDynamicImageModel();
let stack: TestStack;
let reference: ort.InferenceSession;

/** `rows` images of h×w, different per `seed`. */
function images(rows: number, h: number, w: number, seed: number): Float32Array {
  return Float32Array.from({ length: rows * 3 * h * w }, (_, i) => Math.round(Math.sin(seed * 131 + i * 0.37) * 1000) / 1000);
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', BATCH_MAX_WAIT_MS: '30', HEARTBEAT_INTERVAL_MS: '300' });
  reference = await ort.InferenceSession.create(cls);
  await stack.registry.publish({ name: 'cls', version: '1', bytes: cls, maxBatch: 8, warmupBatches: [1, 8] });
  await stack.registry.publish({ name: 'cls-hinted', version: '1', bytes: cls, maxBatch: 8, warmupShapes: { x: [3, 48, 192] } });
  for (const model of ['cls', 'cls-hinted']) {
    await stack.deployments.put({ model, version: '1', min: 1, max: 1, standby: 0 });
    await stack.startWorker(model, '1');
  }
  await stack.waitForWorkers('cls', 'active');
  await stack.waitForWorkers('cls-hinted', 'active');
}, 180_000);

afterAll(async () => {
  await stack?.close();
  await reference?.release();
});

describe('a model with dynamic image dimensions', () => {
  it("warms up at a size that runs, or at the manifest's, and reports it in the heartbeat's batch profile", async () => {
    const redis = createRedis(stack.config.redisUrl);
    try {
      const beats = await listHeartbeats(redis, stack.config.queuePrefix);
      const profileOf = (model: string) => beats.find((b) => b.model === model)?.batchProfile as { inputShapes?: unknown } | undefined;
      expect(profileOf('cls')?.inputShapes).toEqual({ x: [3, 32, 32] });
      expect(profileOf('cls-hinted')?.inputShapes).toEqual({ x: [3, 48, 192] });
    } finally {
      await closeRedis(redis);
    }
  });

  it.each(['cls', 'cls-hinted'])('%s serves requests of two image sizes at once, each equal to ONNX Runtime', async (model) => {
    // 48×192 (the classifier's own size) and 20×36, single- and multi-row, interleaved.
    const requests = [
      { rows: 1, h: 48, w: 192 },
      { rows: 1, h: 20, w: 36 },
      { rows: 2, h: 48, w: 192 },
      { rows: 3, h: 20, w: 36 },
      { rows: 1, h: 48, w: 192 },
      { rows: 1, h: 20, w: 36 },
    ].map((r, seed) => ({ ...r, data: images(r.rows, r.h, r.w, seed) }));
    const ids = await Promise.all(
      requests.map(async ({ rows, h, w, data }) => {
        const res = await stack.call(`/v1/models/${model}/jobs`, {
          method: 'POST',
          body: JSON.stringify({ inputs: [{ name: 'x', shape: [rows, 3, h, w], datatype: 'FP32', data: Array.from(data) }] }),
        });
        expect(res.status).toBe(202);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    for (const [i, job] of jobs.entries()) {
      const { rows, h, w, data } = requests[i]!;
      expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
      const [out] = job.outputs as Array<{ name: string; shape: number[]; data: number[] }>;
      expect(out).toMatchObject({ name: 'logits', shape: [rows, CLASSES] });
      const want = (await reference.run({ x: new ort.Tensor('float32', data, [rows, 3, h, w]) })).logits!.data as Float32Array;
      out!.data.forEach((v, k) => {
        expect(v).toBeCloseTo(want[k]!, 5);
      });
    }
  });
});

describe('a model no candidate size fits', () => {
  it('fails its warm-up naming the input and --warmup-shape', async () => {
    // In-process (the sources, not dist/), so the error is the worker's own, not a heartbeat that ends with the process.
    const model = 'any-channels';
    await stack.registry.publish({ name: model, version: '1', bytes: buildDynamicImageModel({ dynamicChannels: true }), maxBatch: 4 });
    const worker = new WarmpoolWorker(
      {
        config: stack.config,
        redis: createRedis(stack.config.redisUrl),
        registry: stack.registry,
        engine: createThreadEngine(),
        clock: systemClock,
        log: silentLog,
      },
      { model, version: '1' },
    );
    try {
      const err = await worker.start().catch((e: unknown) => e);
      expect(worker.currentState).toBe('failed');
      expect((err as Error).message).toMatch(/no forward pass ran with input x \[-1, -1, -1, -1\] .*--warmup-shape x:C,H,W$/);
    } finally {
      await worker.close();
    }
  });
});
