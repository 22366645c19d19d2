/**
 * The bad-input table: every kind of wrong request we could think of, sent over HTTP to the
 * real app (real BullMQ on real Redis, a real registry on the S3 server). Each must be a 4xx
 * with `{error: {code, message}}` whose message names the problem; none may be a 5xx.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel, buildMultiTypeModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { TEST_API_KEYS, testEnv } from './support/services.ts';

const KEY_A = 'key-aaaaaaaaaaaaaaaa';
const KEY_B = 'key-bbbbbbbbbbbbbbbb';
const KEY_C = 'key-cccccccccccccccc';
const BODY_LIMIT = 65_536;

let config: Config;
let api: TestApi;
/** Same services, a tight rate limit; only tenant-c calls it. */
let limited: TestApi;
let finishedJob: string;
let queuedJob: string;

type Tensor = { name: string; shape: unknown; datatype: unknown; data: unknown };
const MULTI: Tensor[] = [
  { name: 'x', shape: [1, 2, 2], datatype: 'FP32', data: [1, 2, 3, 4] },
  { name: 'ids', shape: [1, 3], datatype: 'INT64', data: [1, 2, 3] },
  { name: 'mask', shape: [1, 3], datatype: 'BOOL', data: [true, false, true] },
  { name: 'n', shape: [1, 1], datatype: 'INT32', data: [7] },
];
/** A valid request for the multi-type model, with some tensors' fields replaced. */
const multi = (patch: Record<string, Partial<Tensor>> = {}, extra: Record<string, unknown> = {}) => ({
  inputs: MULTI.map((t) => ({ ...t, ...patch[t.name] })),
  ...extra,
});
const scorer = (extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'features', shape: [1, 4], datatype: 'FP32', data: [0.1, 0.2, 0.3, 0.4] }],
  ...extra,
});

interface Send {
  path?: string;
  method?: string;
  body?: unknown;
  /** Sent as is (not JSON-encoded). */
  raw?: string;
  key?: string | null;
  headers?: Record<string, string>;
  via?: () => TestApi;
}

function send(s: Send): Promise<Response> {
  const body = s.raw ?? (s.body === undefined ? undefined : JSON.stringify(s.body));
  return (s.via?.() ?? api).call(s.path ?? '/v1/models/multi/jobs', {
    method: s.method ?? (body === undefined ? 'GET' : 'POST'),
    key: s.key === undefined ? KEY_A : s.key,
    headers: s.headers ?? {},
    ...(body === undefined ? {} : { body }),
  });
}

beforeAll(async () => {
  config = loadConfig(testEnv({ BODY_LIMIT_BYTES: String(BODY_LIMIT), API_KEYS: `${TEST_API_KEYS},tenant-c:${KEY_C}` }));
  const store = createS3ObjectStore(config.s3);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  await registry.publish({ name: 'scorer', version: '1', bytes: buildMlpModel({ features: 4, hidden: 8, layers: 1 }), maxBatch: 8 });
  await registry.publish({ name: 'multi', version: '1', bytes: buildMultiTypeModel(), maxBatch: 8 });
  await registry.publish({ name: 'undeployed', version: '1', bytes: buildMlpModel({ features: 4, hidden: 8, layers: 1 }), maxBatch: 8 });
  store.close();
  api = await startTestApi(config);
  limited = await startTestApi(config, { rateLimit: { rps: 0.001, burst: 1 } });
  // Deployed at min 0 (no worker comes: no scaler runs here), so they take jobs; "undeployed" is only published.
  for (const model of ['scorer', 'multi']) {
    expect((await send({ method: 'PUT', path: `/v1/deployments/${model}`, body: { version: '1', min: 0, max: 1 } })).status).toBe(200);
  }

  // The good requests pass, so every refusal below is about what each case changed.
  expect((await send({ body: multi() })).status).toBe(202);
  const queued = await send({ path: '/v1/models/scorer/jobs', body: scorer() });
  expect(queued.status).toBe(202);
  queuedJob = ((await queued.json()) as { id: string }).id;
  // A finished job with no worker: a 1 ms deadline, expired by the first look after it.
  const late = await send({ path: '/v1/models/scorer/jobs', body: scorer({ timeoutMs: 1 }) });
  finishedJob = ((await late.json()) as { id: string }).id;
  for (let status = ''; status !== 'failed'; ) {
    await new Promise((r) => setTimeout(r, 5));
    status = ((await (await send({ path: `/v1/jobs/${finishedJob}` })).json()) as { status: string }).status;
  }
}, 60_000);

