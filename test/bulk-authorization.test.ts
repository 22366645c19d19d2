/**
 * Storage authorization for bulk runs (issue 20, class 1), as a hostile tenant would try it, on
 * the real services: the API over real HTTP, Redis, the S3 server, a real worker scoring chunks
 * and the bulk supervisor driving runs. Tenant A and tenant B each have one bulk location
 * (BULK_LOCATIONS); A also has a location in a bucket that does not exist.
 *
 * Every refusal is checked for its status and code, and for what it did not do: A's objects and
 * the registry's are listed before and after B's attempts (keys, sizes, etags), and a run B was
 * refused is not recorded.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBulkRuns, createBulkWiring, startBulkSupervisor } from '../infra/bulk/index.ts';
import type { BulkRunSpec } from '../infra/contracts/bulk.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { bulkRunKey, bulkRunningKey } from '../infra/redis/keys.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { TEST_BUCKET, testBulkPrefix, uniqueId } from './support/services.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

interface RunBody {
  id: string;
  status: string;
  input: string;
  output: string;
  progress: { rowsDone: number };
  badRowSamples: Array<{ object: string; line: number; message: string }>;
  error?: { code: string; message: string };
}
interface ErrorBody {
  error: { code: string; message: string };
}

const MODEL = 'authz-model';
const FEATURES = 4;
const S3_PREFIX = uniqueId('s3');
const A_AREA = testBulkPrefix(S3_PREFIX, 'tenant-a');
const B_AREA = testBulkPrefix(S3_PREFIX, 'tenant-b');
/** Buckets tenant-a is granted that the S3 server does not have. */
const MISSING = [1, 2, 3].map((n) => `authz-missing-${n}-${uniqueId('b').toLowerCase().replace(/_/g, '-')}`.slice(0, 60));
const url = (key: string, bucket = TEST_BUCKET) => `s3://${bucket}/${key}`;

let stack: TestStack;
let api: TestApi;
let wiring: ReturnType<typeof createBulkWiring>;
let supervisor: { close(): Promise<void> };
let redis: RedisClient;
let s3: ObjectStore & { close(): void };

const asA = (path: string, init: RequestInit = {}) => api.call(path, { ...init, key: KEY_A });
const asB = (path: string, init: RequestInit = {}) => api.call(path, { ...init, key: KEY_B });
const start = (call: typeof asA, body: unknown) => call('/v1/bulk-runs', { method: 'POST', body: JSON.stringify(body) });

async function expectError(res: Response, status: number, code: string): Promise<ErrorBody['error']> {
  const body = (await res.json()) as ErrorBody;
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(body.error.code).toBe(code);
  return body.error;
}

async function putRows(prefix: string, object: string, ids: string[], extra: string[] = []): Promise<void> {
  const lines = ids.map((id, n) => JSON.stringify({ id, features: Array.from({ length: FEATURES }, (_, k) => (n + k) / 10) }));
  await s3.put(`${prefix}${object}.jsonl`, `${[...lines, ...extra].join('\n')}\n`);
}

/** Every object under `prefix`: key, size, etag. */
async function snapshot(prefix: string): Promise<string[]> {
  return (await s3.list(prefix)).map((o) => `${o.key} ${o.sizeBytes} ${o.etag ?? ''}`);
}

async function idsInParts(prefix: string): Promise<string[]> {
  const ids: string[] = [];
  for (const { key } of await s3.list(prefix)) {
    if (!/part-\d{6}\.jsonl$/.test(key)) continue;
    const text = Buffer.from((await s3.getBytes(key)) ?? []).toString('utf8');
    for (const line of text.split('\n').filter(Boolean)) ids.push((JSON.parse(line) as { id: string }).id);
  }
  return ids.sort();
}

