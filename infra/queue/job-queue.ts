/**
 * The API's job queue over BullMQ: one Queue per model version (named by infra/contracts/job.ts), a
 * small index key per job so `GET /v1/jobs/{id}` finds the queue from the id alone
 * (job-index.ts), and one shared QueueEvents per queue for every waiter (sync requests, SSE
 * streams: job-follow.ts).
 *
 * The index key holds the queue's name while BullMQ holds the job, or a tombstone (the job's
 * final view as JSON, tombstones.ts) once the API has ended a queued job itself:
 *
 *   queued --cancel()-----------------------------------> canceled  (tombstone, code canceled)
 *   queued --seen past its deadline (get/waitFor/watch)--> failed    (tombstone, code deadline_exceeded)
 *   queued --a worker takes it--> running --> succeeded | failed     (BullMQ's own states)
 *   (submit) --answerFromCache() hits--------------------> succeeded (tombstone, cached: true; never in BullMQ)
 *
 * Deadline rule: a job with `timeoutMs` must *start* within that many ms of submit. Workers
 * refuse a job past it (worker/intake.ts); without a worker, the API expires it the moment
 * anyone looks (GET, SSE, waitFor, cancel: job-snapshot.ts). Until someone looks or a worker
 * fetches it, an overdue job still counts in depth(). A job a worker already took is never
 * touched.
 *
 * A result-cache hit (infra/redis/result-cache.ts) is the same kind of record: the job's final
 * view, written at submit instead of a queue name, so every reader (GET, SSE, sync waits,
 * cancel) sees a finished job and no worker ever hears of it.
 *
 * Connections: two ioredis clients of its own. One is BullMQ's, shared by its Queues through the
 * process's queue cache (queue-cache.ts, which also opens the QueueEvents' blocking connections),
 * and carries what must run beside BullMQ's scripts: the entry writer's pipeline ending in the
 * job's insert, and tombstones. The other carries the commands that are only ours: the result
 * cache, the job index and the entries' members. Why two: ioredis copies every script defined on
 * a client onto each pipeline it makes, auto-pipelining (the API's) makes one per batch of
 * commands, and BullMQ defines dozens of scripts — on one client, the result cache's lookup
 * of every submit was the API's largest entry in the profile (issue 34). `close()` releases
 * the cache's lease and closes both clients, once.
 */
import { Redis, type RedisOptions } from 'ioredis';
import type { QueuedRequest } from '../contracts/entry.ts';
import { type JobView, type Priority, queueName } from '../contracts/job.ts';
import { aligned, rowsTensor, tensorData } from '../contracts/packed-tensors.ts';
import { type Clock, systemClock } from '../kernel/clock.ts';
import { closeRedis, createRedis, type RedisClient } from '../redis/client.ts';
import type { OpenJobs } from '../redis/open-jobs.ts';
import { createResultCache } from '../redis/result-cache.ts';
import { createEntryWriter } from './entry-writer.ts';
import { createJobFollower } from './job-follow.ts';
import { createJobIndex } from './job-index.ts';
import { createSnapshotReader } from './job-snapshot.ts';
import { cachedView } from './job-view.ts';
import { type JobQueueHandle, leaseQueues, type QueueLease } from './queue-cache.ts';
import { countJobs } from './queue-stats.ts';
import { createTombstones } from './tombstones.ts';

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
  /** The tenants' open jobs (infra/redis/open-jobs.ts): a queued job ended here (cancel, deadline) is released. */
  openJobs?: Pick<OpenJobs, 'release'>;
  /** Requests one queue entry may carry (COALESCE_MAX_REQUESTS, entry-writer.ts); default 64, 1 = no coalescing. */
  coalesceMaxRequests?: number;
  /** Input bytes one queue entry may carry; default 4 MiB. */
  coalesceMaxBytes?: number;
  /**
   * How long depth() may answer from its last read of a queue plus the requests this process
   * queued there since (e.g. 1000 for admission: one read a second per queue, not one per
   * request; exact with one API process, other processes' requests seen within the interval);
   * 0 (the default) reads every time.
   */
  depthCacheMs?: number;
  /** Told of each queue entry written: `members` requests share it. */
  onEntryWritten?: (e: { queue: string; members: number; bytes: number }) => void;
}

export interface BullJobQueue {
  /** Resolves once the request is in BullMQ, inside a queue entry it may share (entry-writer.ts). */
  enqueue(request: QueuedRequest, options: { priority: Priority; jobId: string }): Promise<void>;
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
  answerFromCache(request: QueuedRequest, options: { jobId: string }): Promise<JobView | null>;
  /**
   * Jobs waiting + prioritized + delayed + active. BullMQ counts queue entries; each is
   * counted as the requests per entry this process has lately been writing to the queue
   * (exact without coalescing, an estimate with it).
   */
  depth(model: string, version: string): Promise<number>;
  /** Pending waitFor/watch calls: each holds one listener slot until it ends. */
  waiting(): number;
  close(): Promise<void>;
}

