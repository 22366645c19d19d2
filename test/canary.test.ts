/**
 * Canary with automatic rollback (issue 3 §8) on a real Redis: outcomes come from real BullMQ
 * workers on the version queues (the processor returns a JobResult, or fails the job the way
 * worker/intake.ts does; queue entries of several requests run through
 * test/support/entry-worker.ts, as the worker's entry intake runs them), deployments from the
 * real store, and the guard ticks on a ManualClock, so sustain periods pass without waiting.
 * Each test has its own prefix and deletes its keys; every queue, worker and connection is closed.
 */
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { Hono } from 'hono';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import type { AuthEnv } from '../api/http/auth.ts';
import { errorHandler, notFoundHandler } from '../api/http/errors.ts';
import { canaryRoutes } from '../api/routes/canary.ts';
import { type CanaryGuard, type CanaryStatus, createCanaryGuard } from '../infra/canary/index.ts';
import { createOutcomeStore } from '../infra/canary/outcomes.ts';
import type { CanaryPolicy } from '../infra/canary/verdict.ts';
import { EVENTS_STREAM_MAX_LEN, type JobResult, queueName } from '../infra/contracts/job.ts';
import { createDeploymentStore, type DeploymentStore } from '../infra/deployments/deployment-store.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { type AddedEntry, addEntry, cancelQueuedMember, knobbedRun, type TestEntryData, testEntry } from './support/entry-jobs.ts';
import { startEntryWorker } from './support/entry-worker.ts';
import { redisPrefixes, testServices, uniqueId } from './support/services.ts';

const redis = createRedis(testServices().redisUrl);
const second = createRedis(testServices().redisUrl); // as a second guard process would have
const prefixes = redisPrefixes(redis);
const guards: CanaryGuard[] = [];
const MODEL = 'scorer';
const policy: Partial<CanaryPolicy> = {
  windowMs: 120_000,
  minRequests: 50,
  sustainMs: 60_000,
  maxErrorRateDelta: 0.05,
  maxLatencyRatio: 1.5,
};
const TICK_MS = 10_000;

afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.close()));
  await prefixes.cleanup();
});

afterAll(async () => {
  await closeRedis(redis);
  await closeRedis(second);
});

function newPrefix(): string {
  return prefixes.take('canary');
}

interface Traffic {
  ok: number;
  /** Final failures the version causes (inference_failed). */
  fail?: number;
  /** Failures that are the caller's fault (invalid_input). */
  invalid?: number;
  /** Reported as the job's inferMs (queueMs 0), plus 0–9 ms of spread. */
  latencyMs?: number;
}

type Kind = 'ok' | 'fail' | 'invalid';

/** Runs the traffic through a real Queue and Worker on the version's queue, until every job has finished. */
async function serve(prefix: string, version: string, traffic: Traffic): Promise<void> {
  const name = queueName(MODEL, version);
  // Its own client (a Cluster client on a cluster URL); Worker and Queue share it, and it closes last.
  const connection = createRedis(testServices().redisUrl);
  const queue = new Queue<{ kind: Kind; spread: number }>(name, {
    connection,
    prefix,
    streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } },
  });
  const kinds: Kind[] = [
    ...Array<Kind>(traffic.ok).fill('ok'),
    ...Array<Kind>(traffic.fail ?? 0).fill('fail'),
    ...Array<Kind>(traffic.invalid ?? 0).fill('invalid'),
  ];
  let finished = 0;
  let allFinished = () => {};
  const done = new Promise<void>((resolve) => {
    allFinished = resolve;
  });
  const worker = new Worker<{ kind: Kind; spread: number }, JobResult>(
    name,
    async (job) => {
      if (job.data.kind === 'invalid') throw new UnrecoverableError('invalid_input: input "features" has shape [1, 3], expected [n, 64]');
      if (job.data.kind === 'fail') throw new UnrecoverableError('inference_failed: the forward pass failed for this job');
      return { outputs: [], timings: { queueMs: 0, inferMs: (traffic.latencyMs ?? 20) + job.data.spread, batchRows: 1 }, workerId: 'test' };
    },
    { connection, prefix, concurrency: 50 },
  );
  const onFinished = () => {
    if (++finished === kinds.length) allFinished();
  };
  worker.on('completed', onFinished);
  worker.on('failed', onFinished);
  try {
    await queue.addBulk(kinds.map((kind, i) => ({ name: 'infer', data: { kind, spread: i % 10 } })));
    if (kinds.length > 0) await done;
  } finally {
    await worker.close();
    await queue.close();
    await closeRedis(connection);
  }
}

