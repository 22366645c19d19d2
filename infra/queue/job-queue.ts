/**
 * The API's job queue over BullMQ: one Queue per model version (named by job-contract.ts), a
 * small index key per job so `GET /v1/jobs/{id}` finds the queue from the id alone, and one
 * shared QueueEvents per queue for every waiter (sync requests, SSE streams).
 *
 * The index key `<prefix>:job:<id>` holds the queue's name while BullMQ holds the job, or a
 * tombstone (the job's final view as JSON) once the API has ended a queued job itself:
 *
 *   queued --cancel()-----------------------------------> canceled  (tombstone, code canceled)
 *   queued --seen past its deadline (get/waitFor/watch)--> failed    (tombstone, code deadline_exceeded)
 *   queued --a worker takes it--> running --> succeeded | failed     (BullMQ's own states)
 *   (submit) --answerFromCache() hits--------------------> succeeded (tombstone, cached: true; never in BullMQ)
 *
 * Deadline rule: a job with `timeoutMs` must *start* within that many ms of submit. Workers
 * refuse a job past it (worker/intake.ts); without a worker, the API expires it the moment
 * anyone looks (GET, SSE, waitFor, cancel). Until someone looks or a worker fetches it, an
 * overdue job still counts in depth(). Ending a queued job is one script that removes it from
 * BullMQ's wait/paused/prioritized/delayed sets and writes the tombstone, atomically with
 * respect to a worker's fetch (also a script): a job a worker already took is never touched.
 * The script writes the tombstone next to the queue's keys (`<prefix>:{queue}:tomb:<id>`, the
 * queue's hash slot on a Redis Cluster, where one script cannot also reach the index key);
 * the index key is then pointed at the same tombstone. Until it is (or if the API dies in
 * between) a reader that finds the job gone from the queue reads the tombstone there.
 *
 * A result-cache hit (infra/redis/result-cache.ts) is the same kind of record: the job's final view,
 * written at submit instead of a queue name, so every reader (GET, SSE, sync waits, cancel)
 * sees a finished job and no worker ever hears of it.
 *
 * Connections: one ioredis client shared by every Queue and the index keys (BullMQ does not
 * close a client it was handed); each QueueEvents opens a blocking connection of its own from
 * the client's options (minus any fail-fast settings), which it closes itself. `close()`
 * closes all of them, once.
 */
import { Job, Queue, QueueEvents, type ConnectionOptions, type JobState } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { systemClock, type Clock } from '../kernel/clock.ts';
import { NotFoundError } from '../kernel/errors.ts';
import {
  EVENTS_STREAM_MAX_LEN,
  PRIORITIES,
  queueName,
  type JobData,
  type JobResult,
  type JobStatus,
  type JobView,
  type Priority,
} from '../contracts/job.ts';
import { blockingOptions, closeRedis, createRedis, duplicateClient, isCluster, type RedisClient } from '../redis/client.ts';
import { createResultCache } from '../redis/result-cache.ts';
import { Wakeup } from '../kernel/wakeup.ts';

export type { JobView };

export interface BullJobQueueOptions {
  connection: RedisOptions | string;
  /**
   * Over the defaults of the shared (non-blocking) client, e.g. FAIL_FAST_REDIS_OPTIONS so
   * calls fail at once while Redis is down. QueueEvents' blocking connections never take them.
   */
  redisOptions?: RedisOptions;
  /** BullMQ key prefix (QUEUE_PREFIX); the job index keys live under it too. */
  prefix: string;
  /** How long finished jobs (and their index keys and tombstones) are kept. */
  retentionS: number;
  attempts: number;
  /** First retry delay; doubles each attempt. */
  backoffMs?: number;
  clock?: Clock;
  /** Connection errors of the Queues and QueueEvents (e.g. to log them); the calls that fail also reject. */
  onError?: (err: Error) => void;
}

