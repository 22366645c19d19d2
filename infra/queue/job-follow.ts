/**
 * Following a job until it ends: the loop under the job queue's waitFor (sync requests) and
 * watch (SSE streams). Every follower of a queue's jobs shares the queue's one QueueEvents
 * (queue-cache.ts): one listener per queue wakes the followers of the job an event names, and
 * each re-reads its job, so an event is only ever a hint to look again.
 */

import type { JobStatus, JobView } from '../contracts/job.ts';
import type { Clock } from '../kernel/clock.ts';
import { NotFoundError } from '../kernel/errors.ts';
import { Wakeup } from '../kernel/wakeup.ts';
import type { JobIndex } from './job-index.ts';
import type { Snapshot } from './job-snapshot.ts';
import { isTerminal } from './job-view.ts';
import type { QueueEventName, QueueLease } from './queue-cache.ts';

/**
 * Queue events after which a job's status may have changed: each wakes the followers of the
 * jobs its BullMQ job carries (a queue entry's members: infra/contracts/entry.ts). `member-ended`:
 * the API canceled or expired one member of a queued entry (tombstones.ts).
 */
const CHANGE_EVENTS: readonly QueueEventName[] = ['active', 'waiting', 'delayed', 'completed', 'failed', 'removed', 'member-ended'];

export interface FollowDeps {
  clock: Clock;
  index: JobIndex;
  snapshot: (jobId: string) => Promise<Snapshot | null>;
  queues: Pick<QueueLease, 'listen'>;
}

export interface JobFollower {
  /**
   * Resolves with the job's view once terminal, or with its current view when `timeoutMs`
   * passes first; calls `onChange` with the view now and at each change of status. Rejects
   * with the signal's reason when it aborts, and with NotFoundError for an unknown job.
   */
  follow(
    jobId: string,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    onChange?: (view: JobView) => void | Promise<void>,
  ): Promise<JobView>;
  /** Pending follow calls: each holds one listener slot until it ends. */
  waiting(): number;
}

export function createJobFollower({ clock, index, snapshot, queues }: FollowDeps): JobFollower {
  /** Per queue, per BullMQ job (entry) id: the wake-ups of pending follow calls. */
  const waiters = new Map<string, Map<string, Set<() => void>>>();
  /** Per queue: its one listener, subscribed once (a failed subscription is tried again). */
  const listening = new Map<string, Promise<unknown>>();
  let waiterCount = 0;

  function listenTo(name: string): Promise<unknown> {
    let pending = listening.get(name);
    if (!pending) {
      const wake = (jobId: string) => {
        for (const fire of waiters.get(name)?.get(jobId) ?? []) fire();
      };
      pending = queues.listen(name, CHANGE_EVENTS, wake).catch((err: unknown) => {
        listening.delete(name);
        throw err;
      });
      listening.set(name, pending);
    }
    return pending;
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
   * Subscribes first, then reads, so a change that happened before the listener existed is
   * seen by that read. A wake-up re-reads the job: a `failed` event for an attempt that will be
   * retried leaves it queued, and the wait goes on. A queued job's deadline is a wake-up too,
   * so it is expired on time even with no worker running.
   */
  async function follow(
    jobId: string,
    timeoutMs: number | undefined,
    signal: AbortSignal | undefined,
    onChange?: (view: JobView) => void | Promise<void>,
  ): Promise<JobView> {
    signal?.throwIfAborted();
    const at = await index.locate(jobId);
    if (!at) throw new NotFoundError('job_not_found', `no job ${jobId}`);
    if (at.kind === 'queue') await listenTo(at.name);
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
    // Events name the BullMQ job: the entry carrying this request.
    const unsubscribe = at.kind === 'queue' ? addWaiter(at.name, at.entryId, wakeup.fire) : () => undefined;
    let reported: JobStatus | undefined;
    try {
      for (;;) {
        const current = await snapshot(jobId);
        if (!current) throw new NotFoundError('job_not_found', `no job ${jobId}`);
        if (onChange && current.view.status !== reported) {
          reported = current.view.status;
          await onChange(current.view);
        }
        if (isTerminal(current.view.status)) return current.view;
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

  return { follow, waiting: () => waiterCount };
}