export function createBullJobQueue(options: BullJobQueueOptions): BullJobQueue {
  const { prefix, retentionS } = options;
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? (() => undefined);
  const connect = (): RedisClient =>
    typeof options.connection === 'string'
      ? createRedis(options.connection, options.redisOptions)
      : new Redis({ ...options.connection, maxRetriesPerRequest: null, ...options.redisOptions });
  const client = connect();
  const plain = connect();
  const queues = leaseQueues(client, prefix, onError);
  const index = createJobIndex(plain, { prefix, retentionS });
  const tombstones = createTombstones({ redis: client, prefix, retentionS, clock, index, queues, onError, openJobs: options.openJobs });
  const results = createResultCache(plain, { prefix });
  let closing: Promise<void> | undefined;
  /** depth()'s last read per queue, and the requests this process queued there since (counted on top). */
  const depths = new Map<string, { at: number; depth: number; added: number }>();

  function queue(name: string): JobQueueHandle {
    if (closing) throw new Error('job queue is closed');
    return queues.producer(name);
  }

  const writer = createEntryWriter({
    redis: client,
    queues,
    prefix,
    retentionS,
    attempts: options.attempts,
    backoffMs: options.backoffMs ?? 1000,
    maxMembers: options.coalesceMaxRequests ?? 64,
    maxBytes: options.coalesceMaxBytes ?? 4 * 1024 * 1024,
    now: () => clock.now(),
    ...(options.onEntryWritten ? { onWritten: options.onEntryWritten } : {}),
  });
  const snapshot = createSnapshotReader({ clock, index, tombstones, queue, members: { redis: plain, prefix } });
  const follower = createJobFollower({ clock, index, snapshot, queues });

  return {
    async enqueue(request, opts) {
      if (closing) throw new Error('job queue is closed');
      await writer.enqueue(request, opts);
      const cached = depths.get(queueName(request.model, request.version));
      if (cached) cached.added++;
    },

    async get(jobId) {
      return (await snapshot(jobId))?.view ?? null;
    },

    waitFor: (jobId, timeoutMs, signal) => follower.follow(jobId, timeoutMs, signal),

    async watch(jobId, onChange, signal) {
      await follower.follow(jobId, undefined, signal, onChange);
    },

    async cancel(jobId) {
      for (let attempt = 0; attempt < 3; attempt++) {
        const current = await snapshot(jobId);
        if (current?.view.status !== 'queued' || current.queue === undefined) return current?.view ?? null;
        const error = { code: 'canceled', message: 'canceled before it started' };
        const canceled = await tombstones.bury({ ...current, queue: current.queue }, 'canceled', error);
        if (canceled) return canceled;
      }
      return (await snapshot(jobId))?.view ?? null;
    },

    async answerFromCache(request, { jobId }) {
      if (request.cacheDigest === undefined) return null;
      const hit = await results.get(request.model, request.version, request.cacheDigest);
      if (!hit) return null;
      const bytes = aligned(hit.bytes);
      const outputs = hit.specs.map((s) =>
        rowsTensor(s.name, s.datatype, s.shape, tensorData(s, bytes), undefined, undefined, s.batchAxis),
      );
      const view = cachedView(jobId, request, outputs, hit.workerId);
      if (!(await index.recordFinished(view))) throw new Error(`job id ${jobId} is already taken`);
      return view;
    },

    async depth(model, version) {
      if (closing) throw new Error('job queue is closed');
      const name = queueName(model, version);
      const cacheMs = options.depthCacheMs ?? 0;
      const cached = depths.get(name);
      if (cached && clock.now() - cached.at < cacheMs) return cached.depth + cached.added;
      const counts = await countJobs(queues, name, 'waiting', 'prioritized', 'delayed', 'active');
      const entries = counts.waiting + counts.prioritized + counts.delayed + counts.active;
      const depth = Math.round(entries * writer.membersPerEntry(name));
      if (cacheMs > 0) depths.set(name, { at: clock.now(), depth, added: 0 });
      return depth;
    },

    waiting: () => follower.waiting(),

    close() {
      closing ??= writer.close().then(() => closeAllOf(queues, [client, plain]));
      return closing;
    },
  };
}

/** The queues' lease, then the clients: they close even if a queue failed to. */
async function closeAllOf(queues: QueueLease, clients: RedisClient[]): Promise<void> {
  const failure = await queues.release().then(
    () => undefined,
    (err: unknown) => err,
  );
  await Promise.all(clients.map((c) => closeRedis(c).catch(() => undefined)));
  if (failure !== undefined) {
    throw new AggregateError(failure instanceof AggregateError ? failure.errors : [failure], 'closing the job queue failed');
  }
}
