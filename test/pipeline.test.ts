/**
 * The core pipeline end to end on real services: publish → deploy → a real worker process
 * (download, sha256 check, load in a worker thread, warm-up) → jobs through the HTTP API →
 * micro-batched forward passes → results equal ONNX Runtime's own output for the same rows.
 */
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { buildFp16Model, buildGatherModel, buildMlpModel, buildMultiTypeModel } from '../scripts/fixtures/onnx-models.ts';
import { INPUT_REJECTED } from '../worker/engine/rejections.ts';
import { KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 16;
const mlp = buildMlpModel({ features: F, hidden: 32, layers: 2 });
let stack: TestStack;
let reference: ort.InferenceSession;

function row(i: number): number[] {
  return Array.from({ length: F }, (_, k) => Math.round(Math.sin(i * 7 + k) * 1000) / 1000);
}

async function expected(rows: number[][]): Promise<number[]> {
  const out = await reference.run({ features: new ort.Tensor('float32', Float32Array.from(rows.flat()), [rows.length, F]) });
  return Array.from(out.score!.data as Float32Array);
}

function submit(model: string, body: unknown, key?: string) {
  return stack.call(`/v1/models/${model}/jobs`, { method: 'POST', body: JSON.stringify(body), ...(key ? { key } : {}) });
}

beforeAll(async () => {
  stack = await startStack({ BATCH_MAX_WAIT_MS: '20', WARMUP_ITERATIONS: '2', HEARTBEAT_INTERVAL_MS: '300' });
  reference = await ort.InferenceSession.create(mlp);
  await stack.registry.publish({ name: 'scorer', version: '1', bytes: mlp, maxBatch: 32, warmupBatches: [1, 8, 32] });
  await stack.registry.publish({ name: 'multi', version: '1', bytes: buildMultiTypeModel(), maxBatch: 16 });
  await stack.registry.publish({ name: 'lookup', version: '1', bytes: buildGatherModel(), maxBatch: 16 });
  await stack.registry.publish({ name: 'half', version: '1', bytes: buildFp16Model(), maxBatch: 8 });
  for (const model of ['scorer', 'multi', 'lookup', 'half'])
    await stack.deployments.put({ model, version: '1', min: 1, max: 1, standby: 0 });
  // Large batch-wait so concurrent single-row jobs visibly share forward passes.
  await stack.startWorker('scorer', '1', { BATCH_MAX_WAIT_MS: '50' });
  await stack.startWorker('multi', '1');
  await stack.startWorker('lookup', '1');
  await stack.startWorker('half', '1');
  await stack.waitForWorkers('scorer', 'active');
  await stack.waitForWorkers('half', 'active');
  await stack.waitForWorkers('multi', 'active');
  await stack.waitForWorkers('lookup', 'active');
}, 180_000);

afterAll(async () => {
  await stack?.close();
  await reference?.release();
});

describe('publish → deploy → submit → results', () => {
  it('concurrent single-row jobs and multi-row jobs equal ONNX Runtime, and single rows share batches', async () => {
    const singles = Array.from({ length: 48 }, (_, i) => [row(i)]);
    const multis = [3, 70].map((n, j) => Array.from({ length: n }, (_, i) => row(1000 * (j + 1) + i)));
    const all = [...singles, ...multis];
    const accepted = await Promise.all(
      all.map(async (rows) => {
        const res = await submit('scorer', {
          inputs: [{ name: 'features', shape: [rows.length, F], datatype: 'FP32', data: rows.flat() }],
        });
        expect(res.status).toBe(202);
        const body = (await res.json()) as { id: string; status: string };
        expect(body.status).toBe('queued');
        return body.id;
      }),
    );
    const finished = await Promise.all(accepted.map((id) => waitForJob(stack, id)));
    for (const [i, job] of finished.entries()) {
      expect(job.status).toBe('succeeded');
      const outputs = job.outputs as Array<{ name: string; shape: number[]; datatype: string; data: number[] }>;
      const rows = all[i]!;
      expect(outputs[0]?.name).toBe('score');
      expect(outputs[0]?.shape).toEqual([rows.length, 1]);
      expect(outputs[0]?.datatype).toBe('FP32');
      const want = await expected(rows);
      outputs[0]!.data.forEach((v, k) => {
        expect(v).toBeCloseTo(want[k]!, 5);
      });
    }
    const batchRows = finished.slice(0, singles.length).map((j) => (j.timings as { batchRows: number }).batchRows);
    expect(Math.max(...batchRows)).toBeGreaterThan(1);
    // The 70-row job is larger than maxBatch (32): it spanned several forward passes.
    expect((finished.at(-1)!.timings as { batchRows: number }).batchRows).toBeLessThanOrEqual(32);

    // Workers publish metric snapshots with each heartbeat: poll until this run's rows show.
    let count = NaN;
    let sum = NaN;
    for (let tries = 0; tries < 100 && sum !== 48 + 3 + 70; tries++) {
      const metrics = await (await stack.call('/metrics')).text(); // tenant-a's key: an admin tenant may read /metrics
      count = Number(/warmpool_batch_rows_count\{[^}]*model="scorer"[^}]*\} (\d+)/.exec(metrics)?.[1]);
      sum = Number(/warmpool_batch_rows_sum\{[^}]*model="scorer"[^}]*\} ([\d.]+)/.exec(metrics)?.[1]);
      if (sum !== 48 + 3 + 70) await new Promise((r) => setTimeout(r, 100));
    }
    expect(sum).toBe(48 + 3 + 70);
    expect(count).toBeLessThan(sum); // fewer forward passes than rows: batching happened

    // The scaler's history saw every row arrive (API) and complete (worker).
    const redis = createRedis(stack.config.redisUrl);
    // Heartbeats say since when a worker is in its state (cold-start timing, the pool view).
    const scorer = (await listHeartbeats(redis, stack.config.queuePrefix)).find((b) => b.model === 'scorer');
    expect(scorer?.state).toBe('active');
    expect(scorer?.stateSince).toBeGreaterThanOrEqual(scorer?.startedAt ?? Number.POSITIVE_INFINITY);
    const history = createArrivalHistory(redis, stack.config.queuePrefix, systemClock);
    const total = (s: { perMinute: number[] }) => s.perMinute.reduce((a, b) => a + b, 0);
    // The API and the worker flush their counts once a second (infra/telemetry/arrival-counter.ts).
    await expect
      .poll(async () => total(await history.series('scorer', Date.now() - 600_000, Date.now())), { timeout: 5_000 })
      .toBe(48 + 3 + 70);
    await expect
      .poll(async () => total(await history.completions('scorer', Date.now() - 600_000, Date.now())), { timeout: 5_000 })
      .toBe(48 + 3 + 70);
    await closeRedis(redis);
  });

  it('serves any input names, ranks and dtypes (FP32 rank 3, INT64, BOOL, INT32)', async () => {
    const res = await submit('multi', {
      inputs: [
        { name: 'x', shape: [2, 2, 2], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6, 7, 8] },
        { name: 'ids', shape: [2, 3], datatype: 'INT64', data: [1, 2, 3, '9007199254740993', 5, 6] },
        { name: 'mask', shape: [2, 3], datatype: 'BOOL', data: [true, false, true, false, false, true] },
        { name: 'n', shape: [2, 1], datatype: 'INT32', data: [21, -4] },
      ],
    });
    expect(res.status).toBe(202);
    const job = await waitForJob(stack, ((await res.json()) as { id: string }).id);
    expect(job.status).toBe('succeeded');
    const byName = Object.fromEntries((job.outputs as Array<{ name: string; data: unknown[]; datatype: string }>).map((o) => [o.name, o]));
    const session = await ort.InferenceSession.create(buildMultiTypeModel());
    const ref = await session.run({
      x: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4, 5, 6, 7, 8]), [2, 2, 2]),
      ids: new ort.Tensor('int64', BigInt64Array.from([1n, 2n, 3n, 9007199254740993n, 5n, 6n]), [2, 3]),
      mask: new ort.Tensor('bool', Uint8Array.from([1, 0, 1, 0, 0, 1]), [2, 3]),
      n: new ort.Tensor('int32', Int32Array.from([21, -4]), [2, 1]),
    });
    await session.release();
    (byName.y!.data as number[]).forEach((v, k) => {
      expect(v).toBeCloseTo((ref.y!.data as Float32Array)[k]!, 5);
    });
    expect(byName.ids_next).toMatchObject({ datatype: 'INT64', data: [2, 3, 4, '9007199254740994', 6, 7] });
    expect(byName.mask_not).toMatchObject({ datatype: 'BOOL', data: [false, true, false, true, true, false] });
    expect(byName.n_double).toMatchObject({ datatype: 'INT32', data: [42, -8] });
  });

  it('serves FP16 (numbers in, IEEE half precision inside, numbers out)', async () => {
    const res = await stack.call('/v2/models/half/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'h', shape: [2, 4], datatype: 'FP16', data: [1, 0.5, -2, 65504, 0.1, 0, -0.25, 3] }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: Array<{ name: string; datatype: string; data: Array<number | null> }> };
    // 65504 (FP16's max) doubled overflows to +Inf, which JSON cannot carry; 0.1 is not exact in FP16.
    expect(body.outputs[0]).toMatchObject({ name: 'h_sum', datatype: 'FP16' });
    const data = body.outputs[0]!.data;
    expect([data[0], data[1], data[2], data[5], data[6], data[7]]).toEqual([2, 1, -4, 0, -0.5, 6]);
    expect(data[4]).toBeCloseTo(0.2, 3);
  });

  it('OIP sync inference goes through the same queue and returns outputs', async () => {
    const res = await stack.call('/v2/models/scorer/infer', {
      method: 'POST',
      body: JSON.stringify({ id: 'req-1', inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(5) }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { model_name: string; model_version: string; id: string; outputs: Array<{ data: number[] }> };
    expect(body).toMatchObject({ model_name: 'scorer', model_version: '1' });
    expect(body.outputs[0]!.data[0]).toBeCloseTo((await expected([row(5)]))[0]!, 5);
  });
});

describe('bad input', () => {
  const good = () => ({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(1) }] });
  const cases: Array<[string, () => RequestInit, number, string]> = [
    ['wrong input name', () => ({ body: JSON.stringify({ inputs: [{ ...good().inputs[0], name: 'feature' }] }) }), 400, 'unknown_input'],
    [
      'shape/data mismatch',
      () => ({ body: JSON.stringify({ inputs: [{ ...good().inputs[0], shape: [2, F] }] }) }),
      400,
      'data_length_mismatch',
    ],
    [
      'wrong trailing dim',
      () => ({ body: JSON.stringify({ inputs: [{ ...good().inputs[0], shape: [2, F / 2] }] }) }),
      400,
      'shape_mismatch',
    ],
    ['wrong dtype', () => ({ body: JSON.stringify({ inputs: [{ ...good().inputs[0], datatype: 'INT64' }] }) }), 400, 'datatype_mismatch'],
    ['malformed JSON', () => ({ body: '{"inputs": [' }), 400, 'malformed_json'],
    [
      'oversized body',
      () => ({
        body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, 1], datatype: 'FP32', data: new Array(3_000_000).fill(0.5) }] }),
      }),
      413,
      'body_too_large',
    ],
  ];
  for (const [name, init, status, code] of cases) {
    it(`${name} → ${status} ${code}`, async () => {
      const res = await stack.call('/v1/models/scorer/jobs', { method: 'POST', ...init() });
      expect(res.status).toBe(status);
      expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({ code });
    });
  }

  it('unknown model → 404', async () => {
    const res = await submit('no-such-model', good());
    expect(res.status).toBe(404);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('model_not_found');
  });

  it('another tenant cannot read a job', async () => {
    const res = await submit('scorer', good());
    const { id } = (await res.json()) as { id: string };
    const other = await stack.call(`/v1/jobs/${id}`, { key: KEY_B });
    expect(other.status).toBe(404);
    expect((await waitForJob(stack, id)).status).toBe('succeeded');
  });

  it('one job the model rejects fails alone; the rest of its batch succeeds and the worker lives on', async () => {
    // Gather indices outside [-8, 8) pass validation (they are valid INT64) but fail the forward pass.
    const idx = [1, 2, 3, 99, 4, 5, 6, 7];
    const ids = await Promise.all(
      idx.map(
        async (i) =>
          (
            (await (await submit('lookup', { inputs: [{ name: 'idx', shape: [1, 1], datatype: 'INT64', data: [i] }] })).json()) as {
              id: string;
            }
          ).id,
      ),
    );
    const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    jobs.forEach((job, k) => {
      if (idx[k] === 99) {
        // The index is the job's fault (ONNX Runtime's message, naming the node, is the worker log's).
        expect(job.status).toBe('failed');
        expect(job.error).toEqual({ code: 'invalid_input', message: INPUT_REJECTED });
      } else {
        expect(job.status).toBe('succeeded');
        expect((job.outputs as Array<{ data: number[] }>)[0]!.data).toEqual([0, 1, 2, 3].map((c) => idx[k]! * 4 + c));
      }
    });
    const after = await submit('lookup', { inputs: [{ name: 'idx', shape: [1, 1], datatype: 'INT64', data: [0] }] });
    expect((await waitForJob(stack, ((await after.json()) as { id: string }).id)).status).toBe('succeeded');
  });
});
