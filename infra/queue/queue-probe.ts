/**
 * A look into model queues for the tools outside the product (the bench, the chaos suite,
 * `simulate calibrate`, tests), without handing them a BullMQ Queue: counts, the finished jobs
 * as they finish, a post-mortem of one job, the workers holding jobs, and the cleanup a harness
 * needs between runs (pause, clean, obliterate). Reads go through the process's shared readers
 * (queue-cache.ts), which never rewrite a queue's settings.
 *
 * Not for the product's own paths: the API, the scaler and the webhook source each have their
 * own narrow door (job-queue.ts, queue-stats.ts, held-jobs.ts).
 */
import type { RedisClient } from '../redis/client.ts';
import { type FinishedJobsOptions, type FinishedJobsReader, readFinishedJobs } from './finished-jobs.ts';
import { leaseQueues, type QueueErrorHandler } from './queue-cache.ts';
import { countJobs, type JobCountState } from './queue-stats.ts';

/** One BullMQ job as a post-mortem reads it. */
export interface JobRecord {
  name: string;
  /** The job's data (an entry's, a chunk's: infra/contracts/queue-job.ts). */
  data: unknown;
  state: string;
  /** BullMQ's returnvalue (an entry's EntryResult, a chunk's ChunkResult) once completed. */
  result?: unknown;
  attemptsMade: number;
  stalls: number;
  failedReason?: string;
  /** Epoch ms: when a worker took it, when it finished. */
  processedOn?: number;
  finishedOn?: number;
}

export interface QueueProbe {
  /** BullMQ's count of the queue's jobs in each of `states` (0 where none). */
  counts<S extends JobCountState>(...states: S[]): Promise<Record<S, number>>;
  /** A reader of the jobs that finish from now on (finished-jobs.ts). */
  finished(options: FinishedJobsOptions): FinishedJobsReader;
  /** Job `id` as it is now; undefined when BullMQ does not hold it. */
  inspect(id: string): Promise<JobRecord | undefined>;
  /** Every completed job the queue still keeps, oldest first. */
  completed(): Promise<JobRecord[]>;
  /** The ids of the workers (BullMQ's processedBy) holding the first `count` active jobs. */
  holders(count?: number): Promise<string[]>;
  /** Empties the completed or failed set (a harness's reset between runs). */
  clean(set: 'completed' | 'failed'): Promise<void>;
  pause(): Promise<void>;
  resume(): Promise<void>;
  /** Removes the queue and every job in it, whatever state: test and bench teardown only. */
  obliterate(): Promise<void>;
}

export interface QueueProbes {
  queue(name: string): QueueProbe;
  /** Idempotent. */
  close(): Promise<void>;
}

/** Probes of the queues of `redis` under `prefix`; `close()` releases them (not the client). */
export function openQueueProbes(redis: RedisClient, prefix: string, onError?: QueueErrorHandler): QueueProbes {
  const queues = leaseQueues(redis, prefix, onError);
  return {
    queue(name) {
      const queue = () => queues.reader(name);
      return {
        counts: (...states) => countJobs(queues, name, ...states),
        finished: (options) => readFinishedJobs(redis, queue(), options),
        async inspect(id) {
          const job = await queue().getJob(id);
          return job ? record(job, await job.getState()) : undefined;
        },
        async completed() {
          const jobs = await queue().getJobs(['completed'], 0, -1, true);
          return jobs.map((job) => record(job, 'completed'));
        },
        async holders(count = 1) {
          const jobs = await queue().getActive(0, count - 1);
          return jobs.flatMap((j) => (j.processedBy ? [j.processedBy] : []));
        },
        async clean(set) {
          await queue().clean(0, 0, set);
        },
        pause: () => queue().pause(),
        resume: () => queue().resume(),
        obliterate: () => queue().obliterate({ force: true }),
      };
    },
    close: () => queues.release(),
  };
}

function record(
  job: {
    name: string;
    data: unknown;
    returnvalue?: unknown;
    attemptsMade: number;
    stalledCounter?: number;
    failedReason?: string;
    processedOn?: number;
    finishedOn?: number;
  },
  state: string,
): JobRecord {
  const r: JobRecord = { name: job.name, data: job.data, state, attemptsMade: job.attemptsMade, stalls: job.stalledCounter ?? 0 };
  if (job.returnvalue !== undefined && job.returnvalue !== null) r.result = job.returnvalue;
  if (job.failedReason) r.failedReason = job.failedReason;
  if (job.processedOn !== undefined) r.processedOn = job.processedOn;
  if (job.finishedOn !== undefined) r.finishedOn = job.finishedOn;
  return r;
}
