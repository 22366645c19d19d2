/**
 * OIP sync inference through the same queue and batcher as async jobs: enqueue at high
 * priority, wait a bounded time. The outcome is a value, not an exception, because a timeout is
 * an expected answer (504 with the job id, so the caller can poll) rather than a fault.
 */
import type { InferResponse } from '../../infra/contracts/oip.ts';
import type { JobView } from '../ports.ts';
import { type SubmitJobDeps, type SubmitJobInput, submitJob } from './submit-job.ts';

export interface InferSyncDeps extends SubmitJobDeps {
  syncTimeoutMs: number;
}

export type InferSyncOutcome =
  | { kind: 'succeeded'; response: InferResponse }
  | { kind: 'failed'; jobId: string; error: { code: string; message: string } }
  | { kind: 'timeout'; jobId: string; status: JobView['status'] };

export async function inferSync(
  deps: InferSyncDeps,
  input: Omit<SubmitJobInput, 'kind' | 'priority'>,
  signal?: AbortSignal,
): Promise<InferSyncOutcome> {
  const job = await submitJob(deps, { ...input, kind: 'sync', priority: 'high' });
  const view = await deps.jobs.waitFor(job.id, deps.syncTimeoutMs, signal);
  if (view.status === 'queued' || view.status === 'running') return { kind: 'timeout', jobId: job.id, status: view.status };
  if (view.status === 'succeeded' && view.result) {
    return {
      kind: 'succeeded',
      response: { model_name: job.model, model_version: job.version, id: job.requestId ?? job.id, outputs: view.result.outputs },
    };
  }
  const error = view.error ?? { code: 'inference_failed', message: `job ${view.status} without a result` };
  return { kind: 'failed', jobId: job.id, error };
}
