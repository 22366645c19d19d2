/**
 * The jobs a model version's queue carries (DESIGN §4): two kinds, told apart by BullMQ's job
 * name, each with its data and its returnvalue:
 *
 *   name      data        returnvalue   written by                     run by
 *   `entry`   EntryData   EntryResult   infra/queue/entry-writer.ts    worker/entry-intake.ts
 *   `bulk`    ChunkData   ChunkResult   infra/queue/chunk-queue.ts     worker/bulk-chunk.ts
 *
 * Nothing else is run. Migration (issue 27): before queue entries the API queued each online
 * request as a job of its own, named `infer`, its rows as JSON inside (`LegacyJobData` keeps what
 * such a job still tells a reader). No warmpool writes one any more; one still queued when its
 * workers are upgraded is failed at once, never run, with `OUTDATED_JOB_FAILURE` (its user starts
 * it again), as chunk jobs from before workers read their own rows are (worker/intake.ts). The API
 * still shows such a job, its events still reach its webhook, and its tenant's open-job slot is
 * released.
 */
import type { BulkChunkSpec, BulkPartResult } from './bulk.ts';
import { ENTRY_JOB_NAME, type EntryData, type EntryResult, isEntryData } from './entry.ts';
import type { JobTimings } from './job.ts';
import type { WebhookSpec } from './webhook.ts';

/** BullMQ's job name of a bulk chunk. */
export const CHUNK_JOB_NAME = 'bulk';

/**
 * A bulk run's chunk: where its rows are and where its part goes (`bulk`), never rows. Under
 * `bulk` for the chunk jobs queued before this type (they also carried `inputs: []` and
 * `cache: false`, which nothing reads: such a job still runs).
 */
export interface ChunkData {
  tenant: string;
  model: string;
  version: string;
  /** Epoch ms: when the driver queued the chunk. */
  submittedAt: number;
  bulk: BulkChunkSpec;
}

/** What a chunk job returns once its part is written (the driver reads `part`). */
export interface ChunkResult {
  part: BulkPartResult;
  timings: JobTimings;
  /** The worker that ran it, for tracing. */
  workerId: string;
}

/** Each kind's data and returnvalue, by BullMQ job name. */
export interface QueueJobKinds {
  [ENTRY_JOB_NAME]: { data: EntryData; result: EntryResult };
  [CHUNK_JOB_NAME]: { data: ChunkData; result: ChunkResult };
}
export type QueueJobName = keyof QueueJobKinds;
export type QueueJobData = QueueJobKinds[QueueJobName]['data'];
export type QueueJobResult = QueueJobKinds[QueueJobName]['result'];

/** A queue job, its data typed by its name (a BullMQ Job narrowed by `asQueueJob`). */
export type QueueJob = { [N in QueueJobName]: { name: N; data: QueueJobKinds[N]['data'] } }[QueueJobName];

/** `job` (a BullMQ Job) as one of the two kinds, when its name and data say it is one; undefined otherwise. */
export function asQueueJob<J extends { name: string; data: unknown }>(job: J): (J & QueueJob) | undefined {
  const known = job.name === ENTRY_JOB_NAME ? isEntryData(job.data) : job.name === CHUNK_JOB_NAME && isChunkData(job.data);
  return known ? (job as J & QueueJob) : undefined;
}

export function isChunkData(data: unknown): data is ChunkData {
  if (typeof data !== 'object' || data === null) return false;
  const { bulk, tenant } = data as { bulk?: unknown; tenant?: unknown };
  return typeof tenant === 'string' && typeof bulk === 'object' && bulk !== null;
}

/** The BullMQ name of an online job from before queue entries (migration only: see the header). */
export const LEGACY_JOB_NAME = 'infer';

/** What an online job from before queue entries still tells the API and the webhook source. */
export interface LegacyJobData {
  tenant: string;
  model: string;
  version: string;
  submittedAt: number;
  timeoutMs?: number;
  webhook?: WebhookSpec;
}

/** An online job from before queue entries (its data may carry more: nothing reads it). */
export function isLegacyJobData(data: unknown): data is LegacyJobData {
  if (typeof data !== 'object' || data === null) return false;
  const d = data as Partial<Record<keyof LegacyJobData, unknown>>;
  return typeof d.tenant === 'string' && typeof d.model === 'string' && typeof d.version === 'string' && typeof d.submittedAt === 'number';
}

/**
 * BullMQ's failedReason for a job of neither kind (shown by the API as `invalid_input` and this
 * message, infra/queue/job-view.ts `parseFailure`): what its user is to do.
 */
export const OUTDATED_JOB_FAILURE =
  'invalid_input: this job was queued by an older warmpool (before queue entries) and cannot run on this version; start it again';
