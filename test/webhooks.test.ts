// Webhooks end to end on real Redis: a real BullMQ Queue and Worker produce job events, two
// dispatchers run at once, real HTTP receivers on 127.0.0.1 answer, the standardwebhooks
// library verifies signatures the way a receiver would, and the routes are driven over hono.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq';
import { Hono } from 'hono';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDispatcher } from '../api/dispatcher/main.ts';
import type { AuthEnv } from '../api/http/auth.ts';
import { errorHandler } from '../api/http/errors.ts';
import { webhookRoutes } from '../api/routes/webhooks.ts';
import { createDeliveryStore, type Delivery } from '../api/webhooks/delivery-store.ts';
import { createDispatcher, type Dispatcher } from '../api/webhooks/dispatcher.ts';
import { deliveryId } from '../api/webhooks/event-source.ts';
import type { EntryData, EntryResult } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { asQueueJob, LEGACY_JOB_NAME, OUTDATED_JOB_FAILURE, type QueueJobData, type QueueJobResult } from '../infra/contracts/queue-job.ts';
import type { WebhookEvent } from '../infra/contracts/webhook.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { createLogger, silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import {
  addEntry,
  cancelQueuedMember,
  type EntryKnobs,
  knobbedRun,
  memberOutput,
  type TestMember,
  testEntry,
} from './support/entry-jobs.ts';
import { entryProcessor } from './support/entry-worker.ts';
import { testEnv, testServices, uniqueId } from './support/services.ts';

interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
}

