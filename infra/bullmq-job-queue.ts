/**
 * The API's job queue over BullMQ: one Queue per model version (named by job-contract.ts), a
 * small index key per job so `GET /v1/jobs/{id}` finds the queue from the id alone, and one
 * shared QueueEvents per queue for every waiter of a sync request.
 *
 * Connections: one ioredis client shared by every Queue and the index keys (BullMQ does not
 * close a client it was handed); each QueueEvents duplicates it into a blocking connection of
 * its own, which it closes itself. `close()` closes all of them, once.
 */
import { Job, Queue, QueueEvents, type JobState } from 'bullmq';
import { Redis, type RedisOptions } from 'ioredis';
import { systemClock, type Clock } from './clock.ts';
import { NotFoundError } from './errors.ts';
import { PRIORITIES, queueName, type JobData, type JobResult, type JobStatus, type JobView, type Priority } from './job-contract.ts';
import { closeRedis, createRedis } from './redis.ts';

export type { JobView };

export interface BullJobQueueOptions {
  connection: RedisOptions | string;
  /** BullMQ key prefix (QUEUE_PREFIX); the job index keys live under it too. */
  prefix: string;
  /** How long finished jobs (and their index keys) are kept. */
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
  get(jobId: string): Promise<JobView | null>;
  waitFor(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<JobView>;
  depth(model: string, version: string): Promise<number>;
  close(): Promise<void>;
}

type Waiter = () => void;

/** A wake-up that is remembered when it fires while nobody is waiting. */
class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  readonly fire = (): void => {
    const resolve = this.resolve;
    this.resolve = undefined;
    if (resolve) resolve();
    else this.pending = true;
  };

  next(): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => (this.resolve = resolve));
  }
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

export function createBullJobQueue(options: BullJobQueueOptions): BullJobQueue {
  const clock = options.clock ?? systemClock;
  const onError = options.onError ?? (() => undefined);
  const client =
    typeof options.connection === 'string'
      ? createRedis(options.connection)
      : new Redis({ ...options.connection, maxRetriesPerRequest: null });
  const queues = new Map<string, Queue<JobData, JobResult>>();
  const events = new Map<string, Promise<QueueEvents>>();
  /** Per queue, per job id: the callbacks of pending waitFor calls. */
  const waiters = new Map<string, Map<string, Set<Waiter>>>();
  const indexKey = (jobId: string) => `${options.prefix}:job:${jobId}`;
  let closing: Promise<void> | undefined;

  function queue(name: string): Queue<JobData, JobResult> {
    if (closing) throw new Error('job queue is closed');
    let q = queues.get(name);
    if (!q) {
      q = new Queue<JobData, JobResult>(name, { connection: client, prefix: options.prefix });
      // An 'error' event with no listener would crash the process.
      q.on('error', onError);
      queues.set(name, q);
    }
    return q;
  }

  async function queueOf(jobId: string): Promise<string | null> {
    return client.get(indexKey(jobId));
  }

  /**
   * State first, then the job: the two reads are not atomic, and in this order a terminal state
   * always comes with its result (the other order can pair "completed" with a hash read while
   * the job was still active, without its return value).
   */
  async function view(name: string, jobId: string): Promise<JobView | null> {
    const q = queue(name);
    const state = await q.getJobState(jobId);
    if (state === 'unknown') return null;
    const job = await Job.fromId<JobData, JobResult>(q, jobId);
    return job ? toView(job, STATUS[state]) : null;
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
    const qe = new QueueEvents(name, { connection: client, prefix: options.prefix, lastEventId });
    qe.on('error', onError);
    const notify = ({ jobId }: { jobId: string }) => {
      for (const wake of waiters.get(name)?.get(jobId) ?? []) wake();
    };
    qe.on('completed', notify);
    qe.on('failed', notify);
    try {
      await qe.waitUntilReady();
    } catch (err) {
      events.delete(name);
      await qe.close().catch(() => undefined);
      throw err;
    }
    return qe;
  }

  function addWaiter(name: string, jobId: string, wake: Waiter): () => void {
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
    return () => {
      set.delete(wake);
      if (set.size === 0) byJob.delete(jobId);
    };
  }

  /**
   * Subscribes first, then reads the job's state, so a job that finished before the listener
   * existed is seen by that read. A wake-up re-reads the state: a `failed` event for an attempt
   * that will be retried leaves the job queued, and the wait goes on.
   */
  async function waitFor(jobId: string, timeoutMs: number, signal?: AbortSignal): Promise<JobView> {
    signal?.throwIfAborted();
    const name = await queueOf(jobId);
    if (!name) throw new NotFoundError('job_not_found', `no job ${jobId}`);
    await queueEvents(name);
    const stop = new AbortController();
    const onAbort = () => stop.abort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (signal?.aborted) stop.abort(); // aborted while we looked the queue up
    const wakeup = new Wakeup();
    const unsubscribe = addWaiter(name, jobId, wakeup.fire);
    const expired = clock.sleep(timeoutMs, stop.signal).then(
      () => true,
      () => true,
    );
    try {
      for (;;) {
        const current = await view(name, jobId);
        if (!current) throw new NotFoundError('job_not_found', `no job ${jobId}`);
        if (TERMINAL.has(current.status)) return current;
        const timedOut = await Promise.race([wakeup.next().then(() => false), expired]);
        if (signal?.aborted) throw signal.reason;
        if (timedOut) return (await view(name, jobId)) ?? current;
      }
    } finally {
      unsubscribe();
      signal?.removeEventListener('abort', onAbort);
      stop.abort();
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
      const name = await queueOf(jobId);
      return name ? view(name, jobId) : null;
    },

    waitFor,

    async depth(model, version) {
      const counts = await queue(queueName(model, version)).getJobCounts('waiting', 'prioritized', 'delayed', 'active');
      return (counts.waiting ?? 0) + (counts.prioritized ?? 0) + (counts.delayed ?? 0) + (counts.active ?? 0);
    },

    close() {
      closing ??= closeAllOf(queues, events, client);
      return closing;
    },
  };
}

/** Every Queue and QueueEvents, then the shared client; each runs even if another fails. */
async function closeAllOf(queues: Map<string, Queue>, events: Map<string, Promise<QueueEvents>>, client: Redis): Promise<void> {
  const results = await Promise.allSettled([
    ...[...queues.values()].map((q) => q.close()),
    ...[...events.values()].map(async (pending) => (await pending).close()),
  ]);
  await closeRedis(client);
  const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
  if (errors.length > 0) throw new AggregateError(errors, 'closing the job queue failed');
}

function toView(job: Job<JobData, JobResult>, status: JobStatus): JobView {
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
