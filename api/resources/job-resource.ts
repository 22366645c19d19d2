/**
 * A job's wire form (DESIGN §5): what GET /v1/jobs/{id}, its events stream and the job webhooks
 * send, with ISO 8601 times. Routes and the webhook event source both build it here, so neither
 * imports the other's folder.
 */
import type { JobTimings } from '../../infra/contracts/job.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import type { JobView } from '../ports.ts';

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
