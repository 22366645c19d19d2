/**
 * A model exported with a fixed batch of 1 (issue 30; `x` [1, 4, 3] → `y` [1, 4, 2]), end to
 * end on real ONNX Runtime, Redis, S3 and a worker process: published without a maxBatch, it is
 * recorded as one row a pass (`batching.fixedBatch: 1`, maxBatch 1, its first axis the batch
 * axis); a maxBatch past it is refused at publish naming the input. Requests of one and of
 * several rows, async and sync, all succeed with ONNX Runtime's own outputs row by row (a request
 * of three rows is three passes: the model takes no other first dimension), and the worker's
 * warm-up profiled batch 1 only — also with BATCH_MAX_ROWS set past it.
 */
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { buildFixedBatchModel } from '../scripts/fixtures/exported-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const model = buildFixedBatchModel();
const ROW = 4 * 3;
let stack: TestStack;
let reference: ort.InferenceSession;

/** `rows` rows of x, different per seed. */
function rowsOf(rows: number, seed: number): number[] {
  return Array.from({ length: rows * ROW }, (_, i) => Math.round(Math.sin(seed * 17 + i * 0.61) * 1000) / 1000);
}

/** ONNX Runtime's y for each row, one pass a row (the model takes no other first dimension). */
async function expected(data: number[], rows: number): Promise<number[]> {
  const out: number[] = [];
  for (let r = 0; r < rows; r++) {
    const x = new ort.Tensor('float32', Float32Array.from(data.slice(r * ROW, (r + 1) * ROW)), [1, 4, 3]);
    const { y } = await reference.run({ x });
    if (!y) throw new Error('ONNX Runtime returned no y');
    out.push(...(y.data as Float32Array));
  }
  return out;
}

beforeAll(async () => {
  // BATCH_MAX_ROWS past the model's fixed batch: the worker still runs one row a pass.
  stack = await startStack({ WARMUP_ITERATIONS: '1', BATCH_MAX_WAIT_MS: '20', HEARTBEAT_INTERVAL_MS: '300', BATCH_MAX_ROWS: '16' });
  reference = await ort.InferenceSession.create(model);
  await stack.registry.publish({ name: 'fixed', version: '1', bytes: model });
  await stack.deployments.put({ model: 'fixed', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('fixed', '1');
  await stack.waitForWorkers('fixed', 'active');
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await reference?.release();
});

describe('a model exported with a fixed batch of 1', () => {
  it('is published as one row a pass, its first axis the batch axis; a larger maxBatch is refused naming the input', async () => {
    const manifest = await stack.registry.getManifest('fixed', '1');
    expect(manifest.batching).toMatchObject({ maxBatch: 1, fixedBatch: 1 });
    expect(manifest.inputs).toEqual([{ name: 'x', datatype: 'FP32', shape: [-1, 4, 3] }]);
    expect(manifest.outputs).toEqual([{ name: 'y', datatype: 'FP32', shape: [-1, 4, 2] }]);
    const refused = await stack.registry.publish({ name: 'fixed-8', version: '1', bytes: model, maxBatch: 8 }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: 'invalid_max_batch' });
    expect((refused as Error).message).toMatch(/fixes its batch at 1 \(input "x" .*maxBatch cannot be 8/);

    const res = await stack.call('/v2/models/fixed');
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 4, 3] }] });
  });

  it('warms up at batch 1 only', async () => {
    const redis = createRedis(stack.config.redisUrl);
    try {
      const beat = (await listHeartbeats(redis, stack.config.queuePrefix)).find((b) => b.model === 'fixed');
      const profile = beat?.batchProfile as { chosenBatch: number; entries: Array<{ batch: number }> } | undefined;
      expect(profile?.chosenBatch).toBe(1);
      expect(profile?.entries.map((e) => e.batch)).toEqual([1]);
    } finally {
      await closeRedis(redis);
    }
  });

  it('serves async requests of one and of several rows at once, each row equal to ONNX Runtime', async () => {
    const requests = [1, 3, 1, 2, 1].map((rows, seed) => ({ rows, data: rowsOf(rows, seed) }));
    const ids = await Promise.all(
      requests.map(async ({ rows, data }) => {
        const res = await stack.call('/v1/models/fixed/jobs', {
          method: 'POST',
          body: JSON.stringify({ inputs: [{ name: 'x', shape: [rows, 4, 3], datatype: 'FP32', data }] }),
        });
        expect(res.status).toBe(202);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    for (const [i, job] of jobs.entries()) {
      const { rows, data } = requests[i] as { rows: number; data: number[] };
      expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
      const [out] = job.outputs as Array<{ name: string; shape: number[]; data: number[] }>;
      expect(out).toMatchObject({ name: 'y', shape: [rows, 4, 2] });
      const want = await expected(data, rows);
      out?.data.forEach((v, k) => {
        expect(v).toBeCloseTo(want[k] as number, 5);
      });
    }
  });

  it('answers a sync inference of two rows equal to ONNX Runtime', async () => {
    const data = rowsOf(2, 99);
    const res = await stack.call('/v2/models/fixed/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [2, 4, 3], datatype: 'FP32', data }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: Array<{ name: string; shape: number[]; data: number[] }> };
    expect(body.outputs[0]).toMatchObject({ name: 'y', shape: [2, 4, 2] });
    const want = await expected(data, 2);
    body.outputs[0]?.data.forEach((v, k) => {
      expect(v).toBeCloseTo(want[k] as number, 5);
    });
  });
});
