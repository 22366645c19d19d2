/**
 * Reading a job: only the tenant that submitted it may see it; anyone else gets the same 404 as
 * for an id that never existed, so ids reveal nothing across tenants.
 */
import { NotFoundError } from '../../infra/kernel/errors.ts';
import type { JobTimings } from '../../infra/contracts/job.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import type { JobQueue, JobView } from '../ports.ts';

const JOB_ID_PATTERN = /^[A-Za-z0-9_-]{1,128}$/;

/** GET /v1/jobs/{id} (DESIGN §5). Times are ISO 8601. */
export interface JobResource {
  id: string;
  model: string;
  version: string;
  status: JobView['status'];
  outputs?: OipTensor[];
  error?: { code: string; message: string };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  timings?: JobTimings;
  /** Answered from the result cache at submit: no model ran for it (its timings are 0). */
  cached?: true;
}

export async function getJob(deps: { jobs: JobQueue }, input: { tenant: string; id: string }): Promise<JobView> {
  const view = JOB_ID_PATTERN.test(input.id) ? await deps.jobs.get(input.id) : null;
  if (!view || view.tenant !== input.tenant) throw new NotFoundError('job_not_found', `no job ${input.id}`);
  return view;
}

export function toJobResource(view: JobView): JobResource {
  const resource: JobResource = {
    id: view.id,
    model: view.model,
    version: view.version,
    status: view.status,
    createdAt: iso(view.createdAt),
  };
  if (view.result) resource.outputs = view.result.outputs;
  if (view.error) resource.error = view.error;
  if (view.startedAt !== undefined) resource.startedAt = iso(view.startedAt);
  if (view.finishedAt !== undefined) resource.finishedAt = iso(view.finishedAt);
  if (view.result) resource.timings = view.result.timings;
  if (view.cached) resource.cached = true;
  return resource;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
