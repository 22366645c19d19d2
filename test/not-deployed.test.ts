/**
 * A newcomer's first requests, over real HTTP and gRPC on the test stack (real Redis, S3 and
 * `warmpool worker` processes): a model that is published but not deployed is refused loudly
 * (409 model_not_deployed naming `warmpool deploy`) instead of queueing a job nothing will run;
 * a deployment whose min is 0 takes jobs and a sync call that times out says why; a worker
 * started by hand serves a model no deployment names; an unknown top-level field is refused
 * naming the field meant, in JSON and in the binary extension's header; a replayed
 * Idempotency-Key names its job's status now.
 */

import { fileURLToPath } from 'node:url';
import { type Client, credentials, loadPackageDefinition, Metadata, type ServiceError, status } from '@grpc/grpc-js';
import { loadSync } from '@grpc/proto-loader';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { KEY_A, startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const PROTO = fileURLToPath(new URL('../api/grpc/grpc_predict_v2.proto', import.meta.url));
const F = 4;
const SYNC_TIMEOUT_MS = 400;
const row = (seed: number) => Array.from({ length: F }, (_, i) => (seed + i) / 10);
const body = (seed = 1, extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(seed) }],
  ...extra,
});

let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({
    GRPC_PORT: '0',
    SYNC_TIMEOUT_MS: String(SYNC_TIMEOUT_MS),
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
  });
  const mlp = buildMlpModel({ features: F, hidden: 8, layers: 1 });
  for (const name of ['published', 'lazy', 'by-hand'])
    await stack.registry.publish({ name, version: '1', bytes: mlp, maxBatch: 8, warmupBatches: [1] });
  // min 0 and no scaler in the test stack: a deployment no worker will come to.
  await stack.deployments.put({ model: 'lazy', version: '1', min: 0, max: 1, standby: 0 });
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

const post = (path: string, payload: unknown, headers: Record<string, string> = {}) =>
  stack.call(path, { method: 'POST', body: JSON.stringify(payload), headers });
const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string; job_id?: string } }).error;

describe('a model that is published but not deployed', () => {
  const fix = 'model published is published but not deployed: run `warmpool deploy published` (or PUT /v1/deployments/published)';

  it('is refused with 409 model_not_deployed naming the fix, async and sync; nothing is queued', async () => {
    for (const path of ['/v1/models/published/jobs', '/v2/models/published/infer', '/v2/models/published/versions/1/infer']) {
      const res = await post(path, body());
      expect(res.status).toBe(409);
      expect(await errorOf(res)).toEqual({ code: 'model_not_deployed', message: fix });
    }
    expect(await stack.withQueue('published', '1', (q) => q.count())).toBe(0);
    // Unknown everywhere is still 404.
    expect((await errorOf(await post('/v1/models/nowhere/jobs', body()))).code).toBe('model_not_found');
  });

  it('is refused over gRPC ModelInfer with FAILED_PRECONDITION and the same message', async () => {
    const definition = loadSync(PROTO, { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true });
    const pkg = loadPackageDefinition(definition) as unknown as {
      inference: { GRPCInferenceService: new (target: string, creds: ReturnType<typeof credentials.createInsecure>) => Client };
    };
    const client = new pkg.inference.GRPCInferenceService(stack.api.grpcUrl as string, credentials.createInsecure()) as Client &
      Record<string, (req: object, md: Metadata, cb: (err: ServiceError | null) => void) => void>;
    try {
      const metadata = new Metadata();
      metadata.set('authorization', `Bearer ${KEY_A}`);
      const request = {
        model_name: 'published',
        inputs: [{ name: 'features', datatype: 'FP32', shape: [1, F], contents: { fp32_contents: row(1) } }],
      };
      const err = await new Promise<ServiceError | null>((resolve) => client.ModelInfer?.(request, metadata, resolve));
      expect(err?.code).toBe(status.FAILED_PRECONDITION);
      expect(err?.details).toBe(fix);
      expect(err?.metadata.get('warmpool-error-code')).toEqual(['model_not_deployed']);
    } finally {
      client.close();
    }
  });
});

