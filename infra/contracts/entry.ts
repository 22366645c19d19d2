/**
 * Queue entries (DESIGN §4; issue 15's coalescing): online requests reach the workers as
 * entries, one BullMQ job each (job name `ENTRY_JOB_NAME`), carrying one or more requests — its
 * *members* — so Redis and BullMQ work is paid per entry, not per request. Under load the API
 * gathers concurrent requests that share everything a forward pass and a failure domain need
 * (tenant, model version, priority, the inputs' names, datatypes and non-batch dimensions, the
 * requested outputs) into one entry (a group commit: infra/queue/entry-writer.ts); with light
 * traffic each entry has one member and nothing waits.
 *
 * Every member keeps what a job has: its own id (the BullMQ job id is the entry's, never shown),
 * status, events, webhook, deadline, cache entry, failure and cancel. Where each lives:
 *
 *   member spec        EntryData.members[i]                    the BullMQ job's data
 *   its input rows     rows [row, row+rows) of every tensor in  `<p>:{q}:in:<entryId>` (binary; packed-tensors.ts)
 *                      EntryData.inputs, in member order
 *   its index key      `<p>:job:<memberId>` = `<queue>#<entryId>`   (job-index.ts; a final view once it ended outside BullMQ)
 *   canceled/expired   `<p>:{q}:skip:<entryId>` set + its tombstone   (tombstones.ts: only while the entry is queued)
 *   its outcome        EntryResult.members[memberId]           the BullMQ job's returnvalue
 *   its output rows    rows [row, row+rows) of EntryResult.outputs in `<p>:{q}:out:<entryId>` (binary)
 *
 * A member's status: the entry's while it is queued or running (unless the member was skipped);
 * once the entry completed, its outcome; once the entry failed for good (its attempts spent, or
 * its workers crashed), the entry's failure. An entry retried after a crash runs again whole:
 * at-least-once per member, as for a job.
 */
import type { JobTimings } from './job.ts';
import type { OipRequestedOutput } from './oip.ts';
import type { PackedSpec, TensorToPack } from './packed-tensors.ts';
import type { WebhookSpec } from './webhook.ts';

/** The BullMQ job name of an entry (a queue's other kind is a bulk chunk: queue-job.ts). */
export const ENTRY_JOB_NAME = 'entry';

/** `ent_` + 20 URL-safe characters: never shown to users, who see member ids. */
export const ENTRY_ID_PREFIX = 'ent_';

export interface EntryMember {
  /** The request's job id (`job_…`), the one its user holds. */
  id: string;
  rows: number;
  /** Epoch ms: when this request was accepted (its `createdAt`). */
  submittedAt: number;
  /** The member must *start* within this many ms of its submit, or fails with deadline_exceeded (it alone). */
  timeoutMs?: number;
  webhook?: WebhookSpec;
  /**
   * The result-cache key's digest (infra/redis/result-cache.ts), present when this member's
   * result is to be stored: computed once, at the API, over the packed bytes.
   */
  cacheDigest?: string;
}

export interface EntryData {
  /** Marks the data as an entry's (a bulk chunk's ChunkData has no `entry`). */
  entry: 1;
  tenant: string;
  model: string;
  version: string;
  /** The earliest member's submit, epoch ms. */
  submittedAt: number;
  /** In row order: member i's rows follow member i-1's in every input. */
  members: EntryMember[];
  /** Every member's rows of each input, in `<p>:{q}:in:<entryId>`. */
  inputs: PackedSpec[];
  /** Shared by every member (part of the coalescing key); all the model's outputs when absent. */
  outputs?: OipRequestedOutput[];
}

export type MemberOutcome =
  /** `row`: this member's first row in EntryResult.outputs. */
  | { status: 'succeeded'; row: number; timings: JobTimings }
  | { status: 'failed'; error: { code: string; message: string }; timings?: Pick<JobTimings, 'queueMs'> }
  /** Canceled or expired by the API before the worker took the entry: its tombstone holds its view. */
  | { status: 'skipped' };

export interface EntryResult {
  entry: 1;
  workerId: string;
  /** The rows of succeeded members only, in member order, in `<p>:{q}:out:<entryId>`. */
  outputs: PackedSpec[];
  members: Record<string, MemberOutcome>;
}

export function isEntryData(data: unknown): data is EntryData {
  return typeof data === 'object' && data !== null && (data as { entry?: unknown }).entry === 1;
}

export function isEntryResult(value: unknown): value is EntryResult {
  return typeof value === 'object' && value !== null && (value as { entry?: unknown }).entry === 1;
}

/** The index key's value for a member: `<queue>#<entryId>`. Queue names hold no '#'. */
export function memberLocation(queue: string, entryId: string): string {
  return `${queue}#${entryId}`;
}

/** The queue and entry of an index value; a bare queue name (a job from before entries) is its own entry. */
export function parseMemberLocation(value: string, jobId: string): { queue: string; entryId: string } {
  const hash = value.lastIndexOf('#');
  if (hash < 0) return { queue: value, entryId: jobId };
  return { queue: value.slice(0, hash), entryId: value.slice(hash + 1) };
}

/**
 * One request as the API hands it to the queue (infra/queue/job-queue.ts `enqueue`): validated,
 * its inputs already typed arrays (packed-tensors.ts `fromJsonData`). The writer decides which
 * entry it joins.
 */
export interface QueuedRequest {
  tenant: string;
  model: string;
  version: string;
  submittedAt: number;
  rows: number;
  inputs: TensorToPack[];
  outputs?: OipRequestedOutput[];
  webhook?: WebhookSpec;
  timeoutMs?: number;
  /** Present when the result is to be stored in the result cache. */
  cacheDigest?: string;
}