/**
 * Runs queue entries through a real Queue and the miniature entry intake on the version's queue,
 * after canceling the members `cancel` names while their entry is queued; resolves once every
 * entry has finished, with the entries in the order given.
 */
async function serveEntries(
  prefix: string,
  version: string,
  entries: ReadonlyArray<{ data: TestEntryData; cancel?: string[] }>,
): Promise<AddedEntry[]> {
  const name = queueName(MODEL, version);
  const connection = createRedis(testServices().redisUrl);
  const queue = new Queue<TestEntryData>(name, { connection, prefix, streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } } });
  const worker = startEntryWorker({ redis: connection, prefix, model: MODEL, version, run: knobbedRun, concurrency: 8 });
  let finished = 0;
  let allFinished = () => {};
  const done = new Promise<void>((resolve) => {
    allFinished = resolve;
  });
  const onFinished = () => {
    if (++finished === entries.length) allFinished();
  };
  worker.on('completed', onFinished);
  worker.on('failed', onFinished);
  try {
    const added: AddedEntry[] = [];
    for (const { data, cancel } of entries) {
      const entry = await addEntry(connection, prefix, queue, data, { held: true });
      for (const id of cancel ?? []) expect(await cancelQueuedMember(connection, prefix, name, entry, id)).not.toBeNull();
      added.push(entry);
    }
    await Promise.all(added.map((e) => e.release()));
    if (entries.length > 0) await done;
    return added;
  } finally {
    await worker.close();
    await queue.close();
    await closeRedis(connection);
  }
}

/** `n` member ids. */
function memberIds(n: number): string[] {
  return Array.from({ length: n }, () => uniqueId('job'));
}

async function deploy(prefix: string, stableWeight: number): Promise<DeploymentStore> {
  const store = createDeploymentStore(redis, prefix);
  await store.put({ model: MODEL, min: 1, max: 2, standby: 0, version: '1' });
  await store.put({
    model: MODEL,
    min: 1,
    max: 2,
    standby: 0,
    versions: [
      { version: '1', weight: stableWeight },
      { version: '2', weight: 100 - stableWeight },
    ],
  });
  return store;
}

function newGuard(prefix: string, clock: ManualClock, client = redis): CanaryGuard {
  const guard = createCanaryGuard({
    redis: client,
    prefix,
    deployments: createDeploymentStore(client, prefix),
    clock,
    log: silentLog,
    policy,
    tickMs: TICK_MS,
  });
  guards.push(guard);
  return guard;
}

function routes(prefix: string, clock: ManualClock): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.onError(errorHandler(undefined));
  app.notFound(notFoundHandler);
  app.route('/', canaryRoutes({ redis, prefix, policy, tickMs: TICK_MS, clock }));
  return app;
}

async function canaryStatus(prefix: string, clock: ManualClock): Promise<CanaryStatus> {
  const res = await routes(prefix, clock).request(`/v1/deployments/${MODEL}/canary`);
  expect(res.status).toBe(200);
  return (await res.json()) as CanaryStatus;
}

async function weights(store: DeploymentStore): Promise<Record<string, number>> {
  const d = await store.get(MODEL);
  return Object.fromEntries((d?.versions ?? []).map((v) => [v.version, v.weight]));
}

/** Ticks every TICK_MS from now through `untilMs` later, returning the weights after each tick. */
async function tickThrough(guards: CanaryGuard[], clock: ManualClock, store: DeploymentStore, untilMs: number) {
  const seen: Array<Record<string, number>> = [];
  for (let t = 0; t <= untilMs; t += TICK_MS) {
    if (t > 0) await clock.advance(TICK_MS);
    await Promise.all(guards.map((g) => g.tick()));
    seen.push(await weights(store));
  }
  return seen;
}