/** One HTTP server; each path answers from its own script of statuses (then 200), and records what came. */
function receivers() {
  const received: Received[] = [];
  const scripts = new Map<string, number[]>();
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', 'http://x').pathname;
      received.push({ path, headers: req.headers as Record<string, string>, body });
      const status = scripts.get(path)?.shift() ?? 200;
      res.writeHead(status).end();
    });
  });
  return {
    received,
    script: (path: string, statuses: number[]) => scripts.set(path, [...statuses]),
    at: (path: string) => received.filter((r) => r.path === path),
    start: () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve())),
    url: (path: string, host = '127.0.0.1') => `http://${host}:${(server.address() as AddressInfo).port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function eventually<T>(read: () => Promise<T | undefined> | T | undefined, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('webhooks, end to end', () => {
  const prefix = uniqueId('wh');
  const model = 'hooked';
  const redis = createRedis(testServices().redisUrl);
  const r = receivers();
  const store = createDeliveryStore(redis, prefix);
  const config: Config['webhooks'] = {
    allowedPrivateHosts: ['127.0.0.1'],
    timeoutMs: 5_000,
    retryScheduleMs: [50, 50, 50, 50],
    concurrency: 16,
    concurrencyPerTenant: 4,
  };
  const dispatchers: Dispatcher[] = [];
  let queue: Queue;
  let worker: Worker<QueueJobData, QueueJobResult>;
  let counter = 0;

  const app = new Hono<AuthEnv>();
  app.onError(errorHandler(undefined));
  app.use('*', async (c, next) => {
    c.set('tenant', c.req.header('x-tenant') ?? 'tenant-a');
    await next();
  });
  app.route('/', webhookRoutes({ redis, prefix, clock: systemClock }));
  const call = (path: string, tenant = 'tenant-a', method = 'GET') => app.request(path, { method, headers: { 'x-tenant': tenant } });

  /** Submits a request (a one-member entry) whose run succeeds, or fails as `fail` says; its id. */
  async function submit(
    path: string,
    opts: { events?: WebhookEvent[]; tenant?: string; fail?: 'unrecoverable' | 'first'; attempts?: number; host?: string } = {},
  ): Promise<string> {
    const jobId = `job_${counter++}_${uniqueId('j')}`;
    const webhook = { url: r.url(path, opts.host), events: opts.events ?? ['job.succeeded', 'job.failed'] };
    const knobs: EntryKnobs =
      opts.fail === 'unrecoverable'
        ? { errors: { [jobId]: { code: 'invalid_input', message: 'rows do not match' } } }
        : opts.fail === 'first'
          ? { failFirst: 'transient' }
          : {};
    const data = testEntry({
      model,
      version: '1',
      members: [{ id: jobId, webhook }],
      knobs,
      ...(opts.tenant ? { tenant: opts.tenant } : {}),
    });
    await addEntry(redis, prefix, queue, data, { attempts: opts.attempts ?? 1 });
    return jobId;
  }

  const verify = async (got: Received, tenant = 'tenant-a') => {
    const secret = (await (await call('/v1/webhooks/secret', tenant)).json()) as { secret: string };
    return new Webhook(secret.secret).verify(got.body, got.headers) as { type: string; data: Record<string, unknown> };
  };

  const settled = (id: string, state: Delivery['state']) =>
    eventually(async () => {
      const d = await store.get(id);
      return d?.state === state ? d : undefined;
    }, `delivery ${id} to be ${state}`);

  beforeAll(async () => {
    await r.start();
    queue = new Queue(queueName(model, '1'), { connection: redis, prefix });
    const entries = entryProcessor({ redis, prefix, run: knobbedRun });
    worker = new Worker<QueueJobData, QueueJobResult>(
      queueName(model, '1'),
      async (job: Job<QueueJobData, QueueJobResult>) => {
        const typed = asQueueJob(job);
        // As warmpool's intake does with a job of neither kind (an older API's `infer` job).
        if (typed?.name !== 'entry') throw new UnrecoverableError(OUTDATED_JOB_FAILURE);
        return entries(job as Job<EntryData, EntryResult>);
      },
      { connection: redis, prefix, concurrency: 8 },
    );
    // Two dispatchers for the whole file: every exactly-once assertion below holds with both racing.
    for (let i = 0; i < 2; i++) {
      const d = createDispatcher({
        redis,
        prefix,
        clock: systemClock,
        config,
        log: silentLog,
        pollIntervalMs: 50,
        discoverIntervalMs: 200,
        resolve: async (host) => [{ address: host === 'rebind.test' ? '127.0.0.1' : '203.0.113.1', family: 4 }],
      });
      d.start();
      dispatchers.push(d);
    }
  });

  afterAll(async () => {
    // close() is idempotent: a second call waits on the first.
    await Promise.all(dispatchers.flatMap((d) => [d.close(), d.close()]));
    await worker?.close();
    await queue?.obliterate({ force: true }).catch(() => undefined);
    await queue?.close();
    await r.close();
    for await (const keys of scanKeys(redis, `${prefix}:*`)) {
      await deleteMany(redis, keys);
    }
    await closeRedis(redis);
  });

  it('delivers job.succeeded once, signed, with the job resource; no job.started unless asked', async () => {
    const jobId = await submit('/ok');
    const got = await eventually(() => r.at('/ok')[0], 'the delivery');
    expect(got.headers['webhook-id']).toBe(deliveryId(jobId, 'job.succeeded'));
    expect(got.headers['content-type']).toBe('application/json');
    const payload = await verify(got);
    expect(payload.type).toBe('job.succeeded');
    expect(payload.data).toMatchObject({
      id: jobId,
      model,
      version: '1',
      status: 'succeeded',
      outputs: [{ name: 'y', datatype: 'FP32', shape: [1, 1], data: memberOutput(0, 1) }],
      timings: { batchRows: 1 },
    });
    expect(typeof payload.data.finishedAt).toBe('string');
    const delivery = await settled(deliveryId(jobId, 'job.succeeded'), 'succeeded');
    expect(delivery.attempts).toHaveLength(1);
    expect(await store.get(deliveryId(jobId, 'job.started'))).toBeNull();
  });

  it('sends job.started too when the webhook asks for it', async () => {
    const jobId = await submit('/started', { events: ['job.started', 'job.succeeded'] });
    await settled(deliveryId(jobId, 'job.succeeded'), 'succeeded');
    await settled(deliveryId(jobId, 'job.started'), 'succeeded');
    const types = await Promise.all(r.at('/started').map(async (g) => (await verify(g)).type));
    expect(types.sort()).toEqual(['job.started', 'job.succeeded']);
    const started = r.at('/started').find((g) => g.headers['webhook-id'] === deliveryId(jobId, 'job.started'));
    expect(started && (await verify(started)).data.status).toBe('running');
  });

  it('sends job.failed for a final failure, not for an attempt that is retried', async () => {
    const failed = await submit('/failed', { fail: 'unrecoverable' });
    const retried = await submit('/retried', { fail: 'first', attempts: 2 });
    await settled(deliveryId(failed, 'job.failed'), 'succeeded');
    const [got] = r.at('/failed');
    expect(got && (await verify(got))).toMatchObject({
      type: 'job.failed',
      data: { id: failed, status: 'failed', error: { code: 'invalid_input', message: 'rows do not match' } },
    });
    // Events are read in stream order, so by the time job.succeeded is stored, the earlier failed attempt was seen.
    await settled(deliveryId(retried, 'job.succeeded'), 'succeeded');
    expect(await store.get(deliveryId(retried, 'job.failed'))).toBeNull();
    expect(r.at('/retried')).toHaveLength(1);
  });

  it('delivers job.failed, saying to start it again, for an online job an older API queued (the migration)', async () => {
    const jobId = `job_${counter++}_${uniqueId('legacy')}`;
    const webhook = { url: r.url('/legacy'), events: ['job.succeeded', 'job.failed'] };
    const inputs = [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [1] }];
    await queue.add(LEGACY_JOB_NAME, { tenant: 'tenant-a', model, version: '1', inputs, webhook, submittedAt: Date.now() }, { jobId });
    await settled(deliveryId(jobId, 'job.failed'), 'succeeded');
    const [got] = r.at('/legacy');
    expect(got && (await verify(got))).toMatchObject({
      type: 'job.failed',
      data: {
        id: jobId,
        status: 'failed',
        error: { code: 'invalid_input', message: expect.stringMatching(/older warmpool.*start it again$/) },
      },
    });
  });

  it('retries a receiver that answers 500 three times, then records one acceptance after 4 attempts', async () => {
    r.script('/flaky', [500, 500, 500]);
    const jobId = await submit('/flaky');
    const delivery = await settled(deliveryId(jobId, 'job.succeeded'), 'succeeded');
    expect(delivery.attempts.map((a) => a.status)).toEqual([500, 500, 500, 200]);
    const hits = r.at('/flaky');
    expect(hits).toHaveLength(4);
    expect(new Set(hits.map((h) => h.headers['webhook-id']))).toEqual(new Set([delivery.id]));
    for (const h of hits) expect((await verify(h)).data.id).toBe(jobId);
  });

  it('dead-letters a receiver that stays down, lists it, and replays it on demand', async () => {
    r.script('/down', Array(5).fill(503));
    const jobId = await submit('/down');
    const id = deliveryId(jobId, 'job.succeeded');
    const dead = await settled(id, 'dead');
    expect(dead.attempts).toHaveLength(5);
    expect(dead.reason).toBe('retries_exhausted');

    const listed = (await (await call('/v1/webhooks/deliveries?status=dead')).json()) as {
      deliveries: Array<{ id: string; attempts: unknown[] }>;
    };
    expect(listed.deliveries.find((d) => d.id === id)?.attempts).toHaveLength(5);
    const other = (await (await call('/v1/webhooks/deliveries?status=dead', 'tenant-b')).json()) as { deliveries: unknown[] };
    expect(other.deliveries).toEqual([]);
    expect((await call(`/v1/webhooks/deliveries/${id}/replay`, 'tenant-b', 'POST')).status).toBe(404);

    // The receiver is back (its script is used up: 200 from now on).
    const replay = await call(`/v1/webhooks/deliveries/${id}/replay`, 'tenant-a', 'POST');
    expect(replay.status).toBe(202);
    const done = await settled(id, 'succeeded');
    expect(done.attempts.map((a) => a.status)).toEqual([200]);
    expect(r.at('/down')).toHaveLength(6);
    const afterReplay = (await (await call('/v1/webhooks/deliveries?status=dead')).json()) as { deliveries: Array<{ id: string }> };
    expect(afterReplay.deliveries.map((d) => d.id)).not.toContain(id);
  });

  it('stops after one attempt when the receiver answers 410', async () => {
    r.script('/gone', [410, 410, 410]);
    const jobId = await submit('/gone');
    const failed = await settled(deliveryId(jobId, 'job.succeeded'), 'failed');
    expect(failed).toMatchObject({ reason: 'gone', nextAttemptAt: null });
    expect(failed.attempts.map((a) => a.status)).toEqual([410]);
    // The dispatchers kept going (a later delivery arrives) while the gone one stayed at one request.
    const next = await submit('/gone2');
    await settled(deliveryId(next, 'job.succeeded'), 'succeeded');
    expect(r.at('/gone')).toHaveLength(1);
    const listed = (await (await call('/v1/webhooks/deliveries?status=failed')).json()) as {
      deliveries: Array<{ id: string; reason?: string }>;
    };
    expect(listed.deliveries.find((d) => d.id === failed.id)?.reason).toBe('gone');
  });

  it('signs with both secrets during a rotation overlap', async () => {
    const tenant = 'tenant-rot';
    const before = (await (await call('/v1/webhooks/secret', tenant)).json()) as { secret: string };
    const rotated = (await (await call('/v1/webhooks/secret/rotate', tenant, 'POST')).json()) as {
      secret: string;
      previous: { secret: string; expiresAt: string };
    };
    expect(rotated.previous.secret).toBe(before.secret);
    expect(rotated.secret).not.toBe(before.secret);
    expect(Date.parse(rotated.previous.expiresAt)).toBeGreaterThan(Date.now());
    const jobId = await submit('/rotated', { tenant });
    const got = await eventually(() => r.at('/rotated')[0], 'the delivery');
    expect(got.headers['webhook-signature']?.split(' ')).toHaveLength(2);
    for (const secret of [before.secret, rotated.secret]) {
      expect((new Webhook(secret).verify(got.body, got.headers) as { data: { id: string } }).data.id).toBe(jobId);
    }
  });

  it('refuses at delivery a host name that resolves to a blocked address', async () => {
    const jobId = await submit('/rebound', { host: 'rebind.test' });
    const dead = await settled(deliveryId(jobId, 'job.succeeded'), 'dead');
    expect(dead.attempts).toHaveLength(5);
    // Stored as its category only: where the name resolved stays in the dispatcher's log.
    for (const a of dead.attempts) expect(a.error).toBe('blocked_address');
    expect(r.at('/rebound')).toEqual([]);
  });

  it('delivers each of many events exactly once with two dispatchers racing', async () => {
    const ids = await Promise.all(Array.from({ length: 20 }, () => submit('/many')));
    const deliveries = await Promise.all(ids.map((id) => settled(deliveryId(id, 'job.succeeded'), 'succeeded')));
    for (const d of deliveries) expect(d.attempts).toHaveLength(1);
    const perId = new Map<string, number>();
    for (const g of r.at('/many')) perId.set(g.headers['webhook-id'] ?? '', (perId.get(g.headers['webhook-id'] ?? '') ?? 0) + 1);
    expect([...perId.values()]).toEqual(Array(20).fill(1));
  });

  /** A member for an entry, with a webhook at `path` asking for `events` (no webhook without a path). */
  const member = (path?: string, events: WebhookEvent[] = ['job.succeeded', 'job.failed']): TestMember => ({
    id: `job_${counter++}_${uniqueId('m')}`,
    ...(path ? { webhook: { url: r.url(path), events } } : {}),
  });

  /** The events stored as deliveries for request `jobId`. */
  const storedEvents = async (jobId: string) => {
    const all: WebhookEvent[] = ['job.started', 'job.succeeded', 'job.failed'];
    const stored = await Promise.all(all.map(async (e) => ((await store.get(deliveryId(jobId, e))) ? [e] : [])));
    return stored.flat();
  };

  /** The verified payload of delivery `id`, as `path` received it. */
  const received = async (path: string, id: string) => {
    const got = r.at(path).find((g) => g.headers['webhook-id'] === id);
    if (!got) throw new Error(`${path} never received ${id}`);
    return verify(got);
  };

  // Deliveries are stored in member order within a stream event, and the stream is read in order:
  // once a later member's (or a later event's) delivery exists, an earlier one's would too.
  it('delivers to each member of a shared entry that asked: its own outcome and rows, once each', async () => {
    const started = member('/entry-a', ['job.started', 'job.succeeded', 'job.failed']);
    const silent = member();
    const failedOnly = member('/entry-failed-only', ['job.failed']);
    const bad = member('/entry-bad');
    const last = member('/entry-last', ['job.succeeded']);
    started.rows = 2;
    const errors = { [bad.id]: { code: 'invalid_input', message: 'input "x" holds a NaN' } };
    const data = testEntry({ model, version: '1', members: [started, silent, failedOnly, bad, last], knobs: { errors } });
    await addEntry(redis, prefix, queue, data);
    await Promise.all([
      settled(deliveryId(started.id, 'job.started'), 'succeeded'),
      settled(deliveryId(started.id, 'job.succeeded'), 'succeeded'),
      settled(deliveryId(bad.id, 'job.failed'), 'succeeded'),
      settled(deliveryId(last.id, 'job.succeeded'), 'succeeded'),
    ]);
    expect(await received('/entry-a', deliveryId(started.id, 'job.started'))).toMatchObject({
      type: 'job.started',
      data: { id: started.id, status: 'running' },
    });
    expect(await received('/entry-a', deliveryId(started.id, 'job.succeeded'))).toMatchObject({
      type: 'job.succeeded',
      data: { id: started.id, status: 'succeeded', outputs: [{ name: 'y', shape: [2, 1], data: memberOutput(0, 2) }] },
    });
    const failed = await received('/entry-bad', deliveryId(bad.id, 'job.failed'));
    expect(failed).toMatchObject({ type: 'job.failed', data: { id: bad.id, status: 'failed', error: errors[bad.id] } });
    expect(failed.data.outputs).toBeUndefined();
    // Its own timings: the forward pass carried every member that ran.
    expect((await received('/entry-a', deliveryId(started.id, 'job.succeeded'))).data.timings).toMatchObject({ batchRows: 6 });
    expect(await received('/entry-last', deliveryId(last.id, 'job.succeeded'))).toMatchObject({
      data: { id: last.id, status: 'succeeded', outputs: [{ shape: [1, 1], data: memberOutput(4, 1) }] },
    });
    expect(await storedEvents(started.id)).toEqual(['job.started', 'job.succeeded']);
    expect(await storedEvents(silent.id)).toEqual([]);
    expect(await storedEvents(failedOnly.id)).toEqual([]);
    expect(await storedEvents(bad.id)).toEqual(['job.failed']);
    expect(await storedEvents(last.id)).toEqual(['job.succeeded']);
    for (const path of ['/entry-a', '/entry-bad', '/entry-last']) {
      const ids = r.at(path).map((g) => g.headers['webhook-id']);
      expect(ids).toHaveLength(new Set(ids).size);
    }
    expect(r.at('/entry-failed-only')).toEqual([]);
  });

  it('sends job.failed (status canceled, no job.started) for a member canceled while its entry was queued; its entry-mate gets its own', async () => {
    const canceled = member('/entry-canceled', ['job.started', 'job.succeeded', 'job.failed']);
    const kept = member('/entry-kept', ['job.started', 'job.succeeded']);
    const data = testEntry({ model, version: '1', members: [canceled, kept] });
    const entry = await addEntry(redis, prefix, queue, data, { held: true });
    expect(await cancelQueuedMember(redis, prefix, queue.name, entry, canceled.id)).toMatchObject({
      status: 'canceled',
    });
    await entry.release();
    await settled(deliveryId(kept.id, 'job.started'), 'succeeded');
    await settled(deliveryId(kept.id, 'job.succeeded'), 'succeeded');
    expect(await received('/entry-kept', deliveryId(kept.id, 'job.succeeded'))).toMatchObject({
      data: { id: kept.id, status: 'succeeded', outputs: [{ shape: [1, 1], data: memberOutput(1, 1) }] },
    });
    // A cancel is the member's end: job.failed, saying canceled (event-source.ts's header).
    await settled(deliveryId(canceled.id, 'job.failed'), 'succeeded');
    expect(await received('/entry-canceled', deliveryId(canceled.id, 'job.failed'))).toMatchObject({
      type: 'job.failed',
      data: { id: canceled.id, status: 'canceled', error: { code: 'canceled' } },
    });
    expect(await storedEvents(canceled.id)).toEqual(['job.failed']);
    expect(r.at('/entry-canceled')).toHaveLength(1);
  });

  it("fails each member that asked when its entry fails for good, with the entry's error; one canceled while queued hears of its cancel instead", async () => {
    const canceled = member('/entry-down-canceled', ['job.started', 'job.failed']);
    const successOnly = member('/entry-down-success-only', ['job.succeeded']);
    const failing = member('/entry-down');
    const data = testEntry({
      model,
      version: '1',
      members: [canceled, successOnly, failing],
      knobs: { fail: 'inference_failed: the forward pass failed for this entry' },
    });
    const entry = await addEntry(redis, prefix, queue, data, { held: true });
    expect(await cancelQueuedMember(redis, prefix, queue.name, entry, canceled.id)).not.toBeNull();
    await entry.release();
    await settled(deliveryId(failing.id, 'job.failed'), 'succeeded');
    expect(await received('/entry-down', deliveryId(failing.id, 'job.failed'))).toMatchObject({
      type: 'job.failed',
      data: { id: failing.id, status: 'failed', error: { code: 'inference_failed', message: 'the forward pass failed for this entry' } },
    });
    expect(await storedEvents(canceled.id)).toEqual(['job.failed']);
    await settled(deliveryId(canceled.id, 'job.failed'), 'succeeded');
    expect(await received('/entry-down-canceled', deliveryId(canceled.id, 'job.failed'))).toMatchObject({
      data: { id: canceled.id, status: 'canceled', error: { code: 'canceled' } },
    });
    expect(await storedEvents(successOnly.id)).toEqual([]);
  });

  it('answers bad route input with 4xx', async () => {
    expect((await call('/v1/webhooks/deliveries?status=weird')).status).toBe(400);
    expect((await call('/v1/webhooks/deliveries?limit=0')).status).toBe(400);
    expect((await call('/v1/webhooks/deliveries/nope/replay', 'tenant-a', 'POST')).status).toBe(404);
    const body = (await (await call('/v1/webhooks/deliveries?limit=abc')).json()) as { error: { code: string } };
    expect(body.error.code).toBe('invalid_query');
  });
});

describe('startDispatcher (the `warmpool dispatcher` wiring)', () => {
  it('delivers from a loaded Config and closes twice without error', async () => {
    const env = testEnv({ WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1', WEBHOOK_RETRY_SCHEDULE_MS: '50' });
    const config = loadConfig(env);
    const r = receivers();
    await r.start();
    const redis = createRedis(config.redisUrl);
    const queue = new Queue(queueName('wired', '1'), { connection: redis, prefix: config.queuePrefix });
    const worker = new Worker<EntryData, EntryResult>(
      queueName('wired', '1'),
      entryProcessor({ redis, prefix: config.queuePrefix, run: knobbedRun }),
      { connection: redis, prefix: config.queuePrefix },
    );
    const running = startDispatcher(config, createLogger('silent'));
    try {
      const webhook = { url: r.url('/wired'), events: ['job.succeeded' as const] };
      await addEntry(
        redis,
        config.queuePrefix,
        queue,
        testEntry({ model: 'wired', version: '1', members: [{ id: 'job_wired', webhook }] }),
      );
      const got = await eventually(() => r.at('/wired')[0], 'the delivery');
      expect(got.headers['webhook-id']).toBe(deliveryId('job_wired', 'job.succeeded'));
    } finally {
      await Promise.all([running.close(), running.close()]);
      await worker.close();
      await queue.obliterate({ force: true }).catch(() => undefined);
      await queue.close();
      for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) {
        await deleteMany(redis, keys);
      }
      await closeRedis(redis);
      await r.close();
    }
  });
});