describe('a deployment whose min is 0', () => {
  it('takes jobs (the scaler starts a worker)', async () => {
    const res = await post('/v1/models/lazy/jobs', body(2));
    expect(res.status).toBe(202);
    expect(await res.json()).toMatchObject({ status: 'queued', model: 'lazy', version: '1' });
  });

  it('answers a sync call that times out with why: no worker yet, the scaler is starting one', async () => {
    const res = await post('/v2/models/lazy/infer', body(3));
    expect(res.status).toBe(504);
    const error = await errorOf(res);
    expect(error).toMatchObject({ code: 'timeout', job_id: expect.stringMatching(/^job_/) });
    expect(error.message).toBe(
      `inference did not finish within ${SYNC_TIMEOUT_MS} ms: no worker for lazy@1 yet (the deployment's min is 0: the scaler is starting one); poll /v1/jobs/${error.job_id}`,
    );
  });
});

describe('a worker started by hand for a model no deployment names', () => {
  beforeAll(async () => {
    await stack.startWorker('by-hand', '1');
    await stack.waitForWorkers('by-hand', 'active');
  }, 120_000);

  it('serves it: the job is accepted and runs', async () => {
    // The API reads the workers' heartbeats at most once a second (fleet-view.ts): a read taken
    // just before this worker's first beat answers 409 until it is a second old. Nothing is
    // queued by a 409, so asking again is what a client would do.
    const res = await until('the API to see the hand-started worker', async () => {
      const r = await post('/v1/models/by-hand/jobs', body(4, { cache: false }));
      return r.status === 409 ? undefined : r;
    });
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    expect(await waitForJob(stack, id)).toMatchObject({ status: 'succeeded' });
  });

  it('answers a replayed Idempotency-Key with its job as it is now: succeeded once it has', async () => {
    const headers = { 'Idempotency-Key': 'first-hour-1' };
    const first = await post('/v1/models/by-hand/jobs', body(5, { cache: false }), headers);
    const { id, status: queued } = (await first.json()) as { id: string; status: string };
    expect(queued).toBe('queued');
    await waitForJob(stack, id);
    const again = await post('/v1/models/by-hand/jobs', body(5, { cache: false }), headers);
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toMatchObject({ id, status: 'succeeded' });
  });
});

describe('strict request bodies', () => {
  it('refuses an unknown top-level field with 400 unknown_field naming the field meant', async () => {
    const hook = { webhook_url: 'https://hooks.example.com/done' };
    const res = await post('/v1/models/lazy/jobs', body(6, hook));
    expect(res.status).toBe(400);
    expect(await errorOf(res)).toEqual({
      code: 'unknown_field',
      message: '"webhook_url" is not a field of a job request; did you mean "webhook"?',
    });
    expect(await errorOf(await post('/v2/models/lazy/infer', body(6, { priorty: 'high' })))).toEqual({
      code: 'unknown_field',
      message: '"priorty" is not a field of an inference request; did you mean "priority"?',
    });
  });

  it("refuses one in the binary extension's JSON header too; tensor and request parameters stay open", async () => {
    const send = (header: Record<string, unknown>) => {
      const json = Buffer.from(JSON.stringify(header));
      const tensor = Buffer.from(Float32Array.from(row(7)).buffer);
      return stack.call('/v1/models/lazy/jobs', {
        method: 'POST',
        body: new Uint8Array(Buffer.concat([json, tensor])),
        headers: { 'content-type': 'application/octet-stream', 'inference-header-content-length': String(json.length) },
      });
    };
    const inputs = [{ name: 'features', shape: [1, F], datatype: 'FP32', parameters: { binary_data_size: F * 4, note: 'mine' } }];
    const refused = await send({ inputs, callback: 'https://hooks.example.com/' });
    expect(refused.status).toBe(400);
    expect((await errorOf(refused)).code).toBe('unknown_field');
    const accepted = await send({ inputs, parameters: { anything: { goes: 1 } }, cache: false });
    expect(accepted.status).toBe(202);
  });
});