describe('outcomes from the version queues', () => {
  it('counts successes with their timings and final failures; invalid_input counts for nothing', async () => {
    const prefix = newPrefix();
    await serve(prefix, '1', { ok: 60, fail: 20, invalid: 25, latencyMs: 20 });
    const now = Date.now();
    const outcomes = createOutcomeStore({ redis, prefix, windowMs: 120_000 });
    expect(await outcomes.ingest(MODEL, '1', now)).toBeGreaterThanOrEqual(105); // plus added/active/… entries
    const w = await outcomes.window(MODEL, '1', now);
    expect(w).toMatchObject({ requests: 80, failures: 20, errorRate: 0.25, latencySamples: 60 });
    // Reported latencies are 20–29 ms: the estimates stay in the buckets around them.
    expect(w.p50Ms).toBeGreaterThan(15);
    expect(w.p95Ms).toBeLessThanOrEqual(30);
    expect(await outcomes.ingest(MODEL, '1', now)).toBe(0);
  });

  it('counts each entry once with two readers at once, and a new reader goes on from the shared cursor', async () => {
    const prefix = newPrefix();
    await serve(prefix, '1', { ok: 300 });
    const now = Date.now();
    const a = createOutcomeStore({ redis, prefix, windowMs: 120_000, batchSize: 50 });
    const b = createOutcomeStore({ redis: second, prefix, windowMs: 120_000, batchSize: 50 });
    await Promise.all([a.ingest(MODEL, '1', now), b.ingest(MODEL, '1', now), a.ingest(MODEL, '1', now)]);
    // A reader that lost a race stops for this call; the next call finishes the stream.
    await Promise.all([a.ingest(MODEL, '1', now), b.ingest(MODEL, '1', now)]);
    await a.ingest(MODEL, '1', now);
    expect((await a.window(MODEL, '1', now)).requests).toBe(300);

    await serve(prefix, '1', { ok: 40 });
    const restarted = createOutcomeStore({ redis, prefix, windowMs: 120_000 });
    await restarted.ingest(MODEL, '1', Date.now());
    expect((await restarted.window(MODEL, '1', Date.now())).requests).toBe(340);
  });

  it("counts each request of a shared entry: its own success, latency and failure; none for the caller's or a canceled one", async () => {
    const prefix = newPrefix();
    const ran = memberIds(5);
    const mixed = memberIds(3);
    const failed = memberIds(4);
    const refused = memberIds(2);
    const gone = memberIds(3);
    const entry = (ids: string[], knobs: TestEntryData['knobs'] = {}) =>
      testEntry({ model: MODEL, version: '1', members: ids.map((id) => ({ id })), knobs });
    const error = (code: string) => ({ code, message: `${code} for this request alone` });
    const served = await serveEntries(prefix, '1', [
      // 3 successes, 1 failure of the model's, 1 of the caller's.
      { data: entry(ran, { errors: { [ran[3] as string]: error('inference_failed'), [ran[4] as string]: error('invalid_input') } }) },
      // 1 success; a passed deadline and a cancel are the caller's.
      { data: entry(mixed, { errors: { [mixed[1] as string]: error('deadline_exceeded') } }), cancel: [mixed[2] as string] },
      // Failed for good: one failure per request it still carried (3 of 4).
      { data: entry(failed, { fail: 'inference_failed: the forward pass failed' }), cancel: [failed[0] as string] },
      // Failed for good, by the caller's input: nothing.
      { data: entry(refused, { fail: 'invalid_input: rows do not match' }) },
      // Failed for good, then removed before any guard read it: its members are unknown, so one failure.
      { data: entry(gone, { fail: 'worker_crashed: its workers died' }) },
    ]);
    const removed = served[4] as AddedEntry;
    const queue = new Queue(queueName(MODEL, '1'), { connection: redis, prefix, skipMetasUpdate: true });
    await queue.remove(removed.id);
    await queue.close();

    const now = Date.now();
    const a = createOutcomeStore({ redis, prefix, windowMs: 120_000, batchSize: 5 });
    const b = createOutcomeStore({ redis: second, prefix, windowMs: 120_000, batchSize: 5 });
    await Promise.all([a.ingest(MODEL, '1', now), b.ingest(MODEL, '1', now)]);
    await a.ingest(MODEL, '1', now);
    const w = await a.window(MODEL, '1', now);
    expect(w).toMatchObject({ requests: 4 + 1 + 3 + 0 + 1, failures: 1 + 0 + 3 + 0 + 1, latencySamples: 3 + 1 });
  });

  it('leaves outcomes older than the window out', async () => {
    const prefix = newPrefix();
    await serve(prefix, '1', { ok: 30 });
    const later = Date.now() + 130_000;
    const outcomes = createOutcomeStore({ redis, prefix, windowMs: 120_000 });
    await outcomes.ingest(MODEL, '1', later);
    expect((await outcomes.window(MODEL, '1', later)).requests).toBe(0);
    expect((await outcomes.window(MODEL, '1', Date.now())).requests).toBe(0);
  });
});

