/**
 * Coalesced queue entries (issue 15) at the queue tier: the real job queue (createBullJobQueue)
 * on the test Redis, its entries run by a plain BullMQ Worker doing what the worker does with an
 * entry (test/support/entry-worker.ts). Concurrent requests share entries — fewer BullMQ jobs
 * than requests, in the writer's callback, the API's metrics and Redis itself — and every
 * request inside a shared entry keeps what a job has: its own outputs, cancel, deadline,
 * failure, status changes, tenant isolation and idempotent replay.
 *
 * "Concurrent" here means enqueued in the same tick (Promise.all), which is what many requests
 * arriving while a write is in flight look like to the writer; nothing is timed.
 */
import { Queue, UnrecoverableError, type Worker } from 'bullmq';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createIdempotencyStore } from '../api/http/idempotency.ts';
import { submitJob } from '../api/use-cases/submit-job.ts';
import type { EntryData, EntryResult, QueuedRequest } from '../infra/contracts/entry.ts';
import { type JobStatus, type JobView, PRIORITIES, type Priority, queueName } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Datatype } from '../infra/contracts/oip.ts';
import type { TensorToPack } from '../infra/contracts/packed-tensors.ts';
import { ManualClock, systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { type BullJobQueue, createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { entryInputsKey, entrySkipKey } from '../infra/redis/keys.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { locateMember, memberEntry } from './support/entries.ts';
import { type MemberFn, type MemberRun, startEntryWorker } from './support/entry-worker.ts';
import { testEnv, testServices, uniqueId } from './support/services.ts';
import { KEY_A, KEY_B } from './support/stack.ts';
import { until } from './support/until.ts';

type Written = { queue: string; members: number; bytes: number };

let redis: RedisClient;
let prefix: string;
let jobs: BullJobQueue;
const written: Written[] = [];
const workers: Worker[] = [];
const closers: Array<() => Promise<unknown>> = [];

beforeAll(() => {
  redis = createRedis(testServices().redisUrl);
  prefix = uniqueId('coalesce');
  jobs = openQueue();
});

afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.close()));
});

