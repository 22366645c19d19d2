// The HTTP API through app.request(), over in-memory fakes of its job queue and registry ports;
// idempotency and rate limits run on the real Redis of the test services (their logic lives there).
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import type { JobResult, Priority } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { NotFoundError } from '../infra/kernel/errors.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { createApiMetrics } from '../infra/telemetry/metrics.ts';
import { testServices, uniqueId } from '../test/support/services.ts';
import { type AppDeps, type AppJobQueue, createApp } from './app.ts';
import { createIdempotencyStore } from './http/idempotency.ts';
import { createRateLimiter } from './http/rate-limiter.ts';
import type { JobView, ModelCatalog } from './ports.ts';
import { WAIT_CHECK_MS } from './routes/job-events.ts';
import type { FleetView, WorkerSighting } from './use-cases/fleet-view.ts';

const KEY_A = 'key-aaaaaaaaaaaaaaaa';
const KEY_B = 'key-bbbbbbbbbbbbbbbb';
const METRICS_TOKEN = 'metrics-token-0123456789';
const T0 = Date.parse('2024-05-01T12:00:00.000Z');

function manifest(version: string): ModelManifest {
  return {
    name: 'scorer',
    version,
    format: 'onnx',
    sha256: 'a'.repeat(64),
    sizeBytes: 100,
    inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 4] }],
    outputs: [{ name: 'score', datatype: 'FP32', shape: [-1, 1] }],
    batching: { maxBatch: 64, warmupBatches: [1, 8] },
    createdAt: '2024-01-01T00:00:00.000Z',
    labels: {},
  };
}

/** Jobs in memory. `finish` decides, at enqueue, how a job ends (a stand-in worker); undefined leaves it queued. */
class FakeJobQueue implements AppJobQueue {
  readonly jobs = new Map<string, { data: QueuedRequest; priority: Priority; view: JobView }>();
  readonly waits: Array<{ jobId: string; timeoutMs: number }> = [];
  finish: ((data: QueuedRequest) => Pick<JobView, 'status' | 'result' | 'error'> | undefined) | undefined;
  failEnqueue = false;

  async enqueue(data: QueuedRequest, { priority, jobId }: { priority: Priority; jobId: string }) {
    if (this.failEnqueue) throw new Error('ECONNREFUSED 127.0.0.1:6379');
    const view: JobView = {
      id: jobId,
      tenant: data.tenant,
      model: data.model,
      version: data.version,
      status: 'queued',
      createdAt: data.submittedAt,
      attemptsMade: 0,
    };
    const end = this.finish?.(data);
    if (end) Object.assign(view, end, { startedAt: data.submittedAt + 5, finishedAt: data.submittedAt + 9, attemptsMade: 1 });
    this.jobs.set(jobId, { data, priority, view });
  }
  async get(jobId: string) {
    return this.jobs.get(jobId)?.view ?? null;
  }
  async waitFor(jobId: string, timeoutMs: number) {
    this.waits.push({ jobId, timeoutMs });
    const job = this.jobs.get(jobId);
    if (!job) throw new NotFoundError('job_not_found', jobId);
    return job.view; // terminal if `finish` ended it, else what a timed-out wait returns
  }
  async cancel(jobId: string) {
    const job = this.jobs.get(jobId);
    if (job?.view.status === 'queued') job.view = { ...job.view, status: 'canceled', error: { code: 'canceled', message: 'canceled' } };
    return job?.view ?? null;
  }
  /** Reports the current view; a job this fake leaves queued stays so until the stream is aborted. */
  async watch(jobId: string, onChange: (view: JobView) => void | Promise<void>, signal?: AbortSignal) {
    const job = this.jobs.get(jobId);
    if (!job) throw new NotFoundError('job_not_found', jobId);
    await onChange(job.view);
    if (job.view.status !== 'queued') return;
    await new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(signal.reason), { once: true }));
  }
  async depth() {
    return [...this.jobs.values()].filter((j) => j.view.status === 'queued').length;
  }
}

const catalog: ModelCatalog = {
  async getManifest(name, version) {
    if (name !== 'scorer') throw new NotFoundError('model_not_found', `no model ${name}`);
    if (version === undefined) return manifest('2');
    if (version === '1' || version === '2') return manifest(version);
    throw new NotFoundError('version_not_found', `model ${name} has no version ${version}`);
  },
  async list() {
    return [{ name: 'scorer', versions: ['1', '2'] }];
  },
  async listVersions(name) {
    return name === 'scorer' ? ['1', '2'] : [];
  },
};

const result: JobResult = {
  outputs: [{ name: 'score', datatype: 'FP32', shape: [2, 1], data: [0.25, 0.75] }],
  timings: { queueMs: 5, inferMs: 3, batchRows: 8 },
  workerId: 'w1',
};