describe('canary guard', () => {
  it('rolls a canary failing 30 % beside a stable 0 % back to 0 after the sustain period, and not before', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 90);
    await serve(prefix, '1', { ok: 200 });
    await serve(prefix, '2', { ok: 70, fail: 30 });
    const clock = new ManualClock(Date.now());
    const guard = newGuard(prefix, clock);

    const before = await tickThrough([guard], clock, store, 50_000);
    expect(before.every((w) => w['1'] === 90 && w['2'] === 10)).toBe(true);
    const during = await canaryStatus(prefix, clock);
    expect(during.current?.stable).toMatchObject({ version: '1', weight: 90, window: { requests: 200, errorRate: 0 } });
    expect(during.current?.canaries).toEqual([
      expect.objectContaining({
        version: '2',
        weight: 10,
        window: expect.objectContaining({ requests: 100, errorRate: 0.3 }),
        verdict: expect.objectContaining({ state: 'failing', rollback: false }),
      }),
    ]);
    expect(during.events).toEqual([]);

    await clock.advance(TICK_MS);
    await guard.tick();
    expect(await weights(store)).toEqual({ '1': 100, '2': 0 });
    const [latest, previous] = await store.history(MODEL);
    expect(latest?.versions).toEqual([
      { version: '1', weight: 100 },
      { version: '2', weight: 0 },
    ]);
    expect(previous?.versions).toEqual([
      { version: '1', weight: 90 },
      { version: '2', weight: 10 },
    ]);

    const after = await canaryStatus(prefix, clock);
    expect(after.current).toBeUndefined(); // no split any more
    expect(after.events).toEqual([
      expect.objectContaining({
        model: MODEL,
        version: '2',
        action: 'rollback',
        at: new Date(clock.now()).toISOString(),
        revision: latest?.revision,
        reason: expect.stringMatching(/error rate 30.0% vs stable 0.0%.*sustained 60 s/),
        stable: expect.objectContaining({ version: '1', weight: 90 }),
        canary: expect.objectContaining({ version: '2', weight: 10, window: expect.objectContaining({ failures: 30 }) }),
      }),
    ]);
  });

  it('rolls back a canary whose p95 latency is far above the stable one', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 80);
    await serve(prefix, '1', { ok: 100, latencyMs: 20 });
    await serve(prefix, '2', { ok: 100, latencyMs: 90 });
    const clock = new ManualClock(Date.now());
    const seen = await tickThrough([newGuard(prefix, clock)], clock, store, 60_000);
    expect(seen.at(-2)).toEqual({ '1': 80, '2': 20 });
    expect(seen.at(-1)).toEqual({ '1': 100, '2': 0 });
    const { events } = await canaryStatus(prefix, clock);
    expect(events[0]?.reason).toMatch(/p95 latency/);
  });

  it('lets a healthy canary keep its share', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 90);
    await serve(prefix, '1', { ok: 198, fail: 2 });
    await serve(prefix, '2', { ok: 97, fail: 3 });
    const clock = new ManualClock(Date.now());
    const seen = await tickThrough([newGuard(prefix, clock)], clock, store, 100_000);
    expect(seen.every((w) => w['1'] === 90 && w['2'] === 10)).toBe(true);
    const status = await canaryStatus(prefix, clock);
    expect(status.current?.canaries[0]?.verdict).toEqual({ state: 'healthy' });
    expect(status.events).toEqual([]);
    expect(await store.history(MODEL)).toHaveLength(2);
  });

  it('does not hold invalid_input failures against a canary', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 90);
    await serve(prefix, '1', { ok: 200 });
    await serve(prefix, '2', { ok: 100, invalid: 60 });
    const clock = new ManualClock(Date.now());
    const seen = await tickThrough([newGuard(prefix, clock)], clock, store, 100_000);
    expect(seen.every((w) => w['2'] === 10)).toBe(true);
    const canary = (await canaryStatus(prefix, clock)).current?.canaries[0];
    expect(canary?.window).toMatchObject({ requests: 100, failures: 0, errorRate: 0 });
    expect(canary?.verdict).toEqual({ state: 'healthy' });
  });

  it('never rolls back on insufficient data, however bad it looks', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 95);
    await serve(prefix, '1', { ok: 200 });
    await serve(prefix, '2', { ok: 10, fail: 30 });
    const clock = new ManualClock(Date.now());
    const seen = await tickThrough([newGuard(prefix, clock)], clock, store, 100_000);
    expect(seen.every((w) => w['2'] === 5)).toBe(true);
    expect((await canaryStatus(prefix, clock)).current?.canaries[0]?.verdict).toMatchObject({ state: 'insufficient_data' });
  });

  it('with two guards ticking together, writes one rollback revision and one event, counting each outcome once', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 90);
    await serve(prefix, '1', { ok: 200 });
    await serve(prefix, '2', { ok: 70, fail: 30 });
    const clock = new ManualClock(Date.now());
    const seen = await tickThrough([newGuard(prefix, clock), newGuard(prefix, clock, second)], clock, store, 70_000);
    expect(seen.at(-1)).toEqual({ '1': 100, '2': 0 });
    const history = await store.history(MODEL);
    expect(history.map((r) => r.versions.find((v) => v.version === '2')?.weight)).toEqual([0, 10, undefined]);
    const { events } = await canaryStatus(prefix, clock);
    expect(events).toHaveLength(1);
    expect(events[0]?.canary.window).toMatchObject({ requests: 100, failures: 30 });
    expect(events[0]?.stable.window).toMatchObject({ requests: 200 });
  });

  it('runs ticks on its clock once started, and closes idempotently', async () => {
    const prefix = newPrefix();
    const store = await deploy(prefix, 90);
    await serve(prefix, '1', { ok: 200 });
    await serve(prefix, '2', { ok: 70, fail: 30 });
    const clock = new ManualClock(Date.now());
    const guard = newGuard(prefix, clock);
    guard.start();
    for (let t = 0; t <= 60_000; t += TICK_MS) {
      await vi.waitFor(() => expect(clock.pending).toBe(1)); // the tick is done and the loop sleeps
      if (t < 60_000) await clock.advance(TICK_MS);
    }
    expect(await weights(store)).toEqual({ '1': 100, '2': 0 });
    await Promise.all([guard.close(), guard.close()]);
    expect(clock.pending).toBe(0);
  });
});

describe('GET /v1/deployments/{model}/canary', () => {
  it('is 404 for a model neither deployed nor with canary events, and shows no current without a split', async () => {
    const prefix = newPrefix();
    const clock = new ManualClock(Date.now());
    const missing = await routes(prefix, clock).request('/v1/deployments/nope/canary');
    expect(missing.status).toBe(404);
    expect(await missing.json()).toEqual({ error: { code: 'deployment_not_found', message: 'model nope is not deployed' } });
    expect((await routes(prefix, clock).request('/v1/deployments/..%2F/canary')).status).toBe(404);

    await createDeploymentStore(redis, prefix).put({ model: MODEL, min: 1, max: 1, standby: 0, version: '1' });
    expect(await canaryStatus(prefix, clock)).toEqual({ model: MODEL, events: [] });
  });
});