afterAll(async () => {
  for (const close of closers.splice(0).reverse()) await close();
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

/** A job queue (an API process) on this file's prefix, recording the entries it writes; closed after all. */
function openQueue(options: { clock?: ManualClock; coalesceMaxRequests?: number; log?: Written[] } = {}): BullJobQueue {
  const log = options.log ?? written;
  const queue = createBullJobQueue({
    connection: testServices().redisUrl,
    prefix,
    retentionS: 600,
    attempts: 1,
    onEntryWritten: (e) => log.push(e),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.coalesceMaxRequests !== undefined ? { coalesceMaxRequests: options.coalesceMaxRequests } : {}),
  });
  closers.push(() => queue.close());
  return queue;
}

// Each test its own model, so its own queue.
let n = 0;
const nextModel = () => `co${n++}`;

/** A request of `rows` rows of `features` (2 values a row unless `width` says otherwise), the first row's values led by `lead`. */
function request(model: string, lead: number, extra: Partial<QueuedRequest> & { rows?: number; width?: number; datatype?: Datatype } = {}) {
  const { rows = 1, width = 2, datatype = 'FP32', ...rest } = extra;
  const values = Array.from({ length: rows * width }, (_, i) => (i === 0 ? lead : i));
  const data = datatype === 'FP64' ? Float64Array.from(values) : Float32Array.from(values);
  const r: QueuedRequest = {
    tenant: 'tenant-a',
    model,
    version: '1',
    rows,
    inputs: [{ name: 'features', datatype, shape: [rows, width], data }],
    submittedAt: Date.now(),
    ...rest,
  };
  return r;
}

/** Every request enqueued in the same tick; resolves once all are in BullMQ. */
function enqueueAll(queue: BullJobQueue, requests: ReadonlyArray<{ id: string; request: QueuedRequest; priority?: Priority }>) {
  return Promise.all(requests.map(({ id, request: r, priority = 'normal' }) => queue.enqueue(r, { priority, jobId: id })));
}

/** The stand-in model: each row's score is the sum of its features. Records every member it runs. */
function sums(ran: string[] = []): MemberFn {
  return ({ member, inputs }: MemberRun): TensorToPack[] => {
    ran.push(member.id);
    const input = inputs[0] as TensorToPack;
    const width = input.shape[1] ?? 1;
    const values = input.data as ArrayLike<number>;
    const scores = Float32Array.from({ length: member.rows }, (_, r) => {
      let total = 0;
      for (let k = 0; k < width; k++) total += values[r * width + k] as number;
      return total;
    });
    return [{ name: 'score', datatype: 'FP32', shape: [member.rows, 1], data: scores }];
  };
}

/** What `sums` answers for `request(model, lead, {rows, width})`, as the API shows it. */
function expectedScores(lead: number, rows = 1, width = 2): number[] {
  return Array.from({ length: rows }, (_, r) => {
    let total = 0;
    for (let k = 0; k < width; k++) total += r === 0 && k === 0 ? lead : r * width + k;
    return total;
  });
}

function startWorker(model: string, run: MemberFn, workerPrefix = prefix): Worker {
  const worker = startEntryWorker({ redis, prefix: workerPrefix, model, run, workerId: 'w-co' });
  workers.push(worker);
  return worker;
}

/** The BullMQ jobs (queue entries) of a model's queue, in any state: entry id → its members' ids. */
async function entriesInRedis(model: string, on = prefix): Promise<Map<string, string[]>> {
  const queue = new Queue<EntryData, EntryResult>(queueName(model, '1'), { connection: redis, prefix: on });
  try {
    const held = await queue.getJobs(['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed']);
    return new Map(held.map((job) => [job.id as string, job.data.members.map((m) => m.id)]));
  } finally {
    await queue.close();
  }
}

/** The entry carrying each request, by the index. */
async function entryIds(ids: readonly string[], on = prefix): Promise<string[]> {
  return Promise.all(ids.map(async (id) => (await locateMember(redis, on, id))?.entryId ?? `none for ${id}`));
}

const ids = (tag: string, count: number) => Array.from({ length: count }, (_, i) => `job_${tag}${i}`);

describe('requests share queue entries', () => {
  it('50 single-row requests enqueued in the same tick: fewer entries than requests, in the callback and in Redis; each still gets its own outputs', async () => {
    const model = nextModel();
    const queue = queueName(model, '1');
    const batch = ids('many', 50).map((id, i) => ({ id, request: request(model, 100 + i) }));
    await enqueueAll(jobs, batch);

    const mine = written.filter((e) => e.queue === queue);
    expect(mine.reduce((total, e) => total + e.members, 0)).toBe(50);
    expect(mine.length).toBeLessThan(50);
    // Redis holds one BullMQ job per entry written, and the index points each request at the one carrying it.
    const entries = await entriesInRedis(model);
    expect(entries.size).toBe(mine.length);
    expect([...entries.values()].flat().sort()).toEqual(batch.map((b) => b.id).sort());
    const located = await entryIds(batch.map((b) => b.id));
    for (const [i, b] of batch.entries()) expect(entries.get(located[i] as string)).toContain(b.id);

    const ran: string[] = [];
    const ranIn = new Set<string>();
    const run = sums(ran);
    startWorker(model, (call) => {
      ranIn.add(call.entryId);
      return run(call);
    });
    const done = await Promise.all(batch.map((b) => jobs.waitFor(b.id, 30_000)));
    done.forEach((view, i) => {
      expect(view).toMatchObject({ id: batch[i]?.id, status: 'succeeded', tenant: 'tenant-a' });
      expect(view.result?.outputs).toEqual([{ name: 'score', datatype: 'FP32', shape: [1, 1], data: expectedScores(100 + i) }]);
    });
    expect(ran.sort()).toEqual(batch.map((b) => b.id).sort());
    // The worker took each entry once: its work, too, is per entry.
    expect([...ranIn].sort()).toEqual([...entries.keys()].sort());
  });

  it('an entry carries at most COALESCE_MAX_REQUESTS requests; 1 turns coalescing off', async () => {
    for (const max of [8, 1]) {
      const model = nextModel();
      const log: Written[] = [];
      const bounded = openQueue({ coalesceMaxRequests: max, log });
      await enqueueAll(
        bounded,
        ids(`max${max}_`, 50).map((id, i) => ({ id, request: request(model, i) })),
      );
      expect(log.reduce((total, e) => total + e.members, 0)).toBe(50);
      expect(Math.max(...log.map((e) => e.members))).toBeLessThanOrEqual(max);
      expect(log.length).toBeGreaterThanOrEqual(Math.ceil(50 / max));
      expect((await entriesInRedis(model)).size).toBe(log.length);
    }
  });

  it('a lone request waits for nothing: its own entry, written with no other request and a clock that never moves', async () => {
    const model = nextModel();
    const log: Written[] = [];
    const clock = new ManualClock(Date.now());
    const alone = openQueue({ clock, log });
    await alone.enqueue(request(model, 1), { priority: 'normal', jobId: 'job_alone' });
    expect(log).toEqual([{ queue: queueName(model, '1'), members: 1, bytes: 8 }]);
    expect([...(await entriesInRedis(model)).values()]).toEqual([['job_alone']]);
    expect(clock.pending).toBe(0);
    expect(await alone.get('job_alone')).toMatchObject({ status: 'queued' });
  });

  it('never puts different tenants, priorities, input shapes, datatypes or requested outputs in one entry; row counts may differ', async () => {
    const model = nextModel();
    const batch = [
      { id: 'job_g_a1', request: request(model, 1) },
      { id: 'job_g_a3rows', request: request(model, 2, { rows: 3 }) },
      { id: 'job_g_b', request: request(model, 3, { tenant: 'tenant-b' }) },
      { id: 'job_g_high', request: request(model, 4), priority: 'high' as const },
      { id: 'job_g_wide', request: request(model, 5, { width: 3 }) },
      { id: 'job_g_f64', request: request(model, 6, { datatype: 'FP64' }) },
      { id: 'job_g_out', request: request(model, 7, { outputs: [{ name: 'score' }] }) },
    ];
    await enqueueAll(jobs, batch);
    const groups = [...(await entriesInRedis(model)).values()].map((members) => members.sort().join(' ')).sort();
    expect(groups).toEqual(['job_g_a1 job_g_a3rows', 'job_g_b', 'job_g_f64', 'job_g_high', 'job_g_out', 'job_g_wide']);
    const high = await memberEntry(redis, prefix, 'job_g_high');
    expect(high?.entry.opts.priority).toBe(PRIORITIES.high);
    expect((await memberEntry(redis, prefix, 'job_g_b'))?.entry.data.tenant).toBe('tenant-b');

    // Each gets its own rows back, the 3-row request beside a 1-row one in its entry included.
    startWorker(model, sums());
    for (const b of batch) {
      const view = await jobs.waitFor(b.id, 30_000);
      const rows = b.request.rows;
      const width = b.request.inputs[0]?.shape[1];
      const lead = (b.request.inputs[0] as TensorToPack).data[0] as number;
      expect(view).toMatchObject({ status: 'succeeded', tenant: b.request.tenant });
      expect(view.result?.outputs).toEqual([
        { name: 'score', datatype: 'FP32', shape: [rows, 1], data: expectedScores(lead, rows, width) },
      ]);
    }
  });
});

describe('a request inside a shared entry', () => {
  it('canceled, is skipped and never run; the other four succeed; a waiter in another process sees the cancel', async () => {
    const model = nextModel();
    const five = ids('c1of5_', 5);
    await enqueueAll(
      jobs,
      five.map((id, i) => ({ id, request: request(model, 10 * i) })),
    );
    const [entryId] = new Set(await entryIds(five));
    expect(await entryIds(five)).toEqual(five.map(() => entryId));
    const victim = five[1] as string;

    const other = openQueue({ log: [] });
    const waiting = other.waitFor(victim, 30_000);
    while (other.waiting() === 0) await new Promise((r) => setTimeout(r, 5));
    const canceled = await jobs.cancel(victim);
    expect(canceled).toMatchObject({ id: victim, tenant: 'tenant-a', model, status: 'canceled', error: { code: 'canceled' } });
    expect(await waiting).toEqual(canceled);
    expect(await jobs.get(victim)).toEqual(canceled);
    expect(await jobs.cancel(victim)).toEqual(canceled);
    for (const id of five.filter((id) => id !== victim)) expect((await jobs.get(id))?.status).toBe('queued');
    // The entry is still queued, with the victim in its skip set.
    expect(await redis.smembers(entrySkipKey(prefix, queueName(model, '1'), entryId as string))).toEqual([victim]);
    expect([...(await entriesInRedis(model)).keys()]).toEqual([entryId]);

    const ran: string[] = [];
    startWorker(model, sums(ran));
    for (const [i, id] of five.entries()) {
      if (id === victim) continue;
      const view = await jobs.waitFor(id, 30_000);
      expect(view).toMatchObject({ status: 'succeeded' });
      expect(view.result?.outputs[0]?.data).toEqual(expectedScores(10 * i));
    }
    expect(ran.sort()).toEqual(five.filter((id) => id !== victim).sort());
    expect(await jobs.get(victim)).toEqual(canceled);
  });

  it("each cancel inside a shared entry reaches another process's watcher, which has no timeout to fall back on", async () => {
    // The member-ended event once followed the index only by luck: a watcher woken before the
    // index pointed at the tombstone found the member queued and waited on (about 1 in 10 here).
    const model = nextModel();
    const other = openQueue({ log: [] });
    for (let round = 0; round < 20; round++) {
      const three = ids(`race${round}_`, 3);
      await enqueueAll(
        jobs,
        three.map((id, i) => ({ id, request: request(model, i) })),
      );
      const seen: JobStatus[] = [];
      const watching = other.watch(three[1] as string, (view) => void seen.push(view.status));
      while (other.waiting() === 0) await new Promise((r) => setTimeout(r, 1));
      expect((await jobs.cancel(three[1] as string))?.status).toBe('canceled');
      await watching;
      expect(seen).toEqual(['queued', 'canceled']);
    }
  });

  it('canceling every member takes the entry out of the queue; no worker ever gets it', async () => {
    const model = nextModel();
    const three = ids('call', 3);
    await enqueueAll(
      jobs,
      three.map((id, i) => ({ id, request: request(model, i) })),
    );
    const [entryId] = await entryIds(three);
    for (const id of three) expect((await jobs.cancel(id))?.status).toBe('canceled');
    expect((await entriesInRedis(model)).size).toBe(0);
    expect(await jobs.depth(model, '1')).toBe(0);
    expect(await redis.exists(entryInputsKey(prefix, queueName(model, '1'), entryId as string))).toBe(0);

    const ran: string[] = [];
    startWorker(model, sums(ran));
    await jobs.enqueue(request(model, 9), { priority: 'normal', jobId: 'job_call_next' });
    expect((await jobs.waitFor('job_call_next', 30_000)).status).toBe('succeeded');
    expect(ran).toEqual(['job_call_next']);
    for (const id of three) expect((await jobs.get(id))?.status).toBe('canceled');
  });

  it('past its deadline while queued, fails alone with deadline_exceeded (its waiter woken with no worker); the others run', async () => {
    const model = nextModel();
    const clock = new ManualClock(Date.now());
    const timed = openQueue({ clock, log: [] });
    const three = ids('dl', 3);
    await enqueueAll(timed, [
      { id: three[0] as string, request: request(model, 1, { submittedAt: clock.now(), timeoutMs: 1000 }) },
      { id: three[1] as string, request: request(model, 2, { submittedAt: clock.now(), timeoutMs: 600_000 }) },
      { id: three[2] as string, request: request(model, 3, { submittedAt: clock.now() }) },
    ]);
    expect(new Set(await entryIds(three)).size).toBe(1);

    const waiting = timed.waitFor(three[0] as string, 600_000);
    // Two sleepers: the wait's own timeout and the member's deadline.
    while (clock.pending < 2) await new Promise((r) => setTimeout(r, 5));
    await clock.advance(1001);
    const expired = await waiting;
    expect(expired).toMatchObject({ id: three[0], status: 'failed', error: { code: 'deadline_exceeded' } });
    expect(expired.error?.message).toMatch(/deadline was 1000 ms/);
    expect((await timed.get(three[1] as string))?.status).toBe('queued');
    expect((await timed.get(three[2] as string))?.status).toBe('queued');

    const ran: string[] = [];
    startWorker(model, sums(ran));
    expect((await timed.waitFor(three[1] as string, 30_000)).status).toBe('succeeded');
    expect((await timed.waitFor(three[2] as string, 30_000)).status).toBe('succeeded');
    expect(ran.sort()).toEqual([three[1], three[2]].sort());
    expect(await jobs.get(three[0] as string)).toEqual(expired);
  });

  it('rejected by the model, fails alone with its own error; the rest of the entry succeeds', async () => {
    const model = nextModel();
    const five = ids('bad', 5);
    await enqueueAll(
      jobs,
      five.map((id, i) => ({ id, request: request(model, i === 3 ? -1 : i) })),
    );
    expect(new Set(await entryIds(five)).size).toBe(1);
    const run = sums();
    startWorker(model, (call) => {
      if ((call.inputs[0] as TensorToPack).data[0] === -1) {
        throw new UnrecoverableError('invalid_input: input "features": row 0 holds a negative value');
      }
      return run(call);
    });
    const views = await Promise.all(five.map((id) => jobs.waitFor(id, 30_000)));
    expect(views[3]).toMatchObject({
      status: 'failed',
      error: { code: 'invalid_input', message: 'input "features": row 0 holds a negative value' },
    });
    expect(views[3]?.result).toBeUndefined();
    views.forEach((view, i) => {
      if (i === 3) return;
      expect(view).toMatchObject({ status: 'succeeded', result: { outputs: [{ data: expectedScores(i) }] } });
    });
  });

  it('is seen queued, then running, then succeeded by watch and waitFor', async () => {
    const model = nextModel();
    const three = ids('watch', 3);
    await enqueueAll(
      jobs,
      three.map((id, i) => ({ id, request: request(model, i) })),
    );
    expect(new Set(await entryIds(three)).size).toBe(1);
    const seen: JobStatus[] = [];
    const signals = new Map<JobStatus, () => void>();
    const saw = (status: JobStatus) => new Promise<void>((resolve) => signals.set(status, resolve));
    const [sawQueued, sawRunning] = [saw('queued'), saw('running')];
    const watching = jobs.watch(three[0] as string, (view: JobView) => {
      seen.push(view.status);
      signals.get(view.status)?.();
    });
    const waited = jobs.waitFor(three[1] as string, 30_000);
    await sawQueued; // only then a worker, so the first report is deterministic

    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const run = sums();
    startWorker(model, async (call) => {
      await gate;
      return run(call);
    });
    await sawRunning;
    expect((await jobs.get(three[2] as string))?.status).toBe('running');
    release();
    await watching;
    expect(seen).toEqual(['queued', 'running', 'succeeded']);
    expect(await waited).toMatchObject({ status: 'succeeded', result: { outputs: [{ data: expectedScores(1) }] } });
    expect(jobs.waiting()).toBe(0);
  });

  it('replays the same job for the same Idempotency-Key', async () => {
    const model = nextModel();
    const log: Written[] = [];
    const queue = openQueue({ log });
    const manifest: ModelManifest = {
      name: model,
      version: '1',
      format: 'onnx',
      sha256: 'a'.repeat(64),
      sizeBytes: 100,
      inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, 2] }],
      outputs: [{ name: 'score', datatype: 'FP32', shape: [-1, 1] }],
      batching: { maxBatch: 8, warmupBatches: [1] },
      createdAt: '2024-01-01T00:00:00.000Z',
      labels: {},
    };
    let next = 0;
    const deps = {
      jobs: arriveTogether(queue, 5),
      catalog: { getManifest: async () => manifest, list: async () => [], listVersions: async () => [] },
      deployments: { get: async () => ({ model, version: '1', versions: [{ version: '1', weight: 100 }] }) },
      clock: systemClock,
      newId: () => `job_idem${next++}`,
      idempotency: createIdempotencyStore(redis, { prefix, ttlS: 600 }),
      webhookAllowedPrivateHosts: [],
    };
    const body = (lead: number) => ({ inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 2], data: [lead, 1] }] });
    const submit = (lead: number, idempotencyKey?: string) =>
      submitJob(deps, { tenant: 'tenant-a', model, body: body(lead), kind: 'async', ...(idempotencyKey ? { idempotencyKey } : {}) });

    const five = await Promise.all([submit(0), submit(1), submit(2, 'order-7'), submit(3), submit(4)]);
    const keyed = five[2];
    expect(new Set(await entryIds(five.map((j) => j.id))).size).toBe(1);
    expect(log).toEqual([expect.objectContaining({ members: 5 })]);

    deps.jobs = queue; // the replay must not reach the queue at all
    const replay = await submit(2, 'order-7');
    expect(replay).toMatchObject({ id: keyed?.id, replayed: true, model, version: '1' });
    expect(log).toHaveLength(1);
    expect((await entriesInRedis(model)).size).toBe(1);

    startWorker(model, sums());
    expect(await queue.waitFor(keyed?.id as string, 30_000)).toMatchObject({
      status: 'succeeded',
      result: { outputs: [{ data: [3] }] },
    });
    expect(await submit(2, 'order-7')).toMatchObject({ id: keyed?.id, replayed: true });
  });
});

