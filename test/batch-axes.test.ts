/**
 * Models that do not batch on their first axis (issue 30), on real ONNX Runtime, Redis, S3 and
 * worker processes, through the API as a client sends them (the model's own shapes):
 * - a VAD-like model, `input [N, 4]`, a recurrent `state [2, N, 3]` with the rows on axis 1 and
 *   an int64 scalar `sr`: its plan is read from the model's symbolic dimension names; requests
 *   with different `sr` values, sent at once, each get ONNX Runtime's answer for their own rows
 *   (the output scales with `sr`, so a row that shared a pass with another value would be off);
 * - a model whose only input is fixed-shape (`x [2, 3]` → `y [3]`): one request a forward pass,
 *   the shape exact, and — on a worker with two sessions — more than one pass at once.
 * Sync and async answers equal ONNX Runtime run directly on each request.
 */
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFixedShapeModel, buildVadLikeModel } from '../scripts/fixtures/exported-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const vad = buildVadLikeModel();
const fixed = buildFixedShapeModel();
let stack: TestStack;
const sessions: Record<string, ort.InferenceSession> = {};

interface Tensor {
  name: string;
  shape: number[];
  datatype: string;
  data: number[];
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', BATCH_MAX_WAIT_MS: '30', HEARTBEAT_INTERVAL_MS: '300' });
  sessions.vad = await ort.InferenceSession.create(vad);
  sessions.fixed = await ort.InferenceSession.create(fixed);
  await stack.registry.publish({ name: 'vad', version: '1', bytes: vad, maxBatch: 16 });
  await stack.deployments.put({ model: 'vad', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('vad', '1');
  await stack.registry.publish({ name: 'fixed', version: '1', bytes: fixed });
  await stack.deployments.put({ model: 'fixed', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('fixed', '1', { SESSIONS_PER_WORKER: '2' });
  await stack.waitForWorkers('vad', 'active');
  await stack.waitForWorkers('fixed', 'active');
}, 120_000);

afterAll(async () => {
  await stack?.close();
  for (const s of Object.values(sessions)) await s.release();
});

/** A VAD request of `rows` rows in the model's layout, its values from `seed`. */
function vadRequest(rows: number, sr: number, seed: number): Tensor[] {
  const values = (n: number, k: number) => Array.from({ length: n }, (_, i) => Math.round(Math.sin(seed * 7 + k * 13 + i) * 100) / 100);
  return [
    { name: 'input', datatype: 'FP32', shape: [rows, 4], data: values(rows * 4, 1) },
    { name: 'state', datatype: 'FP32', shape: [2, rows, 3], data: values(2 * rows * 3, 2) },
    { name: 'sr', datatype: 'INT64', shape: [], data: [sr] },
  ];
}

/** ONNX Runtime's outputs for the request's tensors, as the API shows them. */
async function direct(session: ort.InferenceSession, inputs: Tensor[]): Promise<Array<{ name: string; shape: number[]; data: number[] }>> {
  const feeds: Record<string, ort.Tensor> = {};
  for (const t of inputs) {
    feeds[t.name] =
      t.datatype === 'INT64'
        ? new ort.Tensor('int64', BigInt64Array.from(t.data.map(BigInt)), t.shape)
        : new ort.Tensor('float32', Float32Array.from(t.data), t.shape);
  }
  const out = await session.run(feeds);
  return session.outputNames.map((name) => {
    const t = out[name] as ort.Tensor;
    return { name, shape: [...t.dims], data: Array.from(t.data as Float32Array) };
  });
}

function expectClose(got: unknown, want: Array<{ name: string; shape: number[]; data: number[] }>) {
  const outputs = got as Array<{ name: string; shape: number[]; data: number[] }>;
  expect(outputs.map((o) => [o.name, o.shape])).toEqual(want.map((o) => [o.name, o.shape]));
  outputs.forEach((o, i) => {
    o.data.forEach((v, k) => {
      expect(v).toBeCloseTo(want[i]?.data[k] as number, 4);
    });
  });
}

async function metric(pattern: RegExp, until: (v: number) => boolean): Promise<number> {
  let value = Number.NaN;
  for (let tries = 0; tries < 100; tries++) {
    value = Number(pattern.exec(await (await stack.call('/metrics')).text())?.[1]);
    if (until(value)) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  return value;
}

describe('a model with its rows on axis 1 and a scalar input', () => {
  it('is published with the plan read from its dimension names, and shows the model its own shapes', async () => {
    const manifest = await stack.registry.getManifest('vad', '1');
    expect(manifest.inputs.map((i) => [i.name, i.shape, i.batchAxis])).toEqual([
      ['input', [-1, 4], undefined],
      ['state', [-1, 2, 3], 1],
      ['sr', [-1], 'none'],
    ]);
    const meta = (await (await stack.call('/v2/models/vad')).json()) as { inputs: Tensor[]; outputs: Tensor[] };
    expect(meta.inputs.map((i) => [i.name, i.shape])).toEqual([
      ['input', [-1, 4]],
      ['state', [2, -1, 3]],
      ['sr', []],
    ]);
    expect(meta.outputs.map((o) => [o.name, o.shape])).toEqual([
      ['output', [-1, 1]],
      ['stateN', [2, -1, 3]],
    ]);
  });

  it('answers sync in the model layout, equal to ONNX Runtime', async () => {
    const inputs = vadRequest(3, 16_000, 1);
    const res = await stack.call('/v2/models/vad/infer', { method: 'POST', body: JSON.stringify({ inputs }) });
    expect(res.status).toBe(200);
    expectClose(((await res.json()) as { outputs: unknown }).outputs, await direct(sessions.vad as ort.InferenceSession, inputs));
  });

  it('answers requests with different sr values sent at once, each with its own (they never share a pass)', async () => {
    const requests = Array.from({ length: 12 }, (_, i) => vadRequest(1 + (i % 3), i % 2 === 0 ? 8_000 : 16_000, 10 + i));
    const ids = await Promise.all(
      requests.map(async (inputs) => {
        const res = await stack.call('/v1/models/vad/jobs', { method: 'POST', body: JSON.stringify({ inputs, cache: false }) });
        expect(res.status).toBe(202);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    for (const [i, job] of jobs.entries()) {
      expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
      expectClose(job.outputs, await direct(sessions.vad as ort.InferenceSession, requests[i] as Tensor[]));
    }
  });

  it('answers a repeat from the result cache in the model layout too', async () => {
    const inputs = vadRequest(2, 8_000, 77);
    const submit = async () => {
      const res = await stack.call('/v1/models/vad/jobs', { method: 'POST', body: JSON.stringify({ inputs }) });
      expect(res.status).toBe(202);
      return waitForJob(stack, ((await res.json()) as { id: string }).id);
    };
    const first = await submit();
    expect(first.status).toBe('succeeded');
    let repeat = await submit();
    for (let tries = 0; tries < 20 && repeat.cached !== true; tries++) repeat = await submit();
    expect(repeat).toMatchObject({ status: 'succeeded', cached: true });
    expect(repeat.outputs).toEqual(first.outputs);
    expectClose(repeat.outputs, await direct(sessions.vad as ort.InferenceSession, inputs));
  });

  it('refuses a state with its rows on the wrong axis, naming the model shape', async () => {
    const inputs = vadRequest(2, 8_000, 3);
    (inputs[1] as Tensor).shape = [2, 2, 3];
    (inputs[1] as Tensor).data = Array(12).fill(0);
    (inputs[0] as Tensor).shape = [3, 4];
    (inputs[0] as Tensor).data = Array(12).fill(0);
    const res = await stack.call('/v2/models/vad/infer', { method: 'POST', body: JSON.stringify({ inputs }) });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/shape\[1\] is 2 but "input" has 3/);
  });
});

describe('a model whose only input is fixed-shape', () => {
  const request = (seed: number): Tensor[] => [
    { name: 'x', datatype: 'FP32', shape: [2, 3], data: Array.from({ length: 6 }, (_, i) => seed + i / 10) },
  ];

  it('runs one request a pass, sync and async, equal to ONNX Runtime', async () => {
    const manifest = await stack.registry.getManifest('fixed', '1');
    expect(manifest.batching).toMatchObject({ maxBatch: 1, fixedBatch: 1 });
    const meta = (await (await stack.call('/v2/models/fixed')).json()) as { inputs: Tensor[]; outputs: Tensor[] };
    expect(meta.inputs[0]?.shape).toEqual([2, 3]);
    expect(meta.outputs[0]?.shape).toEqual([3]);
    const res = await stack.call('/v2/models/fixed/infer', { method: 'POST', body: JSON.stringify({ inputs: request(1) }) });
    expect(res.status).toBe(200);
    expectClose(((await res.json()) as { outputs: unknown }).outputs, await direct(sessions.fixed as ort.InferenceSession, request(1)));
    const wrong = await stack.call('/v2/models/fixed/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2, 3], data: Array(6).fill(0) }] }),
    });
    expect(wrong.status).toBe(400);
  });

  it('answers concurrent single requests all, with more than one pass at once on two sessions', async () => {
    const requests = Array.from({ length: 40 }, (_, i) => request(100 + i));
    const ids = await Promise.all(
      requests.map(async (inputs) => {
        const res = await stack.call('/v1/models/fixed/jobs', { method: 'POST', body: JSON.stringify({ inputs, cache: false }) });
        expect(res.status).toBe(202);
        return ((await res.json()) as { id: string }).id;
      }),
    );
    const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    for (const [i, job] of jobs.entries()) {
      expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
      expectClose(job.outputs, await direct(sessions.fixed as ort.InferenceSession, requests[i] as Tensor[]));
    }
    expect(await metric(/warmpool_worker_sessions\{[^}]*model="fixed"[^}]*\} ([\d.]+)/, (v) => v === 2)).toBe(2);
    expect(await metric(/warmpool_worker_sessions_busy_max\{[^}]*model="fixed"[^}]*\} ([\d.]+)/, (v) => v >= 2)).toBe(2);
    // One request a pass: every pass carried one row.
    const rows = await metric(/warmpool_batch_rows_sum\{[^}]*model="fixed"[^}]*\} ([\d.]+)/, (v) => v >= 41);
    expect(await metric(/warmpool_batch_rows_count\{[^}]*model="fixed"[^}]*\} ([\d.]+)/, (v) => v >= 41)).toBe(rows);
  });
});
