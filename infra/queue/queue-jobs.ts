/**
 * BullMQ's jobs as the kinds a queue carries (infra/contracts/queue-job.ts), for the readers in
 * this folder: an entry, a bulk chunk, or — migration only — an online job an older API queued,
 * which the workers fail and the API still shows (`legacy`). A job of none of these is not ours
 * to read.
 */
import { Job } from 'bullmq';
import type { EntryData, EntryResult } from '../contracts/entry.ts';
import type { JobResult } from '../contracts/job.ts';
import {
  asQueueJob,
  type CHUNK_JOB_NAME,
  type ChunkData,
  type ChunkResult,
  isLegacyJobData,
  type LegacyJobData,
} from '../contracts/queue-job.ts';
import type { JobQueueHandle } from './queue-cache.ts';

export type EntryJob = Job<EntryData, EntryResult, 'entry'>;
export type ChunkJob = Job<ChunkData, ChunkResult, typeof CHUNK_JOB_NAME>;
/** An older API's online job: its returnvalue, when it ran before the upgrade, is a JobResult. */
export type LegacyJob = Job<LegacyJobData, JobResult | undefined>;

export type TypedJob = { kind: 'entry'; job: EntryJob } | { kind: 'bulk'; job: ChunkJob } | { kind: 'legacy'; job: LegacyJob };

/** `job` by kind; undefined for a job of no kind we know. */
export function typedJob(job: Job): TypedJob | undefined {
  const known = asQueueJob(job);
  if (known?.name === 'entry') return { kind: 'entry', job: known as unknown as EntryJob };
  if (known) return { kind: 'bulk', job: known as unknown as ChunkJob };
  if (isLegacyJobData(job.data)) return { kind: 'legacy', job: job as LegacyJob };
  return undefined;
}

/** BullMQ job `id` of `queue` by kind; undefined when BullMQ does not hold it, or it is of no kind we know. */
export async function readTypedJob(queue: JobQueueHandle, id: string): Promise<TypedJob | undefined> {
  const job = await Job.fromId(queue, id);
  return job ? typedJob(job) : undefined;
}
