/**
 * A BullMQ job as the API shows it (`JobView`: GET /v1/jobs/{id}, SSE, sync waits, webhook
 * payloads): its status from BullMQ's state, its result, its failure split into code and
 * message. Also the view of a job answered from the result cache, which BullMQ never holds.
 */
import type { JobState } from 'bullmq';
import type { QueuedRequest } from '../contracts/entry.ts';
import type { JobResult, JobStatus, JobView } from '../contracts/job.ts';
import type { LegacyJob } from './queue-jobs.ts';

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

/** The job's status in BullMQ's state `state`; undefined when BullMQ does not know the job. */
export function statusOf(state: JobState | 'unknown'): JobStatus | undefined {
  return state === 'unknown' ? undefined : STATUS[state];
}

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL.has(status);
}

/**
 * An online job from before queue entries as GET /v1/jobs/{id} shows it, at the moment of `status`
 * (also the webhook payload's): one that ran before the upgrade, or one the workers failed since
 * (infra/contracts/queue-job.ts, the migration).
 */
export function legacyJobView(job: LegacyJob, status: JobStatus): JobView {
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

/** A job answered from the cache: created, started and finished at submit, by no worker's pass. */
export function cachedView(
  jobId: string,
  data: Pick<QueuedRequest, 'tenant' | 'model' | 'version' | 'submittedAt'>,
  outputs: JobResult['outputs'],
  workerId: string,
): JobView {
  const at = data.submittedAt;
  return {
    id: jobId,
    tenant: data.tenant,
    model: data.model,
    version: data.version,
    status: 'succeeded',
    result: { outputs, timings: { queueMs: 0, inferMs: 0, batchRows: 0 }, workerId },
    createdAt: at,
    startedAt: at,
    finishedAt: at,
    attemptsMade: 0,
    cached: true,
  };
}

/**
 * The reason BullMQ gives a job whose lock expired more often than the worker's maxStalledCount
 * forgives (its moveStalledJobsToWait script; worker/intake.ts MAX_WORKER_CRASHES).
 */
export const STALLED_TOO_OFTEN = 'job stalled more than allowable limit';

/**
 * The worker fails jobs with `code: message` (e.g. `invalid_input: …`, worker/intake.ts); BullMQ's
 * own stalled-job failure is `worker_crashed`; any other reason is an inference failure
 * carrying the reason as its message.
 */
export function parseFailure(reason: string | undefined): { code: string; message: string } {
  const text = reason ?? '';
  if (text === STALLED_TOO_OFTEN) {
    return {
      code: 'worker_crashed',
      message:
        'the workers that took this job twice stopped while holding it (they died or stopped responding past their lock); it was not handed to another',
    };
  }
  const match = /^([a-z][a-z0-9]*(?:_[a-z0-9]+)*): ([\s\S]*)$/.exec(text);
  if (match) return { code: match[1] as string, message: match[2] as string };
  return { code: 'inference_failed', message: text || 'inference failed' };
}
