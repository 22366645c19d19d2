/**
 * Reading a measured queue in requests, not BullMQ jobs. Online requests reach the workers as
 * queue entries (infra/contracts/entry.ts), one BullMQ job carrying one or more requests: a
 * completed job whose return value is an entry's result counts one completed request per member
 * that succeeded (its id the member's, finished at the entry's finishedOn) and one failed
 * request per member that failed or was skipped; any other completed job (a job from before
 * entries, the raw BullMQ baselines) is one request. A job that failed for good fails each of
 * its entry's members, or itself.
 *
 * The watch reads incrementally, through infra/queue's finished-jobs reader: each new job costs
 * one HMGET.
 */
import { isEntryData, isEntryResult } from '../../infra/contracts/entry.ts';
import type { FinishedJobsReader, QueueProbe } from '../../infra/queue/index.ts';
import { type LatencySummary, summarizeMs } from './stats.ts';

/** How long without a single request finishing before a wait gives up. */
export const STALL_MS = 60_000;

/** How far before the newest finishing time seen each poll reads again. */
const OVERLAP_MS = 250;

export interface Finished {
  /** Requests that succeeded. */
  completed: number;
  /** Requests that failed, or were skipped (canceled or expired inside an entry). */
  failed: number;
  /** BullMQ jobs (entries or single jobs) finished, either way. */
  jobs: number;
  /** finishedOn of the last request done (epoch ms). */
  lastFinishedAt: number;
}

export interface FinishedRequest {
  finishedOn: number;
  /** When a worker took its job (BullMQ processedOn). */
  processedOn: number;
}

type WatchedQueue = Pick<QueueProbe, 'finished' | 'counts' | 'clean'>;

/** What a finished job counts as: its requests (succeeded ones with their ids) and its failures. */
export interface JobCount {
  succeeded: string[];
  failed: number;
}

/**
 * A completed job's requests, from its id and raw BullMQ return value: an entry's succeeded
 * members, or the job itself. A return value that is not JSON is a job's own (a raw baseline's).
 */
export function countCompleted(jobId: string, returnvalue: string | null | undefined): JobCount {
  let value: unknown;
  try {
    value = returnvalue ? JSON.parse(returnvalue) : undefined;
  } catch {
    value = undefined;
  }
  if (!isEntryResult(value)) return { succeeded: [jobId], failed: 0 };
  const succeeded: string[] = [];
  let failed = 0;
  for (const [id, outcome] of Object.entries(value.members)) {
    if (outcome.status === 'succeeded') succeeded.push(id);
    else failed++;
  }
  return { succeeded, failed };
}

/** Requests a job that failed for good carries: an entry's members, or the job itself. */
export function countFailed(data: string | null | undefined): number {
  try {
    const parsed: unknown = data ? JSON.parse(data) : undefined;
    return isEntryData(parsed) ? parsed.members.length : 1;
  } catch {
    return 1;
  }
}

export class RequestWatch {
  private readonly finished = new Map<string, FinishedRequest>();
  private readonly readers: Record<'completed' | 'failed', FinishedJobsReader>;
  private failedRequests = 0;
  private lastFinishedAt = 0;

  constructor(private readonly queue: WatchedQueue) {
    const times = ['finishedOn', 'processedOn'];
    this.readers = {
      completed: queue.finished({ set: 'completed', fields: ['returnvalue', ...times], overlapMs: OVERLAP_MS }),
      failed: queue.finished({ set: 'failed', fields: ['data', ...times], overlapMs: OVERLAP_MS }),
    };
  }

  /** Reads what finished since the last poll. */
  async poll(): Promise<Finished> {
    await this.read('completed');
    await this.read('failed');
    return {
      completed: this.finished.size,
      failed: this.failedRequests,
      jobs: this.readers.completed.seen + this.readers.failed.seen,
      lastFinishedAt: this.lastFinishedAt,
    };
  }

  /** The requests that succeeded since the last reset, by id. */
  requests(): ReadonlyMap<string, FinishedRequest> {
    return this.finished;
  }

  /** Empties the queue's finished sets, and forgets them: the next run counts from zero. */
  async reset(): Promise<void> {
    await this.queue.clean('completed');
    await this.queue.clean('failed');
    this.finished.clear();
    this.readers.completed.reset();
    this.readers.failed.reset();
    this.failedRequests = 0;
    this.lastFinishedAt = 0;
  }

  private async read(set: 'completed' | 'failed'): Promise<void> {
    for (const { id, score, values } of await this.readers[set].read()) {
      const [value, finishedOn, processedOn] = values;
      const finishedAt = Number(finishedOn ?? score);
      const taken = Number(processedOn ?? NaN);
      this.lastFinishedAt = Math.max(this.lastFinishedAt, finishedAt);
      if (set === 'failed') {
        this.failedRequests += countFailed(value);
        continue;
      }
      const count = countCompleted(id, value);
      this.failedRequests += count.failed;
      for (const member of count.succeeded) this.finished.set(member, { finishedOn: finishedAt, processedOn: taken });
    }
  }

  /**
   * Waits until `count` requests are finished (since the last reset). A busy machine may drain
   * slowly, so the wait lasts as long as requests keep finishing, and gives up after `stallMs`
   * without one, saying where the queue's jobs are (waiting: the worker fell behind or died;
   * delayed: retries).
   */
  async waitFinished(count: number, stallMs = STALL_MS): Promise<Finished> {
    let seen = -1;
    let progressAt = Date.now();
    for (;;) {
      const f = await this.poll();
      const done = f.completed + f.failed;
      if (done >= count) return f;
      if (done !== seen) [seen, progressAt] = [done, Date.now()];
      if (Date.now() - progressAt > stallMs) {
        const where = await this.queue.counts('waiting', 'prioritized', 'active', 'delayed', 'completed', 'failed');
        throw new Error(`no request finished for ${stallMs / 1000} s, ${done} of ${count} done; jobs: ${JSON.stringify(where)}`);
      }
      await new Promise((r) => setTimeout(r, 25));
    }
  }
}

/** Took the job → finished, over the requests of the last run (a request in an entry: its entry's). */
export function inWorkerLatencies(requests: ReadonlyMap<string, FinishedRequest>): LatencySummary {
  return summarizeMs(Array.from(requests.values(), (r) => r.finishedOn - r.processedOn));
}

/** Requests per BullMQ job over a run: 1 with no coalescing, more as entries fill. */
export function requestsPerJob(f: Pick<Finished, 'completed' | 'failed' | 'jobs'>): number {
  return f.jobs > 0 ? (f.completed + f.failed) / f.jobs : NaN;
}