export interface BullJobQueue {
  enqueue(data: JobData, options: { priority: Priority; jobId: string }): Promise<void>;
  /** null when no such job (or it has expired). Expires a queued job past its deadline. */
  get(jobId: string): Promise<JobView | null>;
  /** Resolves when the job is terminal, or with its current view when `timeoutMs` passes first. */
  waitFor(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<JobView>;
  /**
   * Calls `onChange` with the job's view now and at each change of status, until a terminal
   * one (then resolves) or the signal aborts (then rejects with its reason).
   */
  watch(jobId: string, onChange: (view: JobView) => void | Promise<void>, signal?: AbortSignal): Promise<void>;
  /**
   * Cancels a queued job. Resolves with the job's view after the attempt: `canceled` when it
   * was queued (or already canceled); otherwise its status, untouched; null when unknown.
   */
  cancel(jobId: string): Promise<JobView | null>;
  /**
   * Looks the request up in the result cache; on a hit records job `jobId` as already
   * succeeded with the cached outputs (`cached: true`, timings 0) and returns its view, without
   * adding anything to BullMQ. null on a miss (nothing is written).
   */
  answerFromCache(data: JobData, options: { jobId: string; modelSha256: string }): Promise<JobView | null>;
  /** Waiting + prioritized + delayed + active. */
  depth(model: string, version: string): Promise<number>;
  /** Pending waitFor/watch calls: each holds one listener slot until it ends. */
  waiting(): number;
  close(): Promise<void>;
}

const STATUS: Record<JobState, JobStatus> = {
  waiting: 'queued',
  prioritized: 'queued',
  delayed: 'queued',
  'waiting-children': 'queued',
  active: 'running',
  completed: 'succeeded',
  failed: 'failed',
};

const TERMINAL: ReadonlySet<JobStatus> = new Set(['succeeded', 'failed', 'canceled']);

/** Queue events after which a job's status may have changed: each wakes that job's waiters. */
const CHANGE_EVENTS = ['active', 'waiting', 'delayed', 'completed', 'failed', 'removed'] as const;

/**
 * KEYS: wait, paused, prioritized, delayed, tombstone (all in the queue's slot). ARGV: job id, tombstone, ttl s.
 * The same sets BullMQ's own fetch (moveToActive) pops from: once out of them, no worker can
 * take the job. BullMQ's removeJob then deletes the rest (it is no longer in any set).
 */
const BURY = `
local id = ARGV[1]
if redis.call('ZREM', KEYS[3], id) == 1 or redis.call('ZREM', KEYS[4], id) == 1
  or redis.call('LREM', KEYS[1], 1, id) == 1 or redis.call('LREM', KEYS[2], 1, id) == 1 then
  redis.call('SET', KEYS[5], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0
`;

/** Where the index key points: BullMQ's queue, or the tombstone of a job the API ended. */
type Location = { kind: 'queue'; name: string } | { kind: 'tombstone'; view: JobView };

/** A job's view; for a job in BullMQ also its queue, and when queued with a deadline, when it falls. */
interface Snapshot {
  view: JobView;
  queue?: string;
  deadlineAt?: number;
}

export function createBullJobQueue(options: BullJobQueueOptions): BullJobQueue {
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? (() => undefined);
  const client: RedisClient =
    typeof options.connection === 'string'
      ? createRedis(options.connection, options.redisOptions)
      : new Redis({ ...options.connection, maxRetriesPerRequest: null, ...options.redisOptions });
  const queues = new Map<string, Queue<JobData, JobResult>>();
  const events = new Map<string, Promise<QueueEvents>>();
  /** The QueueEvents' own cluster clients (see openQueueEvents): BullMQ does not close a client it was given. */
  const ownClients = new Set<RedisClient>();
  /** Per queue, per job id: the wake-ups of pending waitFor/watch calls. */
  const waiters = new Map<string, Map<string, Set<() => void>>>();
  let waiterCount = 0;
  const indexKey = (jobId: string) => `${options.prefix}:job:${jobId}`;
  /** Beside the queue's own keys, in its hash slot: what BURY writes (see the header). */
  const tombKey = (name: string, jobId: string) => queue(name).toKey(`tomb:${jobId}`);
  const results = createResultCache(client, { prefix: options.prefix });
  let closing: Promise<void> | undefined;

  function queue(name: string): Queue<JobData, JobResult> {
    if (closing) throw new Error('job queue is closed');
    let q = queues.get(name);
    if (!q) {
      q = new Queue<JobData, JobResult>(name, {
        connection: client,
        prefix: options.prefix,
        streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } },
      });
      // An 'error' event with no listener would crash the process.
      q.on('error', onError);
      queues.set(name, q);
    }
    return q;
  }

  async function locate(jobId: string): Promise<Location | null> {
    const raw = await client.get(indexKey(jobId));
    if (raw === null) return null;
    // Queue names are "{infer.…}" (job-contract.ts); tombstones are JSON objects.
    if (raw.startsWith('{"')) return { kind: 'tombstone', view: JSON.parse(raw) as JobView };
    return { kind: 'queue', name: raw };
  }

  /**
   * The job as it is now, expiring it first when it is queued past its deadline. State first,
   * then the job: in this order a terminal state always comes with its result. Reads that
   * disagree (the job moved between them) are retried from the index.
   */
  async function snapshot(jobId: string): Promise<Snapshot | null> {
    for (let attempt = 0; attempt < 3; attempt++) {
      const at = await locate(jobId);
      if (!at) return null;
      if (at.kind === 'tombstone') return { view: at.view };
      const q = queue(at.name);
      const state = await q.getJobState(jobId);
      const job = state === 'unknown' ? undefined : await Job.fromId<JobData, JobResult>(q, jobId);
      if (!job) {
        // Gone meanwhile: aged out, or buried (its tombstone is beside the queue, and soon in the index).
        const tomb = await client.get(tombKey(at.name, jobId));
        if (tomb !== null) return { view: JSON.parse(tomb) as JobView };
        continue;
      }
      const view = jobView(job, STATUS[state as JobState]);
      const { timeoutMs, submittedAt } = job.data;
      if (view.status !== 'queued' || timeoutMs === undefined) return { view, queue: at.name };
      const deadlineAt = submittedAt + timeoutMs;
      if (clock.now() <= deadlineAt) return { view, queue: at.name, deadlineAt };
      const waitedMs = clock.now() - submittedAt;
      const error = {
        code: 'deadline_exceeded',
        message: `the job waited ${waitedMs} ms without a worker taking it; its deadline was ${timeoutMs} ms`,
      };
      const buried = await bury(at.name, view, 'failed', error);
      if (buried) return { view: buried };
    }
    const at = await locate(jobId);
    return at?.kind === 'tombstone' ? { view: at.view } : null;
  }

  /** Ends a queued job with a tombstone; null when it is no longer queued (a worker took it, or it ended). */
  async function bury(name: string, view: JobView, status: JobStatus, error: { code: string; message: string }): Promise<JobView | null> {
    const tombstone: JobView = { ...view, status, error, finishedAt: clock.now() };
    const q = queue(name);
    const keys = [q.toKey('wait'), q.toKey('paused'), q.toKey('prioritized'), q.toKey('delayed'), tombKey(name, view.id)];
    const done = await client.eval(BURY, keys.length, ...keys, view.id, JSON.stringify(tombstone), options.retentionS);
    if (done !== 1) return null;
    await client.set(indexKey(view.id), JSON.stringify(tombstone), 'EX', options.retentionS);
    // Deletes the job's hash and emits `removed`, which wakes watchers in every API process.
    await q.remove(view.id).catch(onError);
    return tombstone;
  }

  /**
   * The QueueEvents of a queue, created once. It starts reading from the events stream's last
   * id as of *before* it exists, so an event emitted while its blocking connection is still
   * starting is not lost.
   */
  function queueEvents(name: string): Promise<QueueEvents> {
    let pending = events.get(name);
    if (!pending) {
      pending = openQueueEvents(name);
      events.set(name, pending);
    }
    return pending;
  }

  async function openQueueEvents(name: string): Promise<QueueEvents> {
    const last = await client.xrevrange(queue(name).toKey('events'), '+', '-', 'COUNT', 1);
    const lastEventId = last[0]?.[0] ?? '0-0';
    // Its own connection from the client's options, made fit to block (no fail-fast settings):
    // a blocking read waits out an outage and resumes, where a request should fail at once.
    // (Cast: BullMQ declares ioredis' retryStrategy without its `null` return; the value is ioredis' own.)
    // On a Redis Cluster the client's options are the cluster's, which BullMQ would read as one
    // node's (127.0.0.1:6379): there it gets a cluster client of its own, closed with it.
    const own = isCluster(client) ? duplicateClient(client, blockingOptions({})) : undefined;
    const connection = own ?? (blockingOptions(client.options) as ConnectionOptions);
    const qe = new QueueEvents(name, { connection, prefix: options.prefix, lastEventId });
    if (own) ownClients.add(own);
    qe.on('error', onError);
    const notify = ({ jobId }: { jobId: string }) => {
      for (const wake of waiters.get(name)?.get(jobId) ?? []) wake();
    };
    for (const event of CHANGE_EVENTS) qe.on(event, notify);
    try {
      await qe.waitUntilReady();
    } catch (err) {
      events.delete(name);
      await qe.close().catch(() => undefined);
      if (own) {
        ownClients.delete(own);
        await closeRedis(own).catch(() => undefined);
      }
      throw err;
    }
    return qe;
  }

  function addWaiter(name: string, jobId: string, wake: () => void): () => void {
    let byJob = waiters.get(name);
    if (!byJob) {
      byJob = new Map();
      waiters.set(name, byJob);
    }
    let set = byJob.get(jobId);
    if (!set) {
      set = new Set();
      byJob.set(jobId, set);
    }
    set.add(wake);
    waiterCount++;
    return () => {
      if (set.delete(wake)) waiterCount--;
      if (set.size === 0) byJob.delete(jobId);
    };
  }

  /**
   * The loop under waitFor and watch. Subscribes first, then reads, so a change that happened
   * before the listener existed is seen by that read. A wake-up re-reads the job: a `failed`
   * event for an attempt that will be retried leaves it queued, and the wait goes on. A queued
   * job's deadline is a wake-up too, so it is expired on time even with no worker running.
   */
  async function follow(
    jobId: string,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    onChange?: (view: JobView) => void | Promise<void>,
  ): Promise<JobView> {
    signal?.throwIfAborted();
    const at = await locate(jobId);
    if (!at) throw new NotFoundError('job_not_found', `no job ${jobId}`);
    if (at.kind === 'queue') await queueEvents(at.name);
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) stop.abort(); // aborted while we looked the queue up
    const stopped = new Promise<void>((resolve) => {
      if (stop.signal.aborted) resolve();
      else stop.signal.addEventListener('abort', () => resolve(), { once: true });
    });
    let timedOut = false;
    if (timeoutMs !== undefined) {
      clock.sleep(timeoutMs, stop.signal).then(
        () => {
          timedOut = true;
          stop.abort();
        },
        () => undefined,
      );
    }
    const wakeup = new Wakeup();
    const unsubscribe = at.kind === 'queue' ? addWaiter(at.name, jobId, wakeup.fire) : () => undefined;
    let reported: JobStatus | undefined;
    try {
      for (;;) {
        const current = await snapshot(jobId);
        if (!current) throw new NotFoundError('job_not_found', `no job ${jobId}`);
        if (onChange && current.view.status !== reported) {
          reported = current.view.status;
          await onChange(current.view);
        }
        if (TERMINAL.has(current.view.status)) return current.view;
        await nextChange(wakeup, stopped, current.deadlineAt);
        if (signal?.aborted) throw signal.reason;
        if (timedOut) return (await snapshot(jobId))?.view ?? current.view;
      }
    } finally {
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
    }
  }

  /** Resolves at the next queue event for the job, at its deadline (just past), or when stopped. */
  async function nextChange(wakeup: Wakeup, stopped: Promise<void>, deadlineAt: number | undefined): Promise<void> {
    const tick = new AbortController();
    const deadline =
      deadlineAt === undefined
        ? new Promise<void>(() => undefined)
        : clock.sleep(deadlineAt - clock.now() + 1, tick.signal).catch(() => undefined);
    try {
      await Promise.race([wakeup.next(), stopped, deadline]);
    } finally {
      tick.abort();
    }
  }

  return {
    async enqueue(data, { priority, jobId }) {
      const name = queueName(data.model, data.version);
      // The index first: a job BullMQ holds is always findable by id.
      await client.set(indexKey(jobId), name, 'EX', options.retentionS);
      await queue(name).add('infer', data, {
        jobId,
        priority: PRIORITIES[priority],
        attempts: options.attempts,
        backoff: { type: 'exponential', delay: options.backoffMs ?? 1000 },
        removeOnComplete: { age: options.retentionS },
        removeOnFail: { age: options.retentionS },
      });
    },

    async get(jobId) {
      return (await snapshot(jobId))?.view ?? null;
    },

    waitFor: (jobId, timeoutMs, signal) => follow(jobId, timeoutMs, signal),

    async watch(jobId, onChange, signal) {
      await follow(jobId, undefined, signal, onChange);
    },

    async cancel(jobId) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const current = await snapshot(jobId);
        if (current?.view.status !== 'queued' || current.queue === undefined) return current?.view ?? null;
        const canceled = await bury(current.queue, current.view, 'canceled', { code: 'canceled', message: 'canceled before it started' });
        if (canceled) return canceled;
      }
      return (await snapshot(jobId))?.view ?? null;
    },

    async answerFromCache(data, { jobId, modelSha256 }) {
      const hit = await results.get({ ...data, modelSha256 });
      if (!hit) return null;
      const view = cachedView(jobId, data, hit.outputs, hit.workerId);
      // NX: an id is never reused, and a cache hit must not overwrite a job that has one.
      const written = await client.set(indexKey(jobId), JSON.stringify(view), 'EX', options.retentionS, 'NX');
      if (written !== 'OK') throw new Error(`job id ${jobId} is already taken`);
      return view;
    },

    async depth(model, version) {
      const counts = await queue(queueName(model, version)).getJobCounts('waiting', 'prioritized', 'delayed', 'active');
      return (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0) + (counts.active ?? 0);
    },

    waiting: () => waiterCount,

    close() {
      closing ??= closeAllOf(queues, events, [...ownClients, client]);
      return closing;
    },
  };
}

