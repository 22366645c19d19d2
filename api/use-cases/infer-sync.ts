/**
 * OIP sync inference through the same queue and batcher as async jobs: enqueue (high priority
 * unless the request's `parameters.priority` says otherwise), wait a bounded time. The outcome
 * is a value, not an exception, because a timeout is an expected answer (504 with the job id, so
 * the caller can poll, and why nothing answered: wait-reason.ts) rather than a fault. Shared by
 * the HTTP route (JSON or binary tensors) and the gRPC service: both hand in the JSON header and
 * any binary inputs' bytes.
 */
import { PRIORITIES, type Priority } from '../../infra/contracts/job.ts';
import type { InferResponse } from '../../infra/contracts/oip.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { JobView } from '../ports.ts';
import { type SubmitJobDeps, type SubmitJobInput, submitJob } from './submit-job.ts';
import { timeoutReason } from './wait-reason.ts';

export interface InferSyncDeps extends SubmitJobDeps {
  syncTimeoutMs: number;
}

export type InferSyncOutcome =
  /** `jobId`: the job that answered, kept for JOB_RETENTION_S (its outputs can be read again from GET /v1/jobs/{id}). */
  | { kind: 'succeeded'; jobId: string; response: InferResponse }
  | { kind: 'failed'; jobId: string; error: { code: string; message: string } }
  /** `reason`: why nothing answered in time, as a clause (wait-reason.ts); absent when it could not be read. */
  | { kind: 'timeout'; jobId: string; status: JobView['status']; reason?: string };

export async function inferSync(
  deps: InferSyncDeps,
  input: Omit<SubmitJobInput, 'kind' | 'priority'>,
  signal?: AbortSignal,
): Promise<InferSyncOutcome> {
  const priority = priorityParameter(input.body) ?? 'high';
  const job = await submitJob(deps, { ...input, kind: 'sync', priority });
  const view = await deps.jobs.waitFor(job.id, deps.syncTimeoutMs, signal);
  if (view.status === 'queued' || view.status === 'running') {
    const reason = await timeoutReason(deps, job, view.status);
    return { kind: 'timeout', jobId: job.id, status: view.status, ...(reason ? { reason } : {}) };
  }
  if (view.status === 'succeeded' && view.result) {
    return {
      kind: 'succeeded',
      jobId: job.id,
      response: { model_name: job.model, model_version: job.version, id: job.requestId ?? job.id, outputs: view.result.outputs },
    };
  }
  const error = view.error ?? { code: 'inference_failed', message: `job ${view.status} without a result` };
  return { kind: 'failed', jobId: job.id, error };
}

/** Triton's priority levels (1 is the highest; 0 means the default) onto warmpool's three. */
const LEVELS: Record<number, Priority> = { 1: 'high', 2: 'normal' };

/**
 * The request's `parameters.priority`: a warmpool priority name (`high`, `normal`, `low`), or a
 * Triton-style level as tritonclient sends it (0 = the default, 1 = high, 2 = normal, 3 and
 * above = low). Undefined when absent.
 */
export function priorityParameter(body: unknown): Priority | undefined {
  if (typeof body !== 'object' || body === null) return undefined;
  const parameters = (body as { parameters?: unknown }).parameters;
  if (typeof parameters !== 'object' || parameters === null) return undefined;
  const raw = (parameters as { priority?: unknown }).priority;
  if (raw === undefined || raw === 0) return undefined;
  if (typeof raw === 'string' && Object.hasOwn(PRIORITIES, raw)) return raw as Priority;
  if (typeof raw === 'number' && Number.isSafeInteger(raw) && raw > 0) return LEVELS[raw] ?? 'low';
  throw new InvalidInputError(
    'invalid_body',
    `parameters.priority must be one of ${Object.keys(PRIORITIES).join(', ')} or a level (1 = high, 2 = normal, 3 and above = low), got ${JSON.stringify(raw)}`,
  );
}
