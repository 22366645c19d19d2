/**
 * Reading a job: only the tenant that submitted it may see it; anyone else gets the same 404 as
 * for an id that never existed, so ids reveal nothing across tenants.
 */
import { NotFoundError } from '../../infra/kernel/errors.ts';
import type { JobQueue, JobView } from '../ports.ts';

const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

export async function getJob(deps: { jobs: JobQueue }, input: { tenant: string; id: string }): Promise<JobView> {
  const view = JOB_ID_PATTERN.test(input.id) ? await deps.jobs.get(input.id) : null;
  if (!view || view.tenant !== input.tenant) throw new NotFoundError('job_not_found', `no job ${input.id}`);
  return view;
}
