/**
 * Bounded work per request (issue 20), on the real stack: the API in-process, a real worker
 * process on real ONNX Runtime, real Redis and S3. The model has a dynamic non-batch axis
 * (`seq` FP32 [b, n] → row sums), the kind on which a zero-length axis could declare rows it
 * does not carry:
 * - `shape [1e9, 0], data: []` is a 413 at the API, never queued; the worker stays alive;
 * - with `timeoutMs: 1` such a request adds nothing to the arrival history, and a job that
 *   expires before any worker takes it counts its rows once;
 * - oversize `parameters` and `id` are 413s and leave Redis as it was; accepted jobs store
 *   neither `parameters` nor the OIP `id`;
 * - the worker's own check fails a crafted queue entry as invalid input, without crashing;
 * - rows of different lengths in one batch are served, not taken for a lost engine;
 * - a tenant's open jobs are capped: 429 too_many_open_jobs, and released when jobs end.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { type BullJobQueue, createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { openJobsKey } from '../infra/redis/keys.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { buildDynamicAxisModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi } from './support/api-app.ts';
import { memberEntry } from './support/entries.ts';
import { KEY_A, KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

const MODEL = 'seqsum';
/** Deployed at min 0 with no scaler and no worker: its jobs are taken and stay queued. */
const IDLE = 'seqsum-idle';

let stack: TestStack;
let redis: RedisClient;
let producer: BullJobQueue;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TTL_MS: '5000' });
  redis = createRedis(stack.config.redisUrl);
  producer = createBullJobQueue({ connection: stack.config.redisUrl, prefix: stack.config.queuePrefix, retentionS: 600, attempts: 1 });
  const bytes = buildDynamicAxisModel();
  await stack.registry.publish({ name: MODEL, version: '1', bytes, maxBatch: 16, warmupBatches: [1, 16] });
  await stack.registry.publish({ name: IDLE, version: '1', bytes, maxBatch: 16 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.deployments.put({ model: IDLE, version: '1', min: 0, max: 1, standby: 0 });
  await stack.startWorker(MODEL, '1');
  await stack.waitForWorkers(MODEL, 'active');
}, 90_000);

afterAll(async () => {
  await producer?.close();
  await stack?.close();
  if (redis) await closeRedis(redis);
});

const seq = (shape: unknown[], data: unknown[], extra: Record<string, unknown> = {}) => ({
  inputs: [{ name: 'seq', datatype: 'FP32', shape, data }],
  ...extra,
});

async function post(model: string, body: unknown, via: { call: TestStack['call'] } = stack, key = KEY_A) {
  const res = await via.call(`/v1/models/${model}/jobs`, { method: 'POST', body: JSON.stringify(body), key });
  return { status: res.status, body: (await res.json()) as { id?: string; error?: { code: string; message: string } } };
}

/** Every job BullMQ holds for the model, whatever its state. */
function jobsHeld(model: string): Promise<number> {
  return stack.withQueue(model, '1', async (queue) => {
    const counts = await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed');
    return Object.values(counts).reduce((a, b) => a + b, 0);
  });
}

/** The worker is alive and serving: its heartbeat says active, and a fresh job succeeds with the right sum. */
async function expectWorkerServes(): Promise<void> {
  const beats = (await listHeartbeats(redis, stack.config.queuePrefix)).filter((b) => b.model === MODEL);
  expect(beats.map((b) => b.state)).toEqual(['active']);
  const ok = await post(MODEL, seq([1, 3], [1, 2, 3]));
  expect(ok.status).toBe(202);
  const done = await waitForJob(stack, ok.body.id as string);
  expect(done).toMatchObject({ status: 'succeeded', outputs: [{ name: 'total', shape: [1, 1], data: [6] }] });
}

/** Bytes Redis holds under this stack's key prefix (MEMORY USAGE summed): other test files share the server. */
async function prefixBytes(): Promise<number> {
  let total = 0;
  for await (const keys of scanKeys(redis, `${stack.config.queuePrefix}:*`)) {
    for (const key of keys) total += ((await redis.memory('USAGE', key)) as number | null) ?? 0;
  }
  return total;
}

