/**
 * Models as users bring them (issue 30). A classifier as scikit-learn exports it, with a ZipMap output (a sequence of maps) beside its
 * tensor ones (issue 30), on real ONNX Runtime, Redis, S3 and a worker process: published as it
 * is, it is refused at publish naming the output and the `--outputs` to give (before, ONNX Runtime
 * for Node failed every request with "Non tensor type is temporarily not supported"); published
 * with `outputs: ['label', 'probabilities']`, its worker warms up and serves sync and async
 * requests with ONNX Runtime's own values for those outputs, the ZipMap never fetched. A request
 * for the output left out is refused naming what is served. And a model with an optional input
 * that has a default (an initializer listed among the inputs): served with the request leaving
 * it out, equal to ONNX Runtime run without it.
 */
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildOptionalInputModel, buildZipMapClassifierModel } from '../scripts/fixtures/exported-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const model = buildZipMapClassifierModel();
const X = [1, 2, 3, -1, 0, 1, 0.5, -2, 0.25];
let stack: TestStack;
let reference: ort.InferenceSession;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', BATCH_MAX_WAIT_MS: '20', HEARTBEAT_INTERVAL_MS: '300' });
  reference = await ort.InferenceSession.create(model);
  await stack.registry.publish({ name: 'skl', version: '1', bytes: model, maxBatch: 8, outputs: ['label', 'probabilities'] });
  await stack.deployments.put({ model: 'skl', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('skl', '1');
  await stack.registry.publish({ name: 'opt', version: '1', bytes: buildOptionalInputModel(), maxBatch: 8 });
  await stack.deployments.put({ model: 'opt', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('opt', '1');
  await stack.waitForWorkers('skl', 'active');
  await stack.waitForWorkers('opt', 'active');
}, 120_000);

afterAll(async () => {
  await stack?.close();
  await reference?.release();
});

/** ONNX Runtime's label and probabilities for the rows, fetched by name (the ZipMap left out). */
async function expected(rows: number): Promise<{ label: number[]; probabilities: number[] }> {
  const got = await reference.run({ x: new ort.Tensor('float32', Float32Array.from(X.slice(0, rows * 3)), [rows, 3]) }, [
    'label',
    'probabilities',
  ]);
  return {
    label: Array.from(got.label?.data as BigInt64Array, Number),
    probabilities: Array.from(got.probabilities?.data as Float32Array),
  };
}

function expectOutputs(
  outputs: Array<{ name: string; shape: number[]; data: number[] }>,
  rows: number,
  want: { label: number[]; probabilities: number[] },
) {
  expect(outputs.map((o) => o.name)).toEqual(['label', 'probabilities']);
  const [label, probs] = outputs as [(typeof outputs)[0], (typeof outputs)[0]];
  expect(label).toMatchObject({ shape: [rows], data: want.label });
  expect(probs.shape).toEqual([rows, 2]);
  probs.data.forEach((v, k) => {
    expect(v).toBeCloseTo(want.probabilities[k] as number, 6);
  });
}

describe('a model with a non-tensor output', () => {
  it('is refused at publish as it is, naming the output and the --outputs that serves it', async () => {
    const err = await stack.registry.publish({ name: 'skl-all', version: '1', bytes: model }).catch((e: unknown) => e);
    expect(err).toMatchObject({ code: 'invalid_model' });
    expect((err as Error).message).toBe(
      'output "output_probability" is a sequence of maps (sequenceType), which ONNX Runtime for Node cannot return; ' +
        'serve only the tensor outputs: --outputs label,probabilities',
    );
    const manifest = await stack.registry.getManifest('skl', '1');
    expect(manifest.outputs.map((o) => o.name)).toEqual(['label', 'probabilities']);
  });

  it('serves its tensor outputs sync, equal to ONNX Runtime', async () => {
    const res = await stack.call('/v2/models/skl/infer', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [3, 3], datatype: 'FP32', data: X }] }),
    });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { outputs: Array<{ name: string; shape: number[]; data: number[] }> };
    expectOutputs(body.outputs, 3, await expected(3));
  });

  it('serves them async too, and refuses a request for the output left out', async () => {
    const res = await stack.call('/v1/models/skl/jobs', {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'x', shape: [2, 3], datatype: 'FP32', data: X.slice(0, 6) }] }),
    });
    expect(res.status).toBe(202);
    const job = await waitForJob(stack, ((await res.json()) as { id: string }).id);
    expect(job.status, JSON.stringify(job.error)).toBe('succeeded');
    expectOutputs(job.outputs as Array<{ name: string; shape: number[]; data: number[] }>, 2, await expected(2));

    const zip = await stack.call('/v2/models/skl/infer', {
      method: 'POST',
      body: JSON.stringify({
        inputs: [{ name: 'x', shape: [1, 3], datatype: 'FP32', data: X.slice(0, 3) }],
        outputs: [{ name: 'output_probability' }],
      }),
    });
    expect(zip.status).toBe(400);
    expect(((await zip.json()) as { error: { message: string } }).error.message).toMatch(/output_probability/);
  });
});

describe('a model with an optional input that has a default', () => {
  it('lists only the required input and serves requests that leave the optional one out, equal to ONNX Runtime', async () => {
    const manifest = await stack.registry.getManifest('opt', '1');
    expect(manifest.inputs.map((i) => i.name)).toEqual(['x']);
    const session = await ort.InferenceSession.create(buildOptionalInputModel());
    try {
      const data = [1, 2, 3, 4];
      const want = Array.from(
        (await session.run({ x: new ort.Tensor('float32', Float32Array.from(data), [2, 2]) })).y?.data as Float32Array,
      );
      expect(want).toEqual([11, -8, 13, -6]);
      const res = await stack.call('/v2/models/opt/infer', {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'x', shape: [2, 2], datatype: 'FP32', data }] }),
      });
      expect(res.status).toBe(200);
      const body = (await res.json()) as { outputs: Array<{ name: string; shape: number[]; data: number[] }> };
      expect(body.outputs[0]).toMatchObject({ name: 'y', shape: [2, 2], data: want });
      const job = await stack.call('/v1/models/opt/jobs', {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'x', shape: [2, 2], datatype: 'FP32', data }] }),
      });
      const done = await waitForJob(stack, ((await job.json()) as { id: string }).id);
      expect(done.outputs).toMatchObject([{ name: 'y', shape: [2, 2], data: want }]);
    } finally {
      await session.release();
    }
  });
});