async function settle(call: typeof asA, id: string, timeoutMs = 60_000): Promise<RunBody> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call(`/v1/bulk-runs/${id}`);
    expect(res.status).toBe(200);
    const run = (await res.json()) as RunBody;
    if (run.status !== 'running') return run;
    if (Date.now() > deadline) throw new Error(`bulk run ${id} still running after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

beforeAll(async () => {
  stack = await startStack({
    S3_PREFIX,
    BULK_LOCATIONS: [`tenant-a:${url(A_AREA)},${MISSING.map((b) => `s3://${b}/`).join(',')}`, `tenant-b:${url(B_AREA)}`].join(';'),
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
    // A start holds an active-run slot from before its S3 checks (test/bulk-run-caps.test.ts): the
    // burst below starts 47 at once, each refused, and is about S3 clients, not that cap.
    MAX_ACTIVE_BULK_RUNS_PER_TENANT: '64',
  });
  redis = createRedis(stack.config.redisUrl);
  s3 = createS3ObjectStore(stack.config.s3);
  // The API under test runs bulk runs through a wiring this file holds, so its S3 clients can be counted.
  wiring = createBulkWiring(stack.config, { redis, log: createLogger('silent') });
  api = await startTestApi(stack.config, { deps: { bulkRuns: createBulkRuns(wiring.deps) } });
  supervisor = startBulkSupervisor(wiring.deps, { owner: 'authz-test', pollMs: 100, drive: { pollMs: 100, progressIntervalMs: 100 } });
  await stack.registry.publish({
    name: MODEL,
    version: '1',
    bytes: buildMlpModel({ features: FEATURES, hidden: 8, layers: 1 }),
    maxBatch: 16,
  });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker(MODEL, '1');
  await stack.waitForWorkers(MODEL, 'active');
}, 120_000);

afterAll(async () => {
  await supervisor?.close();
  await api?.close();
  wiring?.close();
  s3?.close();
  if (redis) await closeRedis(redis);
  await stack?.close();
});

describe('tenant A’s run, and what tenant B cannot do to it', () => {
  const aIn = `${A_AREA}private/in/`;
  const aOut = `${A_AREA}private/out/`;
  const bIn = `${B_AREA}mine/in/`;
  const aIds = ['a-secret-1', 'a-secret-2', 'a-secret-3'];
  let aRun: RunBody;
  let before: { a: string[]; registry: string[] };
  const registry = `${S3_PREFIX}/models/`;

  beforeAll(async () => {
    await putRows(aIn, 'rows', aIds, ['{"id": "a-bad-row", "features": "the start of a private line"}']);
    await putRows(bIn, 'rows', ['b-1']);
    const res = await start(asA, { model: MODEL, input: url(aIn), output: url(aOut), chunkRows: 2 });
    expect(res.status).toBe(202);
    aRun = await settle(asA, ((await res.json()) as RunBody).id);
    expect(aRun.status, JSON.stringify(aRun.error)).toBe('succeeded');
    expect(aRun.badRowSamples.map((s) => s.line)).toEqual([4]);
    before = { a: await snapshot(A_AREA), registry: await snapshot(registry) };
    expect(before.a.length).toBeGreaterThan(2);
    expect(before.registry.length).toBeGreaterThan(0);
  }, 90_000);

  it('B cannot read A’s input: 403 location_forbidden, and no run is recorded', async () => {
    const runId = uniqueId('steal');
    const error = await expectError(
      await start(asB, { model: MODEL, input: url(aIn), output: url(`${B_AREA}stolen/out/`), runId }),
      403,
      'location_forbidden',
    );
    expect(error.message).toContain('"input"');
    await expectError(await asB(`/v1/bulk-runs/${runId}`), 404, 'bulk_run_not_found');
    expect(await s3.list(`${B_AREA}stolen/`)).toEqual([]);
  });

  it('B cannot list A’s prefix: a non-empty output of A’s is 403, not output_not_empty naming A’s objects', async () => {
    const error = await expectError(await start(asB, { model: MODEL, input: url(bIn), output: url(aOut) }), 403, 'location_forbidden');
    expect(error.message).not.toMatch(/part-|_manifest|object/);
  });

  it('B cannot write into A’s output, the registry’s models or the whole bucket', async () => {
    for (const output of [url(`${aOut}more/`), url(A_AREA), url(registry), url(`${registry}${MODEL}/1/`)]) {
      const error = await expectError(await start(asB, { model: MODEL, input: url(bIn), output }), 403, 'location_forbidden');
      expect(error.message, output).toContain('"output"');
    }
    // The whole bucket, or the stack's whole prefix: they hold B's own folder, so as an output they
    // overlap any input of B's (400); as an input, with an output elsewhere, refused first.
    for (const input of [url(''), url(`${S3_PREFIX}/`)]) {
      const output = url('out/', 'another-bucket');
      const error = await expectError(await start(asB, { model: MODEL, input, output }), 403, 'location_forbidden');
      expect(error.message, input).toContain('"input"');
    }
    // Not even A may write into the registry: it is never a bulk location.
    await expectError(await start(asA, { model: MODEL, input: url(aIn), output: url(registry) }), 403, 'location_forbidden');
  });

  it('B cannot escape its own location by spelling: "..", "//", encoded slashes, a look-alike prefix', async () => {
    for (const input of [
      url(`${B_AREA}../tenant-a/private/in/`),
      url(`${B_AREA}%2e%2e/tenant-a/private/in/`),
      url(`${B_AREA}x%2F..%2F..%2Ftenant-a/`),
      url(`${B_AREA}/../tenant-a/`),
    ]) {
      await expectError(await start(asB, { model: MODEL, input, output: url(`${B_AREA}escape/out/`) }), 400, 'invalid_location');
    }
    // A folder whose name merely starts with B's: not B's.
    const lookalike = url(`${B_AREA.slice(0, -1)}-evil/in/`);
    await expectError(await start(asB, { model: MODEL, input: lookalike, output: url(`${B_AREA}escape/out/`) }), 403, 'location_forbidden');
  });

  it('B cannot see A’s run or its bad-row samples: the same 404 as a run that does not exist', async () => {
    const missing = uniqueId('no-such-run');
    for (const method of ['GET', 'DELETE']) {
      const theirs = await asB(`/v1/bulk-runs/${aRun.id}`, { method });
      const none = await asB(`/v1/bulk-runs/${missing}`, { method });
      expect(theirs.status).toBe(404);
      expect(none.status).toBe(404);
      const [t, n] = [(await theirs.json()) as ErrorBody, (await none.json()) as ErrorBody];
      expect(JSON.stringify(t).replaceAll(aRun.id, 'ID')).toBe(JSON.stringify(n).replaceAll(missing, 'ID'));
    }
    // A still sees its own, canceled by no one.
    const mine = (await (await asA(`/v1/bulk-runs/${aRun.id}`)).json()) as RunBody;
    expect(mine).toMatchObject({ status: 'succeeded', badRowSamples: aRun.badRowSamples });
  });

  it('after all of B’s attempts, A’s objects and the registry’s are exactly as they were', async () => {
    expect(await snapshot(A_AREA)).toEqual(before.a);
    expect(await snapshot(registry)).toEqual(before.registry);
    expect(await idsInParts(aOut)).toEqual([...aIds].sort());
  });
});

describe('buckets that do not exist', () => {
  it('outside the tenant’s locations: the same 403 whether the bucket exists or not', async () => {
    const out = url(`${B_AREA}unknown/out/`);
    const tries = [
      url('in/', `no-such-bucket-${uniqueId('x').toLowerCase().replace(/_/g, '-')}`),
      url(`${S3_PREFIX}/elsewhere/in/`),
      url(`${A_AREA}private/in/`),
    ];
    const answers: string[] = [];
    for (const input of tries) {
      const res = await start(asB, { model: MODEL, input, output: out });
      const error = await expectError(res, 403, 'location_forbidden');
      answers.push(`${res.status} ${error.code} ${error.message.replace(input, '<input>')}`);
    }
    expect(new Set(answers).size).toBe(1);
  });

  it('inside the tenant’s own locations: 422 location_unavailable, never a 500', async () => {
    const error = await expectError(
      await start(asA, { model: MODEL, input: `s3://${MISSING[0]}/in/`, output: url(`${A_AREA}unavailable/out/`) }),
      422,
      'location_unavailable',
    );
    expect(error.message).toContain(`s3://${MISSING[0]}/in/`);
    await putRows(`${A_AREA}unavailable/in/`, 'rows', ['x']);
    await expectError(
      await start(asA, { model: MODEL, input: url(`${A_AREA}unavailable/in/`), output: `s3://${MISSING[1]}/out/` }),
      422,
      'location_unavailable',
    );
  });

  it('a burst naming many buckets does not grow the S3 clients: one per endpoint', async () => {
    const input = `${A_AREA}burst/in/`;
    const taken = `${A_AREA}burst/taken/`;
    await putRows(input, 'rows', ['x']);
    await putRows(taken, 'earlier', ['y']);
    const forbidden = Array.from({ length: 40 }, (_, i) => `s3://burst-${i}-${uniqueId('b')}`.slice(0, 60));
    const answers = await Promise.all([
      // Not the tenant's: refused before S3.
      ...forbidden.map(async (bucket) => (await start(asA, { model: MODEL, input: `${bucket}/in/`, output: url(taken) })).status),
      // The tenant's, in three buckets that do not exist and one that does: each asks S3.
      ...MISSING.map(async (bucket) => (await start(asA, { model: MODEL, input: `s3://${bucket}/in/`, output: url(taken) })).status),
      ...MISSING.map(async (bucket) => (await start(asA, { model: MODEL, input: url(input), output: `s3://${bucket}/out/` })).status),
      (async () => (await start(asA, { model: MODEL, input: url(input), output: url(taken) })).status)(),
    ]);
    expect(answers).toEqual([...forbidden.map(() => 403), ...MISSING.map(() => 422), ...MISSING.map(() => 422), 409]);
    // Four buckets asked of S3 by the API (and one by the supervisor's drives before): one client, never one per bucket.
    expect(wiring.stores.clients).toBe(1);
  });
});