describe('a zero-length dimension', () => {
  it('shape [1e9, 0] with data [] is a 413 naming the input and the limit; nothing is queued; the worker lives', async () => {
    const before = await jobsHeld(MODEL);
    for (const body of [seq([1e9, 0], []), seq([1e9, 0], [], { timeoutMs: 1 })]) {
      const res = await post(MODEL, body);
      expect(res.status).toBe(413);
      expect(res.body.error?.code).toBe('too_many_rows');
      expect(res.body.error?.message).toContain('"seq"');
      expect(res.body.error?.message).toContain('10000');
    }
    // An empty row within the bounds is a request like any other: served, its sum 0.
    const empty = await post(MODEL, seq([1, 0], []));
    expect(empty.status).toBe(202);
    expect(await waitForJob(stack, empty.body.id as string)).toMatchObject({ status: 'succeeded', outputs: [{ data: [0] }] });
    expect(await jobsHeld(MODEL)).toBe(before + 1);
    await expectWorkerServes();
  });

  it('the refused request adds no arrivals; a job that expires unserved counts its rows once', async () => {
    // Its own API, closed before reading, so its arrival counter has flushed everything.
    const api = await startTestApi(stack.config);
    const refused = await post(IDLE, seq([1e9, 0], [], { timeoutMs: 1 }), api);
    expect(refused.status).toBe(413);
    const late = await post(IDLE, seq([3, 2], [1, 2, 3, 4, 5, 6], { timeoutMs: 1 }), api);
    expect(late.status).toBe(202);
    await new Promise((r) => setTimeout(r, 20));
    // Looked at past its deadline: the API ends it (deadline_exceeded); looked at again: same job.
    for (let i = 0; i < 2; i++) {
      const res = await api.call(`/v1/jobs/${late.body.id}`, { key: KEY_A });
      expect(((await res.json()) as { error?: { code: string } }).error?.code).toBe('deadline_exceeded');
    }
    await api.close();
    const history = createArrivalHistory(redis, stack.config.queuePrefix, systemClock);
    const now = Date.now();
    const series = await history.series(IDLE, now - 600_000, now);
    expect(series.perMinute.reduce((a, b) => a + b, 0)).toBe(3);
  });
});

describe('parameters and id', () => {
  it('20 requests with 2 MB of parameters or id are 413s, and Redis holds no more than before (< 1 MB more)', async () => {
    const before = await prefixBytes();
    const blob = 'x'.repeat(2 * 1024 * 1024);
    for (let i = 0; i < 10; i++) {
      const params = await post(MODEL, seq([1, 2], [1, 2], { parameters: { blob } }));
      expect([params.status, params.body.error?.code]).toEqual([413, 'parameters_too_large']);
      expect(params.body.error?.message).toContain('4096');
      const id = await post(MODEL, seq([1, 2], [1, 2], { id: blob }));
      expect([id.status, id.body.error?.code]).toEqual([413, 'id_too_long']);
      expect(id.body.error?.message).toContain('256');
    }
    // Stored, 40 MB would show; the bound is an order of magnitude, not a measurement.
    expect((await prefixBytes()) - before).toBeLessThan(1024 * 1024);
  });

  it('an accepted job keeps neither parameters nor the OIP id in the queue', async () => {
    const body = {
      inputs: [{ name: 'seq', datatype: 'FP32', shape: [1, 2], data: [1, 2], parameters: { content_type: 'np' } }],
      outputs: [{ name: 'total', parameters: { binary_data: false } }],
      parameters: { note: 'kept nowhere' },
      id: 'req-1',
    };
    const res = await post(IDLE, body);
    expect(res.status).toBe(202);
    // The request is a member of a queue entry: its record there, the entry's data, its packed inputs' specs.
    const held = await memberEntry(redis, stack.config.queuePrefix, res.body.id as string);
    expect(held).toBeDefined();
    const data = held?.entry.data;
    for (const stored of [data, held?.member, ...(data?.inputs ?? [])]) {
      expect(stored).not.toHaveProperty('parameters');
      expect(stored).not.toHaveProperty('requestId');
    }
    expect(data?.outputs).toEqual([{ name: 'total' }]);
    expect(JSON.stringify(data)).not.toContain('kept nowhere');
    expect(JSON.stringify(data)).not.toContain('req-1');
    await stack.call(`/v1/jobs/${res.body.id}`, { method: 'DELETE' });
  });
});

