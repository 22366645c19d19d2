/**
 * Canceling a job (DELETE /v1/jobs/{id}): only a queued job can be canceled; it then reads
 * `canceled` for as long as finished jobs are kept. Canceling a canceled job is a success again
 * (DELETE is idempotent); a job a worker has taken, or one that has ended, is left alone (409).
 */
import { InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import type { JobQueue, JobView } from '../ports.ts';
import { getJob } from './get-job.ts';

export interface JobCanceler {
  /** The job's view after the attempt: `canceled` when it was queued (or already canceled); null when unknown. */
  cancel(jobId: string): Promise<JobView | null>;
}

export async function cancelJob(deps: { jobs: JobQueue & JobCanceler }, input: { tenant: string; id: string }): Promise<JobView> {
  await getJob(deps, input); // the same 404 for another tenant's job as for no job
  const view = await deps.jobs.cancel(input.id);
  if (!view) throw new NotFoundError('job_not_found', `no job ${input.id}`);
  switch (view.status) {
    case 'canceled':
      return view;
    case 'succeeded':
    case 'failed':
      throw new InvalidInputError('job_finished', `job ${input.id} has already ${view.status}; only a queued job can be canceled`, {
        status: 409,
      });
    default:
      throw new InvalidInputError('job_running', `job ${input.id} is running on a worker; only a queued job can be canceled`, {
        status: 409,
      });
  }
}
