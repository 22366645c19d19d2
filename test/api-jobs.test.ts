/**
 * The async job API over HTTP on real Redis, a real S3 registry and (for SSE) a real worker
 * process: idempotency (also under concurrency), priorities, cancel in every state, the event
 * stream, deadlines with no worker, per-tenant rate limits, and tenant isolation.
 */
import type { Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { startEntryWorker } from './support/entry-worker.ts';
import { uniqueId } from './support/services.ts';
import { sseReader } from './support/sse-reader.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const F = 4;
const rowsOf = (n: number, seed = 0) => ({
  inputs: [{ name: 'features', shape: [n, F], datatype: 'FP32', data: Array.from({ length: n * F }, (_, i) => (i + seed) / 10) }],
});

let stack: TestStack;
/** The holding workers' shared connection (a Cluster client on a cluster URL). */
let workerRedis: RedisClient | undefined;
let api: TestApi;
/** Plain BullMQ workers (running queue entries) started by a test, closed after it. */
const workers: Worker[] = [];

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  const mlp = buildMlpModel({ features: F, hidden: 8, layers: 1 });
  // "scorer" gets a real worker in the SSE test; the others never get a warmpool worker.
  for (const name of ['scorer', 'idle', 'ordered', 'held', 'late'])
    await stack.registry.publish({ name, version: '1', bytes: mlp, maxBatch: 8 });
  await stack.deployments.put({ model: 'scorer', version: '1', min: 1, max: 1, standby: 0 });
  // Deployed so they take jobs; min 0 and no scaler here, so only this file's own workers run them.
  for (const name of ['idle', 'ordered', 'held', 'late'])
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 1, standby: 0 });
  api = await startTestApi(stack.config, { deps: { sseHeartbeatMs: 20 } });
}, 120_000);

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close()));
});

afterAll(async () => {
  await api?.close();
  if (workerRedis) await closeRedis(workerRedis);
  await stack?.close();
});

function submit(model: string, body: unknown, init: { key?: string; headers?: Record<string, string>; via?: TestApi } = {}) {
  return (init.via ?? api).call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    body: JSON.stringify(body),
    key: init.key ?? KEY_A,
    headers: init.headers ?? {},
  });
}