describe("the worker's own check", () => {
  it('a crafted queue entry declaring 1e9 rows fails as invalid_input, and the worker serves on', async () => {
    const id = `job_crafted_${Date.now()}`;
    const crafted: QueuedRequest = {
      tenant: 'tenant-a',
      model: MODEL,
      version: '1',
      rows: 1e9,
      inputs: [{ name: 'seq', datatype: 'FP32', shape: [1e9, 0], data: new Float32Array(0) }],
      submittedAt: Date.now(),
    };
    await producer.enqueue(crafted, { priority: 'normal', jobId: id });
    const done = await waitForJob(stack, id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatchObject({ code: 'invalid_input' });
    expect((done.error as { message: string }).message).toContain('10000');
    await expectWorkerServes();
  });

  it('rows of different lengths, sent at once, are all served (not a lost engine)', async () => {
    const lengths = Array.from({ length: 40 }, (_, i) => i % 6);
    const ids = await Promise.all(
      lengths.map(async (n) => {
        const res = await post(
          MODEL,
          seq(
            [1, n],
            Array.from({ length: n }, (_, k) => k + 1),
          ),
        );
        expect(res.status).toBe(202);
        return res.body.id as string;
      }),
    );
    const done = await Promise.all(ids.map((id) => waitForJob(stack, id)));
    expect(done.map((j) => (j.outputs as Array<{ data: number[] }>)[0]?.data[0])).toEqual(lengths.map((n) => (n * (n + 1)) / 2));
    await expectWorkerServes();
  });
});

/** Waits until none of the tenant's jobs counts as open (a worker releases the jobs it ends about once a second). */
async function untilNoneOpen(tenant: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await redis.zcard(openJobsKey(stack.config.queuePrefix, tenant))) > 0) {
    if (Date.now() > deadline) throw new Error(`${tenant} still has open jobs`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('open jobs per tenant', () => {
  it('past MAX_OPEN_JOBS_PER_TENANT a submit is 429 too_many_open_jobs; cancel or completion makes room', async () => {
    const api = await startTestApi(loadConfig({ ...stack.env, MAX_OPEN_JOBS_PER_TENANT: '3' }));
    await untilNoneOpen('tenant-a'); // the jobs of the tests above
    try {
      // tenant-b fills its 3 with jobs no worker takes.
      const queued: string[] = [];
      for (let i = 0; i < 3; i++) {
        const res = await post(IDLE, seq([1, 1], [i]), api, KEY_B);
        expect(res.status).toBe(202);
        queued.push(res.body.id as string);
      }
      const over = await post(IDLE, seq([1, 1], [9]), api, KEY_B);
      expect(over.status).toBe(429);
      expect(over.body.error?.code).toBe('too_many_open_jobs');
      expect(over.body.error?.message).toContain('3');
      // Another tenant is not affected.
      const other = await post(MODEL, seq([1, 1], [1]), api, KEY_A);
      expect(other.status).toBe(202);

      // A cancel releases one.
      expect((await api.call(`/v1/jobs/${queued[0]}`, { method: 'DELETE', key: KEY_B })).status).toBe(200);
      expect((await post(IDLE, seq([1, 1], [9]), api, KEY_B)).status).toBe(202);

      // Jobs the worker finishes are released by it (in batches, within about a second).
      await waitForJob(stack, other.body.id as string);
      const served: string[] = [];
      for (let i = 0; i < 2; i++) {
        const res = await post(MODEL, seq([1, 1], [10 + i]), api, KEY_A);
        expect(res.status).toBe(202);
        served.push(res.body.id as string);
      }
      await Promise.all(served.map((id) => waitForJob(stack, id)));
      await untilNoneOpen('tenant-a');
      for (let i = 0; i < 3; i++) expect((await post(IDLE, seq([1, 1], [i]), api, KEY_A)).status).toBe(202);
      expect((await post(IDLE, seq([1, 1], [9]), api, KEY_A)).status).toBe(429);
    } finally {
      await api.close();
    }
  });
});