describe('through the API, with the real job queue', () => {
  let api: TestApi;
  let apiPrefix: string;

  beforeAll(async () => {
    const config = loadConfig(testEnv());
    apiPrefix = config.queuePrefix;
    api = await startTestApi(config);
    // The server waits for its own Redis client only; the job queue's fails fast until it connects.
    await until("the API's job queue to connect", () =>
      api.jobs.get('job_probe').then(
        () => true,
        () => undefined,
      ),
    );
  });

  afterAll(async () => {
    await api?.close();
    for await (const keys of scanKeys(redis, `${apiPrefix}:*`)) await deleteMany(redis, keys);
  });

  it("counts entries and the requests inside them in /metrics; another tenant's lookup of a member is a 404", async () => {
    const model = nextModel();
    const queue = queueName(model, '1');
    const five = ids('api', 5);
    await enqueueAll(
      api.jobs,
      five.map((id, i) => ({ id, request: request(model, i) })),
    );
    const metrics = await (await api.call('/metrics', { key: KEY_A })).text();
    expect(counter(metrics, 'warmpool_queue_entries_total', queue)).toBe(1);
    expect(counter(metrics, 'warmpool_queue_entry_jobs_total', queue)).toBe(5);
    expect((await entriesInRedis(model, apiPrefix)).size).toBe(1);

    const id = five[2] as string;
    for (const [path, method] of [
      [`/v1/jobs/${id}`, 'GET'],
      [`/v1/jobs/${id}/events`, 'GET'],
      [`/v1/jobs/${id}`, 'DELETE'],
    ] as const) {
      const res = await api.call(path, { method, key: KEY_B });
      expect([path, method, res.status]).toEqual([path, method, 404]);
      expect(((await res.json()) as { error: { code: string } }).error.code).toBe('job_not_found');
    }
    const own = await api.call(`/v1/jobs/${id}`, { key: KEY_A });
    expect(own.status).toBe(200);
    expect(await own.json()).toMatchObject({ id, status: 'queued' });

    startWorker(model, sums(), apiPrefix);
    expect(await api.jobs.waitFor(id, 30_000)).toMatchObject({ status: 'succeeded' });
    const done = await api.call(`/v1/jobs/${id}`, { key: KEY_A });
    expect(await done.json()).toMatchObject({ id, status: 'succeeded', outputs: [{ name: 'score', data: expectedScores(2) }] });
    expect((await api.call(`/v1/jobs/${id}`, { key: KEY_B })).status).toBe(404);
  });
});

/** A counter's value for one queue in Prometheus text; NaN when absent. */
function counter(text: string, name: string, queue: string): number {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && l.includes(`queue="${queue}"`));
  return line === undefined ? Number.NaN : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/**
 * The queue as submit sees it, holding each enqueue until `count` have arrived, then passing
 * them all on in one tick: concurrent requests reaching the writer together, as under load,
 * whatever the Redis round trips each made before (here: the Idempotency-Key's claim).
 */
function arriveTogether(queue: BullJobQueue, count: number): BullJobQueue {
  const held: Array<() => void> = [];
  return {
    ...queue,
    enqueue(r, options) {
      return new Promise<void>((resolve, reject) => {
        held.push(() => queue.enqueue(r, options).then(resolve, reject));
        if (held.length === count) for (const go of held.splice(0)) go();
      });
    },
  };
}
