/**
 * Reading a measured queue: waiting for its jobs to finish, reading their BullMQ timestamps, and
 * emptying the finished sets between runs so each run counts from zero.
 */
import type { Job, Queue } from 'bullmq';

/** How long without a single job finishing before a wait gives up. */
export const STALL_MS = 60_000;

export interface Finished {
  completed: number;
  failed: number;
  /** finishedOn of the last job done (epoch ms). */
  lastFinishedAt: number;
}

/**
 * Waits until `count` jobs are finished (since the last reset). A busy machine may drain slowly,
 * so the wait lasts as long as jobs keep finishing, and gives up after `stallMs` without one,
 * saying where the rest are (waiting: the worker fell behind or died; delayed: retries).
 */
export async function waitFinished(queue: Queue, count: number, stallMs = STALL_MS): Promise<Finished> {
  let seen = -1;
  let progressAt = Date.now();
  for (;;) {
    const c = await queue.getJobCounts('completed', 'failed');
    const done = (c.completed ?? 0) + (c.failed ?? 0);
    if (done >= count) {
      // The completed set is ordered by finishing time: its newest entry is the last job done.
      const [last] = await queue.getJobs(['completed'], 0, 0, false);
      return { completed: c.completed ?? 0, failed: c.failed ?? 0, lastFinishedAt: last?.finishedOn ?? Date.now() };
    }
    if (done !== seen) [seen, progressAt] = [done, Date.now()];
    if (Date.now() - progressAt > stallMs) {
      const where = await queue.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'completed', 'failed');
      throw new Error(`no job finished for ${stallMs / 1000} s, ${done} of ${count} done; jobs: ${JSON.stringify(where)}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Empties the finished sets. */
export async function resetFinished(queue: Queue): Promise<void> {
  await queue.clean(0, 0, 'completed');
  await queue.clean(0, 0, 'failed');
}

/** Every completed job, a page at a time (job data included: keep runs to thousands of jobs). */
export async function forEachCompleted(queue: Queue, visit: (job: Job) => void): Promise<void> {
  for (let start = 0; ; start += 1000) {
    const page = await queue.getJobs(['completed'], start, start + 999, true);
    for (const job of page) visit(job);
    if (page.length < 1000) return;
  }
}