const body = (rows = 2, extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'features', datatype: 'FP32', shape: [rows, 4], data: Array.from({ length: rows * 4 }, (_, i) => i) }],
  ...extra,
});

describe('createApp', () => {
  let jobs: FakeJobQueue;
  let deployed: Map<string, string>;
  let registry: Registry;
  let logged: object[];
  let ready: boolean;
  let clock: ManualClock;
  let deps: AppDeps;
  let app: ReturnType<typeof createApp>;
  let redis: RedisClient;
  let prefix: string;

  beforeAll(() => {
    redis = createRedis(testServices().redisUrl);
  });

  const prefixes: string[] = [];
  afterAll(async () => {
    for (const p of prefixes) {
      for await (const keys of scanKeys(redis, `${p}:*`)) await deleteMany(redis, keys);
    }
    await closeRedis(redis);
  });

  beforeEach(() => {
    prefix = uniqueId('app');
    prefixes.push(prefix);
    clock = new ManualClock(T0);
    jobs = new FakeJobQueue();
    deployed = new Map([['scorer', '1']]);
    registry = new Registry();
    logged = [];
    ready = true;
    const notHere = () => Promise.reject(new Error('deployment admin is tested in test/deployments-api.test.ts'));
    const deployments: AppDeps['deployments'] = {
      async get(model) {
        const version = deployed.get(model);
        // The other published version is listed at weight 0 (kept, no new traffic): a job that names it is served.
        const others = ['1', '2'].filter((v) => v !== version).map((v) => ({ version: v, weight: 0 }));
        return version
          ? { model, version, versions: [{ version, weight: 100 }, ...others], min: 1, max: 1, standby: 0, revision: 1, updatedAt: '' }
          : null;
      },
      list: notHere,
      update: notHere,
      rollback: notHere,
      history: notHere,
    };
    deps = {
      jobs,
      catalog,
      deployments,
      apiKeys: [
        { tenant: 'tenant-a', key: KEY_A },
        { tenant: 'tenant-b', key: KEY_B },
      ],
      metrics: { registry, api: createApiMetrics(registry), render: () => registry.metrics(), token: METRICS_TOKEN },
      clock,
      bodyLimitBytes: 4096,
      syncTimeoutMs: 1234,
      idempotency: createIdempotencyStore(redis, { prefix, ttlS: 3600 }),
      webhookAllowedPrivateHosts: ['hooks.internal'],
      ready: async () => ready,
      log: { ...silentLog, error: (obj) => logged.push(obj as object) },
    };
    app = createApp(deps);
  });

  const post = (path: string, payload: unknown, key = KEY_A, contentType = 'application/json') =>
    app.request(path, {
      method: 'POST',
      headers: { Authorization: `Bearer ${key}`, 'Content-Type': contentType },
      body: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
  /** `null`: no Authorization header. */
  const get = (path: string, key: string | null = KEY_A) =>
    app.request(path, { headers: key === null ? {} : { Authorization: `Bearer ${key}` } });
  const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string; job_id?: string } }).error;

  describe('auth', () => {
    it('answers 401 without a key, with a malformed header, or with a wrong key', async () => {
      for (const headers of <Record<string, string>[]>[
        {},
        { Authorization: KEY_A },
        { Authorization: 'Bearer key-wrongwrong' },
        { Authorization: `Basic ${KEY_A}` },
      ]) {
        const res = await app.request('/v1/models', { headers });
        expect(res.status).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('Bearer');
        expect((await errorOf(res)).code).toBe('unauthorized');
      }
      expect(jobs.jobs.size).toBe(0);
    });

    it('guards the OIP model routes too', async () => {
      expect((await post('/v2/models/scorer/infer', body(), 'key-nope-nope')).status).toBe(401);
      expect((await get('/v2/models/scorer', null)).status).toBe(401);
    });

    it('leaves health open; /metrics takes METRICS_TOKEN or an admin key, not an ordinary one', async () => {
      expect((await get('/v2/health/live', null)).status).toBe(200);
      expect((await get('/v2/health/ready', null)).status).toBe(200);
      ready = false;
      const notReady = await get('/v2/health/ready', null);
      expect(notReady.status).toBe(503);
      expect(await notReady.json()).toEqual({ ready: false });
      expect((await get('/metrics', METRICS_TOKEN)).status).toBe(200);
      expect((await get('/metrics', null)).status).toBe(401);
      expect((await get('/metrics', 'metrics-token-wrong-0000')).status).toBe(401);
      const ordinary = await get('/metrics', KEY_A); // no ADMIN_TENANTS here
      expect(ordinary.status).toBe(403);
      expect((await errorOf(ordinary)).code).toBe('forbidden');
    });

    it('answers GET / without a key with an index of where things are, each of which answers', async () => {
      const res = await get('/', null);
      expect(res.status).toBe(200);
      const index = (await res.json()) as Record<string, string>;
      expect(index).toEqual({
        name: 'warmpool',
        version: expect.stringMatching(/^\d+\.\d+\.\d+/),
        docs: '/docs',
        openapi: '/openapi.json',
        dashboard: '/dashboard',
        health: '/v2/health/ready',
      });
      for (const path of [index.docs, index.openapi, index.dashboard, index.health]) expect((await get(path ?? '', null)).status).toBe(200);
    });
  });

  describe('POST /v1/models/:model/jobs', () => {
    it('answers 202 with the job, resolving the deployed version', async () => {
      const res = await post('/v1/models/scorer/jobs', body(3));
      expect(res.status).toBe(202);
      const json = (await res.json()) as Record<string, unknown>;
      expect(json).toEqual({
        id: expect.stringMatching(/^job_[A-Za-z0-9_-]{20}$/),
        status: 'queued',
        model: 'scorer',
        version: '1',
        createdAt: '2024-05-01T12:00:00.000Z',
        links: { self: `/v1/jobs/${String(json.id)}`, events: `/v1/jobs/${String(json.id)}/events` },
      });
      expect(res.headers.get('location')).toBe(`/v1/jobs/${String(json.id)}`);
      const job = jobs.jobs.get(String(json.id));
      expect(job?.priority).toBe('normal');
      expect(job?.data).toMatchObject({ tenant: 'tenant-a', model: 'scorer', version: '1', submittedAt: T0 });
      expect(job?.data.inputs[0]?.shape).toEqual([3, 4]);
      // Packed once, here: the queue gets typed arrays, never JSON numbers.
      expect(job?.data.rows).toBe(3);
      expect(job?.data.inputs[0]?.data).toEqual(Float32Array.from({ length: 12 }, (_, i) => i));
    });

    it('honours priority and an explicit version the deployment lists', async () => {
      const a = (await (await post('/v1/models/scorer/jobs', body(1, { priority: 'low', version: '2' }))).json()) as {
        id: string;
        version: string;
      };
      expect(a.version).toBe('2');
      expect(jobs.jobs.get(a.id)?.priority).toBe('low');
    });

    it('answers 409 model_not_deployed, naming the fix, for a published model that is not deployed (sync too)', async () => {
      deployed.clear();
      for (const path of ['/v1/models/scorer/jobs', '/v2/models/scorer/infer', '/v2/models/scorer/versions/1/infer']) {
        const res = await post(path, body(1));
        expect(res.status).toBe(409);
        expect(await errorOf(res)).toEqual({
          code: 'model_not_deployed',
          message: 'model scorer is published but not deployed: run `warmpool deploy scorer` (or PUT /v1/deployments/scorer)',
        });
      }
      expect(jobs.jobs.size).toBe(0);
      // Unknown everywhere is still the registry's 404.
      expect((await errorOf(await post('/v1/models/ghost/jobs', body(1)))).code).toBe('model_not_found');
    });

    it('refuses an unknown top-level field with 400 unknown_field naming the field meant; parameters stay open', async () => {
      const res = await post('/v1/models/scorer/jobs', body(1, { webhook_url: 'https://hooks.example.com/x' }));
      expect(res.status).toBe(400);
      expect(await errorOf(res)).toEqual({
        code: 'unknown_field',
        message: '"webhook_url" is not a field of a job request; did you mean "webhook"?',
      });
      const sync = await post('/v2/models/scorer/infer', body(1, { timeout: 5 }));
      expect(await errorOf(sync)).toEqual({
        code: 'unknown_field',
        message: '"timeout" is not a field of an inference request; did you mean "timeoutMs"?',
      });
      expect(jobs.jobs.size).toBe(0);
      const open = await post('/v1/models/scorer/jobs', body(1, { id: 'r-1', parameters: { anything: { goes: true } } }));
      expect(open.status).toBe(202);
    });

    it('gives ids that differ per job', async () => {
      const ids = new Set<string>();
      for (let i = 0; i < 5; i++) ids.add(((await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string }).id);
      expect(ids.size).toBe(5);
    });

    it.each([
      [
        'wrong input name',
        { inputs: [{ name: 'feats', datatype: 'FP32', shape: [1, 4], data: [1, 2, 3, 4] }] },
        'unknown_input',
        /"feats".*"features"/,
      ],
      [
        'wrong datatype',
        { inputs: [{ name: 'features', datatype: 'INT32', shape: [1, 4], data: [1, 2, 3, 4] }] },
        'datatype_mismatch',
        /FP32.*INT32/,
      ],
      [
        'wrong shape',
        { inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 5], data: [1, 2, 3, 4, 5] }] },
        'shape_mismatch',
        /axis 1/,
      ],
      [
        'short data',
        { inputs: [{ name: 'features', datatype: 'FP32', shape: [2, 4], data: [1, 2, 3, 4] }] },
        'data_length_mismatch',
        /8.*4/,
      ],
      [
        'a string value',
        { inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 4], data: [1, 'x', 3, 4] }] },
        'invalid_value',
        /data\[1\]/,
      ],
      ['a bad priority', body(1, { priority: 'urgent' }), 'invalid_body', /priority/],
      ['no inputs', { outputs: [] }, 'invalid_body', /inputs/],
    ])('answers 400 for %s', async (_label, payload, code, message) => {
      const res = await post('/v1/models/scorer/jobs', payload);
      expect(res.status).toBe(400);
      const error = await errorOf(res);
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
      expect(jobs.jobs.size).toBe(0);
    });

    it('answers 400 malformed_json, 415 for another content type, 413 for an oversized body', async () => {
      const malformed = await post('/v1/models/scorer/jobs', '{"inputs": [');
      expect(malformed.status).toBe(400);
      expect((await errorOf(malformed)).code).toBe('malformed_json');

      const text = await post('/v1/models/scorer/jobs', JSON.stringify(body(1)), KEY_A, 'text/plain');
      expect(text.status).toBe(415);
      expect((await errorOf(text)).code).toBe('unsupported_media_type');

      const big = await post('/v1/models/scorer/jobs', body(1000));
      expect(big.status).toBe(413);
      expect((await errorOf(big)).code).toBe('body_too_large');
      expect(jobs.jobs.size).toBe(0);
    });

    it('answers 404 model_not_found for a model neither deployed nor published, and for an unknown version', async () => {
      const res = await post('/v1/models/nope/jobs', body(1));
      expect(res.status).toBe(404);
      expect((await errorOf(res)).code).toBe('model_not_found');
      const version = await post('/v1/models/scorer/jobs', body(1, { version: '9' }));
      expect(version.status).toBe(404);
      expect((await errorOf(version)).code).toBe('version_not_found');
    });

    it('answers 500 internal, logging the cause and hiding it from the caller', async () => {
      jobs.failEnqueue = true;
      const res = await post('/v1/models/scorer/jobs', body(1));
      expect(res.status).toBe(500);
      const error = await errorOf(res);
      expect(error.code).toBe('internal');
      expect(error.message).not.toContain('ECONNREFUSED');
      expect(logged).toHaveLength(1);
      expect(JSON.stringify((logged[0] as { err: Error }).err.message)).toContain('ECONNREFUSED');
    });
  });

  describe('GET /v1/jobs/:id', () => {
    it('shows a queued job, then a finished one with outputs and timings', async () => {
      const { id } = (await (await post('/v1/models/scorer/jobs', body(2))).json()) as { id: string };
      const queued = await get(`/v1/jobs/${id}`);
      expect(queued.status).toBe(200);
      expect(await queued.json()).toEqual({ id, model: 'scorer', version: '1', status: 'queued', createdAt: '2024-05-01T12:00:00.000Z' });

      jobs.finish = () => ({ status: 'succeeded', result });
      const done = (await (await post('/v1/models/scorer/jobs', body(2))).json()) as { id: string };
      expect(await (await get(`/v1/jobs/${done.id}`)).json()).toEqual({
        id: done.id,
        model: 'scorer',
        version: '1',
        status: 'succeeded',
        outputs: result.outputs,
        createdAt: '2024-05-01T12:00:00.000Z',
        startedAt: '2024-05-01T12:00:00.005Z',
        finishedAt: '2024-05-01T12:00:00.009Z',
        timings: { queueMs: 5, inferMs: 3, batchRows: 8 },
      });
    });

    it('shows a failed job with its error', async () => {
      jobs.finish = () => ({ status: 'failed', error: { code: 'invalid_input', message: 'index 9 out of range' } });
      const { id } = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      const json = (await (await get(`/v1/jobs/${id}`)).json()) as Record<string, unknown>;
      expect(json).toMatchObject({ status: 'failed', error: { code: 'invalid_input', message: 'index 9 out of range' } });
      expect(json.outputs).toBeUndefined();
    });

    it("answers 404 job_not_found for another tenant's job and for unknown ids", async () => {
      const { id } = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      for (const res of [await get(`/v1/jobs/${id}`, KEY_B), await get('/v1/jobs/job_missing'), await get('/v1/jobs/a:b*c')]) {
        expect(res.status).toBe(404);
        expect((await errorOf(res)).code).toBe('job_not_found');
      }
    });
  });

  describe('job options: webhook and deadline', () => {
    it('stores a webhook (default events) and a deadline with the job', async () => {
      const res = await post('/v1/models/scorer/jobs', body(1, { webhook: { url: 'https://example.com/hook' }, timeoutMs: 5000 }));
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      expect(jobs.jobs.get(id)?.data).toMatchObject({
        webhook: { url: 'https://example.com/hook', events: ['job.succeeded', 'job.failed'] },
        timeoutMs: 5000,
      });
      const plain = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      expect(jobs.jobs.get(plain.id)?.data.webhook).toBeUndefined();
      expect(jobs.jobs.get(plain.id)?.data.timeoutMs).toBeUndefined();
    });

    it('lets a webhook reach a private host named in the allow-list', async () => {
      const res = await post(
        '/v1/models/scorer/jobs',
        body(1, { webhook: { url: 'http://hooks.internal:9000/x', events: ['job.started'] } }),
      );
      expect(res.status).toBe(202);
      const { id } = (await res.json()) as { id: string };
      expect(jobs.jobs.get(id)?.data.webhook).toEqual({ url: 'http://hooks.internal:9000/x', events: ['job.started'] });
    });

    it.each([
      ['a loopback webhook', { webhook: { url: 'http://127.0.0.1:8080/hook' } }, 422, 'webhook_url_blocked', /127\.0\.0\.1/],
      ['a metadata-address webhook', { webhook: { url: 'http://169.254.169.254/latest' } }, 422, 'webhook_url_blocked', /blocked/],
      ['an ftp webhook', { webhook: { url: 'ftp://example.com/x' } }, 422, 'invalid_webhook', /http or https/],
      ['a zero deadline', { timeoutMs: 0 }, 400, 'invalid_body', /timeoutMs/],
      ['a fractional deadline', { timeoutMs: 1.5 }, 400, 'invalid_body', /timeoutMs/],
      ['a string deadline', { timeoutMs: '100' }, 400, 'invalid_body', /timeoutMs/],
      ['a deadline over a day', { timeoutMs: 86_400_001 }, 400, 'invalid_body', /86400000/],
    ])('refuses %s', async (_label, extra, status, code, message) => {
      const res = await post('/v1/models/scorer/jobs', body(1, extra));
      expect(res.status).toBe(status);
      const error = await errorOf(res);
      expect(error.code).toBe(code);
      expect(error.message).toMatch(message);
      expect(jobs.jobs.size).toBe(0);
    });
  });

  describe('Idempotency-Key', () => {
    const submit = (payload: unknown, key: string, apiKey = KEY_A) =>
      app.request('/v1/models/scorer/jobs', {
        method: 'POST',
        headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json', 'Idempotency-Key': key },
        body: JSON.stringify(payload),
      });

    it('returns the same job for the same key and request, marked as replayed', async () => {
      const first = await submit(body(2), 'order-1');
      expect(first.status).toBe(202);
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      // The same request with its keys in another order is the same request.
      const { inputs } = body(2);
      const again = await submit(
        { inputs: inputs.map((t) => ({ data: t.data, shape: t.shape, datatype: t.datatype, name: t.name })) },
        'order-1',
      );
      expect(again.status).toBe(202);
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toEqual(await first.json());
      expect(jobs.jobs.size).toBe(1);
    });

    it("answers a replay with its job's status now: succeeded once it has", async () => {
      const first = (await (await submit(body(2), 'order-2')).json()) as { id: string; status: string };
      expect(first.status).toBe('queued');
      const job = jobs.jobs.get(first.id);
      if (!job) throw new Error('the job was not queued');
      job.view = { ...job.view, status: 'succeeded', result, finishedAt: T0 + 9 };
      const again = await submit(body(2), 'order-2');
      expect(again.headers.get('idempotent-replayed')).toBe('true');
      expect(await again.json()).toMatchObject({ id: first.id, status: 'succeeded' });
    });

    it('keeps keys per tenant', async () => {
      const a = (await (await submit(body(1), 'shared')).json()) as { id: string };
      const b = await submit(body(1), 'shared', KEY_B);
      expect(b.headers.get('idempotent-replayed')).toBeNull();
      expect(((await b.json()) as { id: string }).id).not.toBe(a.id);
      expect(jobs.jobs.size).toBe(2);
    });

    it('answers 409 idempotency_key_reused for the same key with another body', async () => {
      expect((await submit(body(1), 'k-1')).status).toBe(202);
      const other = await submit(body(2), 'k-1');
      expect(other.status).toBe(409);
      const error = await errorOf(other);
      expect(error.code).toBe('idempotency_key_reused');
      expect(error.message).toMatch(/different request/);
      expect((await submit(body(1, { priority: 'high' }), 'k-1')).status).toBe(409);
      expect(jobs.jobs.size).toBe(1);
    });

    it('answers 400 for a key that is empty or longer than 255 characters', async () => {
      for (const key of ['', 'k'.repeat(256)]) {
        const res = await submit(body(1), key);
        expect(res.status).toBe(400);
        const error = await errorOf(res);
        expect(error.code).toBe('invalid_idempotency_key');
        expect(error.message).toMatch(/255 printable/);
      }
      expect((await submit(body(1), 'k'.repeat(255))).status).toBe(202);
    });

    it('holds no key for a rejected request, and frees it when enqueueing fails', async () => {
      expect((await submit({ inputs: [] }, 'k-bad')).status).toBe(400);
      expect((await submit(body(1), 'k-bad')).status).toBe(202);

      jobs.failEnqueue = true;
      expect((await submit(body(3), 'k-retry')).status).toBe(500);
      jobs.failEnqueue = false;
      const retry = await submit(body(3), 'k-retry');
      expect(retry.status).toBe(202);
      expect(retry.headers.get('idempotent-replayed')).toBeNull();
    });
  });

  describe('DELETE /v1/jobs/:id', () => {
    const del = (path: string, key = KEY_A) => app.request(path, { method: 'DELETE', headers: { Authorization: `Bearer ${key}` } });

    it('cancels a queued job, idempotently; GET then shows it canceled', async () => {
      const { id } = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      for (let i = 0; i < 2; i++) {
        const res = await del(`/v1/jobs/${id}`);
        expect(res.status).toBe(200);
        expect(await res.json()).toMatchObject({ id, status: 'canceled', error: { code: 'canceled' } });
      }
      expect(await (await get(`/v1/jobs/${id}`)).json()).toMatchObject({ id, status: 'canceled' });
    });

    it('answers 409 job_running / job_finished, and 404 for another tenant or an unknown id', async () => {
      const running = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      const job = jobs.jobs.get(running.id);
      if (job) job.view = { ...job.view, status: 'running' };
      const busy = await del(`/v1/jobs/${running.id}`);
      expect(busy.status).toBe(409);
      expect(await errorOf(busy)).toMatchObject({ code: 'job_running', message: expect.stringMatching(/only a queued job/) });

      jobs.finish = () => ({ status: 'succeeded', result });
      const done = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      const finished = await del(`/v1/jobs/${done.id}`);
      expect(finished.status).toBe(409);
      expect(await errorOf(finished)).toMatchObject({ code: 'job_finished', message: expect.stringMatching(/succeeded/) });

      for (const res of [await del(`/v1/jobs/${done.id}`, KEY_B), await del('/v1/jobs/job_missing')]) {
        expect(res.status).toBe(404);
        expect((await errorOf(res)).code).toBe('job_not_found');
      }
      expect(jobs.jobs.get(done.id)?.view.status).toBe('succeeded');
    });
  });

  describe('GET /v1/jobs/:id/events', () => {
    it('streams the status as an SSE event carrying the job resource, and ends after a terminal one', async () => {
      jobs.finish = () => ({ status: 'succeeded', result });
      const { id } = (await (await post('/v1/models/scorer/jobs', body(2))).json()) as { id: string };
      const res = await get(`/v1/jobs/${id}/events`);
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      const text = await res.text();
      const resource = await (await get(`/v1/jobs/${id}`)).json();
      expect(text).toBe(`event: succeeded\ndata: ${JSON.stringify(resource)}\n\n`);
    });

    it('a queued job says why it waits, and its queued event goes out again when the starting worker moves to another phase', async () => {
      let state: WorkerSighting['state'] = 'downloading';
      const fleet: FleetView = {
        async workers() {
          return [{ id: 'w0', state, jobsInFlight: 0, startedAt: T0 - 1_000, stateSince: T0 - 500 }];
        },
        async coldStartMs() {
          return 6_000;
        },
      };
      const watched = createApp({ ...deps, fleet });
      const { id } = (await (
        await watched.request('/v1/models/scorer/jobs', {
          method: 'POST',
          headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(body(1)),
        })
      ).json()) as { id: string };
      const view = (await (await watched.request(`/v1/jobs/${id}`, { headers: { Authorization: `Bearer ${KEY_A}` } })).json()) as {
        waiting: unknown;
      };
      expect(view.waiting).toEqual({
        code: 'worker_starting',
        phase: 'downloading',
        expectedInMs: 5_000,
        message: 'a worker is starting (downloading the model for 0.5 s; a cold start of scorer takes about 6.0 s)',
      });

      const gone = new AbortController();
      const res = await watched.request(`/v1/jobs/${id}/events`, { headers: { Authorization: `Bearer ${KEY_A}` }, signal: gone.signal });
      const reader = (res.body as ReadableStream<Uint8Array>).getReader();
      const decoder = new TextDecoder();
      let text = '';
      const nextEvent = async () => {
        while (!text.includes('\n\n')) text += decoder.decode((await reader.read()).value);
        const [event, rest] = [text.slice(0, text.indexOf('\n\n')), text.slice(text.indexOf('\n\n') + 2)];
        text = rest;
        return { name: /^event: (.*)$/m.exec(event)?.[1], data: JSON.parse(/^data: (.*)$/m.exec(event)?.[1] ?? 'null') };
      };
      const first = await nextEvent();
      expect(first).toMatchObject({
        name: 'queued',
        data: { status: 'queued', waiting: { code: 'worker_starting', phase: 'downloading' } },
      });
      await clock.advance(WAIT_CHECK_MS); // the same phase: nothing sent
      state = 'warming';
      await clock.advance(WAIT_CHECK_MS);
      const second = await nextEvent();
      expect(second).toMatchObject({
        name: 'queued',
        data: { waiting: { code: 'worker_starting', phase: 'warming', expectedInMs: 1_000 } },
      });
      gone.abort();
      await reader.cancel().catch(() => undefined);
    });

    it("answers a JSON 404 for another tenant's job or an unknown one", async () => {
      const { id } = (await (await post('/v1/models/scorer/jobs', body(1))).json()) as { id: string };
      for (const res of [await get(`/v1/jobs/${id}/events`, KEY_B), await get('/v1/jobs/job_nope/events')]) {
        expect(res.status).toBe(404);
        expect((await errorOf(res)).code).toBe('job_not_found');
      }
    });
  });

  describe('rate limits', () => {
    it('answers 429 rate_limited with Retry-After once a tenant spends its burst, and refills with time', async () => {
      const limited = createApp({ ...deps, rateLimit: { limiter: createRateLimiter(redis, { prefix }), rps: 2, burst: 3 } });
      const call = (path: string, key: string | null = KEY_A) =>
        limited.request(path, { headers: key === null ? {} : { Authorization: `Bearer ${key}` } });
      for (let i = 0; i < 3; i++) expect((await call('/v1/models')).status).toBe(200);
      const refused = await call('/v2/models/scorer');
      expect(refused.status).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('1');
      expect(await errorOf(refused)).toMatchObject({ code: 'rate_limited', message: expect.stringMatching(/2 per second/) });
      // Other tenants, and the open routes, are not affected.
      expect((await call('/v1/models', KEY_B)).status).toBe(200);
      expect((await call('/v2/health/live', null)).status).toBe(200);
      // 2 rps: one token back every 500 ms.
      await clock.advance(499);
      expect((await call('/v1/models')).status).toBe(429);
      await clock.advance(1);
      expect((await call('/v1/models')).status).toBe(200);
      expect((await call('/v1/models')).status).toBe(429);
      // Unauthenticated calls are refused before the bucket: they cannot drain a tenant's budget.
      expect((await call('/v1/models', null)).status).toBe(401);
    });
  });

  describe('POST /v2/models/:model/infer', () => {
    it('answers 200 with an OIP InferResponse, through the queue at high priority', async () => {
      jobs.finish = () => ({ status: 'succeeded', result });
      const res = await post('/v2/models/scorer/infer', body(2, { id: 'req-7' }));
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ model_name: 'scorer', model_version: '1', id: 'req-7', outputs: result.outputs });
      const [job] = [...jobs.jobs.values()];
      expect(job?.priority).toBe('high');
      // The id is echoed from the request, not stored with the job (no worker reads it).
      expect(job?.data).not.toHaveProperty('requestId');
      expect(jobs.waits).toEqual([{ jobId: job?.view.id, timeoutMs: 1234 }]);
    });

    it('uses the version in the path, and echoes the job id when the request has none', async () => {
      jobs.finish = () => ({ status: 'succeeded', result });
      const res = await post('/v2/models/scorer/versions/2/infer', body(2));
      const json = (await res.json()) as { model_version: string; id: string };
      expect(json.model_version).toBe('2');
      expect(jobs.jobs.has(json.id)).toBe(true);
    });

    it('answers 400 when the worker found the input invalid, 500 inference_failed otherwise', async () => {
      jobs.finish = () => ({ status: 'failed', error: { code: 'invalid_input', message: 'idx 12 is out of range' } });
      const invalid = await post('/v2/models/scorer/infer', body(1));
      expect(invalid.status).toBe(400);
      expect(await errorOf(invalid)).toEqual({ code: 'invalid_input', message: 'idx 12 is out of range' });

      jobs.finish = () => ({ status: 'failed', error: { code: 'inference_failed', message: 'session crashed' } });
      const failed = await post('/v2/models/scorer/infer', body(1));
      expect(failed.status).toBe(500);
      const error = await errorOf(failed);
      expect(error.code).toBe('inference_failed');
      expect(jobs.jobs.has(error.job_id ?? '')).toBe(true);
    });

    it('answers 504 timeout with the job id, which the caller can then poll', async () => {
      const res = await post('/v2/models/scorer/infer', body(1));
      expect(res.status).toBe(504);
      const error = await errorOf(res);
      expect(error.code).toBe('timeout');
      expect(error.message).toContain('1234 ms');
      const poll = await get(`/v1/jobs/${error.job_id}`);
      expect(poll.status).toBe(200);
      expect(((await poll.json()) as { status: string }).status).toBe('queued');
    });

    it.each<[string, WorkerSighting['state'][], number, RegExp]>([
      ['no worker', [], 1, /: no worker for scorer@1 yet \(the scaler is starting one\); poll/],
      ['no worker, min 0', [], 0, /: no worker for scorer@1 yet \(the deployment's min is 0: the scaler is starting one\); poll/],
      ['a worker warming up', ['warming'], 1, /: a worker is starting \(warming up\); poll/],
      ['a worker in standby', ['standby'], 1, /: a worker is in standby and the scaler has not activated it yet; poll/],
      ['busy workers', ['active', 'warming'], 1, /: workers are busy: 3 requests queued ahead; poll/],
    ])('says why a sync call timed out: %s', async (_, states, min, message) => {
      const asked: string[] = [];
      const fleet: FleetView = {
        async workers(model, version) {
          asked.push(`${model}@${version}`);
          return states.map((state, i) => ({ id: `w${i}`, state, jobsInFlight: 1 }));
        },
      };
      const lookup = deps.deployments;
      const deployments = {
        ...lookup,
        get: async (m: string) => ({ ...(await lookup.get(m)), min }) as Awaited<ReturnType<typeof lookup.get>>,
      };
      const withFleet = createApp({ ...deps, fleet, deployments });
      const send = (path: string, payload: unknown) =>
        withFleet.request(path, {
          method: 'POST',
          headers: { Authorization: `Bearer ${KEY_A}`, 'Content-Type': 'application/json' },
          body: JSON.stringify(payload),
        });
      for (let i = 0; i < 3; i++) expect((await send('/v1/models/scorer/jobs', body(1, { id: `queued-${i}` }))).status).toBe(202);
      expect(asked).toEqual([]); // a deployed version is accepted without reading the fleet
      const res = await send('/v2/models/scorer/infer', body(1));
      expect(res.status).toBe(504);
      const error = await errorOf(res);
      expect(error.message).toMatch(message);
      expect(error.message).toContain(`poll /v1/jobs/${error.job_id}`);
      expect(asked).toEqual(['scorer@1']);
    });

    it('validates like the async route', async () => {
      const res = await post('/v2/models/scorer/infer', {
        inputs: [{ name: 'features', datatype: 'FP64', shape: [1, 4], data: [1, 2, 3, 4] }],
      });
      expect(res.status).toBe(400);
      expect((await errorOf(res)).code).toBe('datatype_mismatch');
      expect((await post('/v2/models/ghost/infer', body(1))).status).toBe(404);
    });
  });

  describe('OIP metadata and readiness', () => {
    it('describes the deployed version of a model', async () => {
      const res = await get('/v2/models/scorer');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({
        name: 'scorer',
        versions: ['1', '2'],
        platform: 'onnxruntime_onnx',
        inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 4] }],
        outputs: [{ name: 'score', datatype: 'FP32', shape: [-1, 1] }],
      });
      expect((await get('/v2/models/scorer/versions/2')).status).toBe(200);
      const missing = await get('/v2/models/ghost');
      expect(missing.status).toBe(404);
      expect((await errorOf(missing)).code).toBe('model_not_found');
    });

    it('is ready when deployed with a manifest, 404 otherwise', async () => {
      const res = await get('/v2/models/scorer/ready');
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ name: 'scorer', version: '1', ready: true });
      deployed.set('scorer', '7');
      expect((await get('/v2/models/scorer/ready')).status).toBe(404);
      deployed.clear();
      const notDeployed = await get('/v2/models/scorer/ready');
      expect(notDeployed.status).toBe(404);
      expect((await errorOf(notDeployed)).code).toBe('model_not_ready');
    });
  });

  it('lists the registry with the deployed version of each model', async () => {
    const res = await get('/v1/models');
    expect(await res.json()).toEqual({ models: [{ name: 'scorer', versions: ['1', '2'], deployedVersion: '1' }] });
  });

  it('answers 404 route_not_found as JSON for unknown routes', async () => {
    const res = await get('/v1/nothing-here');
    expect(res.status).toBe(404);
    expect((await errorOf(res)).code).toBe('route_not_found');
  });

  it('serves Prometheus text counting requests by route pattern and jobs by kind', async () => {
    jobs.finish = () => ({ status: 'succeeded', result });
    await post('/v1/models/scorer/jobs', body(1));
    await post('/v2/models/scorer/infer', body(1));
    await get('/v1/jobs/job_missing');
    const res = await get('/metrics', METRICS_TOKEN);
    expect(res.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await res.text();
    expect(text).toContain('warmpool_http_requests_total{route="/v1/models/:model/jobs",method="POST",status="202"} 1');
    expect(text).toContain('warmpool_http_requests_total{route="/v1/jobs/:id",method="GET",status="404"} 1');
    expect(text).toContain('warmpool_jobs_submitted_total{model="scorer",version="1",kind="async"} 1');
    expect(text).toContain('warmpool_jobs_submitted_total{model="scorer",version="1",kind="sync"} 1');
  });
});
