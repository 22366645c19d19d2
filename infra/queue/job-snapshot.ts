/**
 * A job's view as it is now, wherever it is: in BullMQ, or ended outside it (the index's final
 * view, or a tombstone the index does not point at yet). Reading a queued job past its deadline
 * expires it first (see job-queue.ts's header for the deadline rule).
 */
import type { JobStatus, JobView } from '../contracts/job.ts';
import type { Clock } from '../kernel/clock.ts';
import type { JobIndex } from './job-index.ts';
import { legacyJobView, statusOf } from './job-view.ts';
import { type MemberViewDeps, memberView } from './member-view.ts';
import type { JobQueueHandle } from './queue-cache.ts';
import { readTypedJob, type TypedJob } from './queue-jobs.ts';
import type { Tombstones } from './tombstones.ts';

/**
 * A job's view; for a job in BullMQ also its queue and the BullMQ job (entry) that carries it,
 * and when queued with a deadline, when it falls.
 */
export interface Snapshot {
  view: JobView;
  queue?: string;
  /** The entry's id; the job's own for a job from before entries. */
  entryId?: string;
  /** Members in the entry (1 for a job from before entries). */
  members?: number;
  deadlineAt?: number;
}

export interface SnapshotDeps {
  clock: Clock;
  index: JobIndex;
  tombstones: Tombstones;
  queue: (name: string) => JobQueueHandle;
  /** Reads entries' outputs and skipped members' tombstones. */
  members: MemberViewDeps;
}

/**
 * Reads a job: null when unknown (or expired). State first, then the job: in this order a
 * terminal state always comes with its result. Reads that disagree (the job moved between
 * them) are retried from the index.
 */
export function createSnapshotReader({
  clock,
  index,
  tombstones,
  queue,
  members,
}: SnapshotDeps): (jobId: string) => Promise<Snapshot | null> {
  return async function snapshot(jobId) {
    for (let attempt = 0; attempt < 3; attempt++) {
      const at = await index.locate(jobId);
      if (!at) return null;
      if (at.kind === 'tombstone') return { view: at.view };
      const q = queue(at.name);
      const status = statusOf(await q.getJobState(at.entryId));
      const held = status === undefined ? undefined : await readTypedJob(q, at.entryId);
      const view = held && status !== undefined ? await viewOf(members, at.name, held, jobId, status) : undefined;
      if (!held || !view) {
        // Gone meanwhile: aged out, or buried (its tombstone is beside the queue, and soon in the index).
        const tomb = await tombstones.read(at.name, jobId);
        if (tomb !== null) return { view: tomb };
        continue;
      }
      const found = { view, queue: at.name, entryId: at.entryId, members: held.kind === 'entry' ? held.job.data.members.length : 1 };
      const request =
        held.kind === 'entry' ? held.job.data.members.find((m) => m.id === jobId) : held.kind === 'legacy' ? held.job.data : undefined;
      const { timeoutMs, submittedAt } = request ?? {};
      if (view.status !== 'queued' || timeoutMs === undefined || submittedAt === undefined) return found;
      const deadlineAt = submittedAt + timeoutMs;
      if (clock.now() <= deadlineAt) return { ...found, deadlineAt };
      const waitedMs = clock.now() - submittedAt;
      const error = {
        code: 'deadline_exceeded',
        message: `the job waited ${waitedMs} ms without a worker taking it; its deadline was ${timeoutMs} ms`,
      };
      const buried = await tombstones.bury(found, 'failed', error);
      if (buried) return { view: buried };
    }
    const at = await index.locate(jobId);
    return at?.kind === 'tombstone' ? { view: at.view } : null;
  };
}

/** Request `jobId`'s view in the BullMQ job that carries it; undefined when it carries no such request. */
async function viewOf(
  members: MemberViewDeps,
  queue: string,
  held: TypedJob,
  jobId: string,
  status: JobStatus,
): Promise<JobView | undefined> {
  if (held.kind === 'entry') return memberView(members, queue, held.job, jobId, status);
  // A chunk job carries no request (no index key names one); a legacy job is its own.
  return held.kind === 'legacy' ? legacyJobView(held.job, status) : undefined;
}