async function submitId(model: string, body: unknown, via?: TestApi): Promise<string> {
  const res = await submit(model, body, { via });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

const errorOf = async (res: Response) => ((await res.json()) as { error: { code: string; message: string } }).error;

function workerConnection(): RedisClient {
  workerRedis ??= createRedis(stack.config.redisUrl);
  return workerRedis;
}

/**
 * A plain BullMQ worker on a model's queue (test/support/entry-worker.ts); the jobs in the
 * entries it takes wait for `release()`. Records the order it takes them.
 */
function holdingWorker(model: string, concurrency = 1) {
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const order: string[] = [];
  let took: () => void = () => undefined;
  const taken = new Promise<void>((resolve) => (took = resolve));
  const worker = startEntryWorker({
    redis: workerConnection(),
    prefix: stack.config.queuePrefix,
    model,
    concurrency,
    workerId: 'test',
    run: async ({ member }) => {
      order.push(member.id);
      took();
      await gate;
      return [];
    },
  });
  workers.push(worker);
  return { order, taken, release, worker };
}

describe('Idempotency-Key', () => {
  it('replays the first job for the same key and body; 409 for another body', async () => {
    const headers = { 'Idempotency-Key': 'order-42' };
    const first = await submit('idle', rowsOf(1), { headers });
    expect(first.status).toBe(202);
    const body = await first.json();
    const again = await submit('idle', rowsOf(1), { headers });
    expect(again.status).toBe(202);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(await again.json()).toEqual(body);

    const other = await submit('idle', rowsOf(2), { headers });
    expect(other.status).toBe(409);
    expect((await errorOf(other)).code).toBe('idempotency_key_reused');
    // Another tenant's identical key is another job.
    const b = await submit('idle', rowsOf(1), { headers, key: KEY_B });
    expect(((await b.json()) as { id: string }).id).not.toBe((body as { id: string }).id);
  });

  it('creates one job for concurrent identical requests, across API processes', async () => {
    const second = await startTestApi(stack.config);
    // BullMQ's own count: the API's depth() answers from a read up to a second old (admission's cache).
    const held = () => stack.withQueue('held', '1', (q) => q.getJobCountByTypes('waiting', 'prioritized'));
    try {
      const before = await held();
      const headers = { 'Idempotency-Key': 'burst-1' };
      const responses = await Promise.all(
        Array.from({ length: 12 }, (_, i) => submit('held', rowsOf(3, 7), { headers, via: i % 2 ? second : api })),
      );
      expect(responses.map((r) => r.status)).toEqual(new Array(12).fill(202));
      const ids = new Set(await Promise.all(responses.map(async (r) => ((await r.json()) as { id: string }).id)));
      expect(ids.size).toBe(1);
      expect(responses.filter((r) => r.headers.get('idempotent-replayed') === null)).toHaveLength(1);
      // One request, alone in its queue entry.
      expect(await held()).toBe(before + 1);
    } finally {
      await second.close();
    }
  });
});

describe('priorities', () => {
  it('a worker arriving late takes the high job first, then normal, then low in submit order', async () => {
    const low1 = await submitId('ordered', { ...rowsOf(1), priority: 'low' });
    const low2 = await submitId('ordered', { ...rowsOf(1), priority: 'low' });
    const normal = await submitId('ordered', rowsOf(1));
    const high = await submitId('ordered', { ...rowsOf(1), priority: 'high' });
    const { order, release } = holdingWorker('ordered');
    release();
    await api.jobs.waitFor(low2, 30_000);
    expect(order).toEqual([high, normal, low1, low2]);
  });
});

describe('DELETE /v1/jobs/{id}', () => {
  it('cancels a queued job (idempotently), refuses running and finished ones, hides other tenants', async () => {
    const queued = await submitId('held', rowsOf(1));
    expect((await api.call(`/v1/jobs/${queued}`, { method: 'DELETE', key: KEY_B })).status).toBe(404);
    for (let i = 0; i < 2; i++) {
      const res = await api.call(`/v1/jobs/${queued}`, { method: 'DELETE', key: KEY_A });
      expect(res.status).toBe(200);
      expect(await res.json()).toMatchObject({ id: queued, status: 'canceled', error: { code: 'canceled' } });
    }
    expect(await (await api.call(`/v1/jobs/${queued}`, { key: KEY_A })).json()).toMatchObject({ status: 'canceled' });

    // Drain what earlier tests left in this queue, then hold one job running.
    const { taken, release, order } = holdingWorker('held', 100);
    const running = await submitId('held', rowsOf(1, 99));
    await taken;
    while (!order.includes(running)) await new Promise((r) => setTimeout(r, 10));
    const busy = await api.call(`/v1/jobs/${running}`, { method: 'DELETE', key: KEY_A });
    expect(busy.status).toBe(409);
    expect((await errorOf(busy)).code).toBe('job_running');
    release();
    expect((await api.jobs.waitFor(running, 30_000)).status).toBe('succeeded');
    const finished = await api.call(`/v1/jobs/${running}`, { method: 'DELETE', key: KEY_A });
    expect(finished.status).toBe(409);
    expect(await errorOf(finished)).toMatchObject({ code: 'job_finished', message: expect.stringMatching(/succeeded/) });
  });
});

describe('GET /v1/jobs/{id}/events', () => {
  it('streams queued, then each change to succeeded with outputs from a real worker, then ends', async () => {
    const id = await submitId('scorer', rowsOf(2));
    const res = await api.call(`/v1/jobs/${id}/events`, { key: KEY_A });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    const stream = sseReader(res);
    const first = await stream.nextEvent();
    expect(first).toMatchObject({ event: 'queued', data: { id, status: 'queued', model: 'scorer' } });

    await stack.startWorker('scorer', '1');
    const events = [first];
    for (let e = await stream.nextEvent(); e !== null; e = await stream.nextEvent()) events.push(e);
    const names = events.map((e) => e?.event);
    expect(names.at(-1)).toBe('succeeded');
    // Each status once, in lifecycle order ('running' may pass too quickly to be seen); but
    // `queued` again each time its reason to wait changes (checked every WAIT_CHECK_MS: on a
    // loaded host the worker started above can be seen starting), never twice with the same one.
    expect(names.join(',')).toMatch(/^(queued,)+(running,)?succeeded$/);
    const reasons = events
      .filter((e) => e?.event === 'queued')
      .map((e) => JSON.stringify((e?.data as { waiting?: unknown } | undefined)?.waiting));
    for (let i = 1; i < reasons.length; i++) expect(reasons[i]).not.toBe(reasons[i - 1]);
    const last = events.at(-1)?.data;
    expect(last).toEqual(await (await api.call(`/v1/jobs/${id}`, { key: KEY_A })).json());
    const outputs = (last?.outputs ?? []) as Array<{ shape: number[] }>;
    expect(outputs[0]?.shape).toEqual([2, 1]);
    expect(api.jobs.waiting()).toBe(0);
  }, 120_000);

  it('sends heartbeat comments while nothing changes, and releases its listener when the client leaves', async () => {
    const id = await submitId('idle', rowsOf(1));
    const controller = new AbortController();
    const res = await api.call(`/v1/jobs/${id}/events`, { key: KEY_A, signal: controller.signal });
    const stream = sseReader(res);
    expect((await stream.next())?.event).toBe('queued');
    expect(await stream.next()).toEqual({ comment: 'heartbeat' });
    expect(api.jobs.waiting()).toBe(1);
    controller.abort();
    await stream.cancel().catch(() => undefined);
    while (api.jobs.waiting() > 0) await new Promise((r) => setTimeout(r, 10));
    expect(api.jobs.waiting()).toBe(0);
  });

  it('ends with a canceled event when the job is canceled meanwhile', async () => {
    const id = await submitId('idle', rowsOf(1));
    const stream = sseReader(await api.call(`/v1/jobs/${id}/events`, { key: KEY_A }));
    expect((await stream.nextEvent())?.event).toBe('queued');
    expect((await api.call(`/v1/jobs/${id}`, { method: 'DELETE', key: KEY_A })).status).toBe(200);
    expect(await stream.nextEvent()).toMatchObject({ event: 'canceled', data: { id, status: 'canceled', error: { code: 'canceled' } } });
    expect(await stream.nextEvent()).toBeNull();
  });
});

describe('deadlines with no worker running', () => {
  let clock: ManualClock;
  let timed: TestApi;

  beforeAll(async () => {
    clock = new ManualClock(Date.now());
    timed = await startTestApi(stack.config, { clock });
  });
  afterAll(() => timed?.close());

  it('a queued job past its timeoutMs reads failed with deadline_exceeded, on GET and on SSE', async () => {
    const polled = await submitId('late', { ...rowsOf(1), timeoutMs: 1000 }, timed);
    const streamed = await submitId('late', { ...rowsOf(1), timeoutMs: 1000 }, timed);
    expect(await timed.jobs.depth('late', '1')).toBe(2);
    const stream = sseReader(await timed.call(`/v1/jobs/${streamed}/events`, { key: KEY_A }));
    expect((await stream.nextEvent())?.event).toBe('queued');
    expect(await (await timed.call(`/v1/jobs/${polled}`, { key: KEY_A })).json()).toMatchObject({ status: 'queued' });

    // Two sleepers: the stream's heartbeat, and its watch waiting for the deadline.
    while (clock.pending < 2) await new Promise((r) => setTimeout(r, 5));
    await clock.advance(1001);
    expect(await stream.nextEvent()).toMatchObject({
      event: 'failed',
      data: { id: streamed, status: 'failed', error: { code: 'deadline_exceeded' } },
    });
    expect(await stream.nextEvent()).toBeNull();
    const res = await timed.call(`/v1/jobs/${polled}`, { key: KEY_A });
    const body = (await res.json()) as { status: string; error: { code: string; message: string } };
    expect(body).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
    expect(body.error.message).toMatch(/deadline was 1000 ms/);
    // Out of the queue: a worker will never run it late.
    expect(await timed.jobs.depth('late', '1')).toBe(0);
    const del = await timed.call(`/v1/jobs/${polled}`, { method: 'DELETE', key: KEY_A });
    expect(del.status).toBe(409);
    expect((await errorOf(del)).code).toBe('job_finished');
  });
});

describe('rate limits', () => {
  it('answers 429 rate_limited with Retry-After past the burst, shared by every API process', async () => {
    // Their own key prefix, so these buckets are not the ones the other tests' API uses.
    const config = { ...stack.config, queuePrefix: uniqueId('rl') };
    const rateLimit = { rps: 0.01, burst: 2 };
    const one = await startTestApi(config, { rateLimit });
    const two = await startTestApi(config, { rateLimit });
    try {
      expect((await one.call('/v1/models', { key: KEY_B })).status).toBe(200);
      expect((await two.call('/v1/models', { key: KEY_B })).status).toBe(200);
      const refused = await one.call('/v1/models', { key: KEY_B });
      expect(refused.status).toBe(429);
      const retryAfter = Number(refused.headers.get('retry-after'));
      expect(retryAfter).toBeGreaterThan(0);
      expect(retryAfter).toBeLessThanOrEqual(100); // one token per 100 s
      expect(await errorOf(refused)).toMatchObject({ code: 'rate_limited', message: expect.stringMatching(/retry in \d+ s/) });
      expect((await two.call('/v2/models/idle', { key: KEY_B })).status).toBe(429);
    } finally {
      await one.close();
      await two.close();
    }
  });
});

describe('tenant isolation', () => {
  it('another tenant gets 404 on GET, DELETE and SSE of a job, which stays as it was', async () => {
    const id = await submitId('idle', rowsOf(1));
    for (const [path, method] of [
      [`/v1/jobs/${id}`, 'GET'],
      [`/v1/jobs/${id}`, 'DELETE'],
      [`/v1/jobs/${id}/events`, 'GET'],
    ] as const) {
      const res = await api.call(path, { method, key: KEY_B });
      expect(res.status).toBe(404);
      expect(await errorOf(res)).toEqual({ code: 'job_not_found', message: `no job ${id}` });
    }
    expect(await (await api.call(`/v1/jobs/${id}`, { key: KEY_A })).json()).toMatchObject({ id, status: 'queued' });
  });
});