/** Every Queue and QueueEvents, then the clients; each runs even if another fails. */
async function closeAllOf(
  queues: Map<string, Queue>,
  events: Map<string, Promise<QueueEvents>>,
  clients: readonly RedisClient[],
): Promise<void> {
  const results = await Promise.allSettled([
    ...[...queues.values()].map((q) => q.close()),
    ...[...events.values()].map(async (pending) => (await pending).close()),
  ]);
  await Promise.allSettled(clients.map((c) => closeRedis(c)));
  const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (errors.length > 0) throw new AggregateError(errors, 'closing the job queue failed');
}

/** A job answered from the cache: created, started and finished at submit, by no worker's pass. */
function cachedView(jobId: string, data: JobData, outputs: JobResult['outputs'], workerId: string): JobView {
  const at = data.submittedAt;
  return {
    id: jobId,
    tenant: data.tenant,
    model: data.model,
    version: data.version,
    status: 'succeeded',
    result: { outputs, timings: { queueMs: 0, inferMs: 0, batchRows: 0 }, workerId },
    createdAt: at,
    startedAt: at,
    finishedAt: at,
    attemptsMade: 0,
    cached: true,
  };
}

/** The job as GET /v1/jobs/{id} shows it, at the moment of `status` (also the webhook payload's). */
export function jobView(job: Job<JobData, JobResult>, status: JobStatus): JobView {
  const view: JobView = {
    id: job.id ?? '',
    tenant: job.data.tenant,
    model: job.data.model,
    version: job.data.version,
    status,
    createdAt: job.timestamp,
    attemptsMade: job.attemptsMade,
  };
  if (job.processedOn) view.startedAt = job.processedOn;
  if (status === 'succeeded' || status === 'failed') {
    if (job.finishedOn) view.finishedAt = job.finishedOn;
  }
  if (status === 'succeeded' && job.returnvalue) view.result = job.returnvalue;
  if (status === 'failed') view.error = parseFailure(job.failedReason);
  return view;
}

/**
 * The worker fails jobs with `code: message` (e.g. `invalid_input: …`, worker/intake.ts); any
 * other reason is an inference failure carrying the reason as its message.
 */
export function parseFailure(reason: string | undefined): { code: string; message: string } {
  const text = reason ?? '';
  const match = /^([a-z][a-z0-9]*(?:_[a-z0-9]+)*): ([\s\S]*)$/.exec(text);
  if (match) return { code: match[1] as string, message: match[2] as string };
  return { code: 'inference_failed', message: text || 'inference failed' };
}