afterAll(async () => {
  await limited?.close();
  await api?.close();
});

/** [kind, request, status, error code, what the message must say] */
const TABLE: Array<[string, () => Send, number, string, RegExp]> = [
  // Who is asking
  ['no Authorization header', () => ({ body: multi(), key: null }), 401, 'unauthorized', /missing bearer token/],
  ['an unknown API key', () => ({ body: multi(), key: 'key-notakey' }), 401, 'unauthorized', /unknown API key/],
  [
    'Basic instead of Bearer',
    () => ({ body: multi(), key: null, headers: { Authorization: `Basic ${KEY_A}` } }),
    401,
    'unauthorized',
    /Bearer/,
  ],
  // The body as a whole
  ['malformed JSON', () => ({ raw: '{"inputs": [' }), 400, 'malformed_json', /not valid JSON/],
  [
    'a non-JSON content type',
    () => ({ raw: JSON.stringify(multi()), headers: { 'Content-Type': 'text/plain' } }),
    415,
    'unsupported_media_type',
    /application\/json.*text\/plain/,
  ],
  [
    'a body over the size limit',
    () => ({ raw: JSON.stringify(scorer({ pad: 'x'.repeat(BODY_LIMIT) })) }),
    413,
    'body_too_large',
    /larger than 65536 bytes/,
  ],
  ['a JSON array as the body', () => ({ body: [multi()] }), 400, 'invalid_body', /must be a JSON object/],
  ['a JSON string as the body', () => ({ body: 'inputs' }), 400, 'invalid_body', /must be a JSON object/],
  ['no "inputs"', () => ({ body: { outputs: [] } }), 400, 'invalid_body', /"inputs" must be a non-empty array/],
  ['"inputs" not an array', () => ({ body: { inputs: { x: [1] } } }), 400, 'invalid_body', /"inputs" must be a non-empty array/],
  ['empty "inputs"', () => ({ body: { inputs: [] } }), 400, 'invalid_body', /"inputs" must be a non-empty array/],
  [
    'an input that is not an object',
    () => ({ body: { inputs: [5] } }),
    400,
    'invalid_body',
    /inputs\[0\] must be an object with a string "name"/,
  ],
  // Tensors against the model's metadata
  [
    'an unknown input name',
    () => ({ path: '/v1/models/scorer/jobs', body: { inputs: [{ ...scorer().inputs[0], name: 'feats' }] } }),
    400,
    'unknown_input',
    /unknown input "feats"; the model expects "features"/,
  ],
  ['missing inputs', () => ({ body: { inputs: MULTI.slice(0, 2) } }), 400, 'missing_input', /missing inputs "mask", "n"/],
  ['a duplicated input', () => ({ body: { inputs: [...MULTI, MULTI[0]] } }), 400, 'duplicate_input', /input "x" appears more than once/],
  [
    'the wrong datatype',
    () => ({ body: multi({ x: { datatype: 'FP64' } }) }),
    400,
    'datatype_mismatch',
    /input "x": expected datatype FP32, got FP64/,
  ],
  [
    'an unknown datatype',
    () => ({ body: multi({ x: { datatype: 'FP128' } }) }),
    400,
    'datatype_mismatch',
    /expected datatype FP32, got FP128/,
  ],
  [
    'a shape that is not an array',
    () => ({ body: multi({ x: { shape: '1x2x2' } }) }),
    400,
    'shape_mismatch',
    /"shape" must be an array of integers/,
  ],
  [
    'a negative dimension',
    () => ({ body: multi({ x: { shape: [1, -2, 2] } }) }),
    400,
    'shape_mismatch',
    /shape\[1\] must be a non-negative integer, got -2/,
  ],
  [
    'zero rows',
    () => ({ body: multi({ x: { shape: [0, 2, 2], data: [] } }) }),
    400,
    'shape_mismatch',
    /shape\[0\] \(rows\) must be an integer >= 1, got 0/,
  ],
  ['the wrong rank', () => ({ body: multi({ x: { shape: [1, 4] } }) }), 400, 'shape_mismatch', /expected rank 3/],
  [
    'a fixed dimension that differs',
    () => ({ body: multi({ x: { shape: [1, 2, 3], data: [1, 2, 3, 4, 5, 6] } }) }),
    400,
    'shape_mismatch',
    /axis 2 must be 2/,
  ],
  [
    'inputs with different row counts',
    () => ({ body: multi({ ids: { shape: [2, 3], data: [1, 2, 3, 4, 5, 6] } }) }),
    400,
    'shape_mismatch',
    /all inputs must have the same number of rows/,
  ],
  [
    'data shorter than the shape',
    () => ({ body: multi({ x: { shape: [2, 2, 2] } }) }),
    400,
    'data_length_mismatch',
    /needs 8 values, got 4/,
  ],
  ['"data" not an array', () => ({ body: multi({ x: { data: '1,2,3,4' } }) }), 400, 'invalid_body', /input "x": "data" must be an array/],
  // Values against the datatype
  [
    'a string in FP32',
    () => ({ body: multi({ x: { data: [1, 'a', 3, 4] } }) }),
    400,
    'invalid_value',
    /data\[1\] must be a finite number for FP32, got "a"/,
  ],
  [
    'null (NaN in JSON) in FP32',
    () => ({ raw: JSON.stringify(multi({ x: { data: [Number.NaN, 2, 3, 4] } })) }),
    400,
    'invalid_value',
    /data\[0\] must be a finite number for FP32, got null/,
  ],
  [
    'a fraction in INT32',
    () => ({ body: multi({ n: { data: [1.5] } }) }),
    400,
    'invalid_value',
    /data\[0\] must be an integer in \[-2147483648, 2147483647\] for INT32, got 1.5/,
  ],
  ['an INT32 out of range', () => ({ body: multi({ n: { data: [2 ** 31] } }) }), 400, 'invalid_value', /for INT32, got 2147483648/],
  [
    'a BOOL that is 2',
    () => ({ body: multi({ mask: { data: [true, 2, false] } }) }),
    400,
    'invalid_value',
    /data\[1\] must be true, false, 0 or 1 for BOOL/,
  ],
  [
    'an INT64 non-integer string',
    () => ({ body: multi({ ids: { data: ['1.5', 2, 3] } }) }),
    400,
    'invalid_value',
    /data\[0\] must be an integer .* for INT64, got "1.5"/,
  ],
  [
    'an INT64 beyond 2^63',
    () => ({ body: multi({ ids: { data: ['9223372036854775808', 2, 3] } }) }),
    400,
    'invalid_value',
    /for INT64, got "9223372036854775808"/,
  ],
  [
    'an unknown output',
    () => ({ body: multi({}, { outputs: [{ name: 'nope' }] }) }),
    400,
    'unknown_output',
    /unknown output "nope"; the model has/,
  ],
  // Job options
  [
    'an unknown priority',
    () => ({ body: multi({}, { priority: 'urgent' }) }),
    400,
    'invalid_body',
    /"priority" must be one of high, normal, low/,
  ],
  ['a malformed version', () => ({ body: multi({}, { version: '../1' }) }), 400, 'invalid_body', /"version" must be a version name/],
  [
    'a version not in the registry',
    () => ({ body: multi({}, { version: '9' }) }),
    404,
    'version_not_found',
    /model multi has no version 9/,
  ],
  [
    'a negative timeoutMs',
    () => ({ body: multi({}, { timeoutMs: -5 }) }),
    400,
    'invalid_body',
    /"timeoutMs" must be an integer number of milliseconds from 1 to 86400000, got -5/,
  ],
  [
    'a webhook that is not an object',
    () => ({ body: multi({}, { webhook: 'https://example.com/hook' }) }),
    422,
    'invalid_webhook',
    /webhook must be an object/,
  ],
  [
    'a webhook with an ftp URL',
    () => ({ body: multi({}, { webhook: { url: 'ftp://example.com/hook' } }) }),
    422,
    'invalid_webhook',
    /http or https/,
  ],
  [
    'a webhook to a private address',
    () => ({ body: multi({}, { webhook: { url: 'http://10.0.0.7/hook' } }) }),
    422,
    'webhook_url_blocked',
    /10\.0\.0\.7 is blocked/,
  ],
  [
    'a webhook to the metadata address',
    () => ({ body: multi({}, { webhook: { url: 'http://169.254.169.254/' } }) }),
    422,
    'webhook_url_blocked',
    /169\.254\.169\.254 is blocked/,
  ],
  [
    'a webhook with an unknown event',
    () => ({ body: multi({}, { webhook: { url: 'https://example.com/h', events: ['job.exploded'] } }) }),
    422,
    'invalid_webhook',
    /unknown event "job.exploded"/,
  ],
  [
    'a misspelt option',
    () => ({ body: multi({}, { webhook_url: 'https://example.com/h' }) }),
    400,
    'unknown_field',
    /^"webhook_url" is not a field of a job request; did you mean "webhook"\?$/,
  ],
  [
    'an Idempotency-Key over 255 characters',
    () => ({ body: multi(), headers: { 'Idempotency-Key': 'k'.repeat(256) } }),
    400,
    'invalid_idempotency_key',
    /1 to 255 printable ASCII characters/,
  ],
  // Things that do not exist (or are not the caller's)
  ['an unknown model', () => ({ path: '/v1/models/ghost/jobs', body: scorer() }), 404, 'model_not_found', /no model named ghost/],
  [
    'a model name that cannot exist',
    () => ({ path: '/v1/models/bad.name/jobs', body: scorer() }),
    404,
    'model_not_found',
    /no model named "bad.name"/,
  ],
  [
    'a model published but not deployed',
    () => ({ path: '/v1/models/undeployed/jobs', body: scorer() }),
    409,
    'model_not_deployed',
    /^model undeployed is published but not deployed: run `warmpool deploy undeployed` \(or PUT \/v1\/deployments\/undeployed\)$/,
  ],
  ['an unknown job id', () => ({ path: '/v1/jobs/job_doesnotexist' }), 404, 'job_not_found', /no job job_doesnotexist/],
  ['a job id with odd characters', () => ({ path: '/v1/jobs/a:b*c' }), 404, 'job_not_found', /no job a:b\*c/],
  ["another tenant's job", () => ({ path: `/v1/jobs/${queuedJob}`, key: KEY_B }), 404, 'job_not_found', /no job job_/],
  ['events of an unknown job', () => ({ path: '/v1/jobs/job_doesnotexist/events' }), 404, 'job_not_found', /no job job_doesnotexist/],
  ['canceling an unknown job', () => ({ path: '/v1/jobs/job_doesnotexist', method: 'DELETE' }), 404, 'job_not_found', /no job/],
  [
    'canceling a finished job',
    () => ({ path: `/v1/jobs/${finishedJob}`, method: 'DELETE' }),
    409,
    'job_finished',
    /has already failed; only a queued job can be canceled/,
  ],
  ['an unknown route', () => ({ path: '/v1/nope' }), 404, 'route_not_found', /no route for GET \/v1\/nope/],
  // Sync inference validates the same way
  [
    'sync inference with the wrong datatype',
    () => ({ path: '/v2/models/multi/infer', body: multi({ n: { datatype: 'INT64' } }) }),
    400,
    'datatype_mismatch',
    /input "n": expected datatype INT32, got INT64/,
  ],
  ['sync inference on an unknown model', () => ({ path: '/v2/models/ghost/infer', body: scorer() }), 404, 'model_not_found', /ghost/],
  [
    'sync inference on a model published but not deployed',
    () => ({ path: '/v2/models/undeployed/infer', body: scorer() }),
    409,
    'model_not_deployed',
    /warmpool deploy undeployed/,
  ],
];

describe('bad input', () => {
  it('covers more than 20 kinds', () => {
    expect(TABLE.length).toBeGreaterThan(20);
  });

  it.each(TABLE)('%s → %i %s', async (_kind, request, status, code, message) => {
    const res = await send(request());
    const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } };
    expect({ status: res.status, code: body.error?.code }).toEqual({ status, code });
    expect(body.error?.message).toMatch(message);
    expect(Object.keys(body)).toEqual(['error']);
  });

  it('the same Idempotency-Key with another body → 409 idempotency_key_reused', async () => {
    const headers = { 'Idempotency-Key': 'table-key' };
    expect((await send({ body: multi(), headers })).status).toBe(202);
    const res = await send({ body: multi({ n: { data: [8] } }), headers });
    expect(res.status).toBe(409);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'idempotency_key_reused',
      message: expect.stringMatching(/different request/),
    });
  });

  it('over the rate limit → 429 rate_limited with Retry-After', async () => {
    expect((await send({ path: '/v1/models', key: KEY_C, via: () => limited })).status).toBe(200);
    const res = await send({ path: '/v1/models', key: KEY_C, via: () => limited });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await res.json()) as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'rate_limited',
      message: expect.stringMatching(/retry in \d+ s/),
    });
  });
});
