/**
 * A request as the API shows it when BullMQ holds it inside a queue entry (infra/contracts/entry.ts):
 * the member's view, derived from the entry's state, its data, its outcome and its packed output
 * rows. The only place that turns an entry's output bytes into JSON numbers — the HTTP edge's
 * form — and only for the one member asked about.
 *
 *   entry queued                → queued
 *   entry running               → running (startedAt: when the worker took the entry)
 *   entry completed             → the member's outcome: succeeded (its rows of the outputs),
 *                                 failed (its own error), or skipped (its tombstone: canceled or expired)
 *   entry failed for good       → failed, with the entry's error (attempts spent, or its workers crashed)
 */
import { isEntryResult } from '../contracts/entry.ts';
import type { JobStatus, JobView } from '../contracts/job.ts';
import { aligned, type PackedSpec, rowsTensor, tensorData } from '../contracts/packed-tensors.ts';
import type { RedisClient } from '../redis/client.ts';
import { entryOutputsKey, jobTombstoneKey } from '../redis/keys.ts';
import { parseFailure } from './job-view.ts';
import type { EntryJob } from './queue-jobs.ts';

export interface MemberViewDeps {
  redis: Pick<RedisClient, 'get' | 'getBuffer'>;
  prefix: string;
}

/**
 * Member `memberId`'s view in entry `job` of queue `queue`, the entry being at `entryStatus`;
 * undefined when the entry has no such member.
 */
export async function memberView(
  deps: MemberViewDeps,
  queue: string,
  job: EntryJob,
  memberId: string,
  entryStatus: JobStatus,
): Promise<JobView | undefined> {
  const data = job.data;
  const member = data.members.find((m) => m.id === memberId);
  if (!member) return undefined;
  const view: JobView = {
    id: member.id,
    tenant: data.tenant,
    model: data.model,
    version: data.version,
    status: entryStatus,
    createdAt: member.submittedAt,
    attemptsMade: job.attemptsMade,
  };
  if (job.processedOn && entryStatus !== 'queued') view.startedAt = job.processedOn;
  if (entryStatus === 'queued' || entryStatus === 'running' || entryStatus === 'canceled') return view;
  if (job.finishedOn) view.finishedAt = job.finishedOn;
  if (entryStatus === 'failed') {
    view.error = parseFailure(job.failedReason);
    return view;
  }
  const result = job.returnvalue;
  const outcome = isEntryResult(result) ? result.members[memberId] : undefined;
  if (!outcome || !isEntryResult(result)) {
    view.status = 'failed';
    view.error = { code: 'inference_failed', message: 'the worker recorded no outcome for this job' };
    return view;
  }
  if (outcome.status === 'skipped') {
    const tomb = await deps.redis.get(jobTombstoneKey(deps.prefix, queue, memberId));
    if (tomb !== null) return JSON.parse(tomb) as JobView;
    return { ...view, status: 'canceled', error: { code: 'canceled', message: 'canceled before it started' } };
  }
  if (outcome.status === 'failed') {
    view.status = 'failed';
    view.error = outcome.error;
    return view;
  }
  const outputs = await memberOutputs(deps, queue, job.id ?? '', result.outputs, outcome.row, outcome.row + member.rows);
  view.status = 'succeeded';
  view.result = { outputs, timings: outcome.timings, workerId: result.workerId };
  return view;
}

/** Rows [start, end) of each output, as JSON tensors. */
async function memberOutputs(deps: MemberViewDeps, queue: string, entryId: string, specs: PackedSpec[], start: number, end: number) {
  if (specs.length === 0) return [];
  const raw = await deps.redis.getBuffer(entryOutputsKey(deps.prefix, queue, entryId));
  if (raw === null) throw new Error(`the outputs of entry ${entryId} are gone`);
  const bytes = aligned(raw);
  return specs.map((spec) => rowsTensor(spec.name, spec.datatype, spec.shape, tensorData(spec, bytes), start, end, spec.batchAxis));
}