describe('run ids are per tenant', () => {
  it('the same id from two tenants is two independent runs, each scoring its own rows into its own output', async () => {
    const runId = uniqueId('nightly');
    const ids = { a: ['a-1', 'a-2', 'a-3'], b: ['b-1', 'b-2'] };
    await putRows(`${A_AREA}same-id/in/`, 'rows', ids.a);
    await putRows(`${B_AREA}same-id/in/`, 'rows', ids.b, ['not json']);
    const bodyOf = (area: string) => ({ model: MODEL, input: url(`${area}same-id/in/`), output: url(`${area}same-id/out/`), runId });
    const a = await start(asA, bodyOf(A_AREA));
    expect(a.status).toBe(202);
    // B's start with A's id: created (202), not "exists with another owner".
    const b = await start(asB, bodyOf(B_AREA));
    expect(b.status, await b.clone().text()).toBe(202);
    const [runA, runB] = await Promise.all([settle(asA, runId), settle(asB, runId)]);
    expect(runA).toMatchObject({ id: runId, status: 'succeeded', input: url(`${A_AREA}same-id/in/`), badRowSamples: [] });
    expect(runB).toMatchObject({ id: runId, status: 'succeeded', input: url(`${B_AREA}same-id/in/`) });
    expect(runB.badRowSamples.map((s) => s.line)).toEqual([3]);
    expect(await idsInParts(`${A_AREA}same-id/out/`)).toEqual(ids.a);
    expect(await idsInParts(`${B_AREA}same-id/out/`)).toEqual(ids.b);
    // Each resumes its own (200) with its own spec; B canceling its finished run leaves A's alone.
    expect((await start(asA, bodyOf(A_AREA))).status).toBe(200);
    expect((await start(asB, bodyOf(B_AREA))).status).toBe(200);
    await expectError(await asB(`/v1/bulk-runs/${runId}`, { method: 'DELETE' }), 409, 'bulk_run_finished');
    expect(((await (await asA(`/v1/bulk-runs/${runId}`)).json()) as RunBody).status).toBe('succeeded');
  });

  it('a run recorded before ids were per tenant stays readable by its own tenant only', async () => {
    const id = uniqueId('legacy');
    const spec: BulkRunSpec = {
      id,
      tenant: 'tenant-a',
      model: MODEL,
      version: '1',
      input: { bucket: TEST_BUCKET, prefix: `${A_AREA}legacy/in/` },
      output: { bucket: TEST_BUCKET, prefix: `${A_AREA}legacy/out/` },
      chunkRows: 10,
      createdAt: Date.now(),
    };
    await redis.hset(bulkRunKey(stack.config.queuePrefix, id), 'spec', JSON.stringify(spec), 'status', 'succeeded', 'rowsDone', 5);
    const mine = (await (await asA(`/v1/bulk-runs/${id}`)).json()) as RunBody;
    expect(mine).toMatchObject({ id, status: 'succeeded', progress: { rowsDone: 5 } });
    await expectError(await asB(`/v1/bulk-runs/${id}`), 404, 'bulk_run_not_found');
  });

  it('a running run whose locations are not its tenant’s is failed by its driver before any S3 call', async () => {
    // As a run B started before locations existed would be: B's, reading A's input into B's output.
    const id = uniqueId('old-b');
    const spec: BulkRunSpec = {
      id,
      tenant: 'tenant-b',
      model: MODEL,
      version: '1',
      input: { bucket: TEST_BUCKET, prefix: `${A_AREA}private/in/` },
      output: { bucket: TEST_BUCKET, prefix: `${B_AREA}old/out/` },
      chunkRows: 10,
      createdAt: Date.now(),
    };
    const aBefore = await snapshot(A_AREA);
    const key = bulkRunKey(stack.config.queuePrefix, id);
    await redis.hset(
      key,
      'spec',
      JSON.stringify(spec),
      'status',
      'running',
      'priority',
      'bulk',
      'rowsDone',
      0,
      'chunksDone',
      0,
      'badRows',
      0,
    );
    await redis.sadd(bulkRunningKey(stack.config.queuePrefix), id);
    const run = await settle(asB, id);
    expect(run.status).toBe('failed');
    expect(run.error?.code).toBe('location_forbidden');
    expect(await redis.hget(key, 'listing')).toBeNull(); // the input was never listed
    expect(await s3.list(`${B_AREA}old/`)).toEqual([]);
    expect(await snapshot(A_AREA)).toEqual(aBefore);
  });
});
