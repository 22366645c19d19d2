/**
 * A job's wire form (DESIGN §5): what GET /v1/jobs/{id}, its events stream and the job webhooks
 * send, with ISO 8601 times. Routes and the webhook event source both build it here, so neither
 * imports the other's folder.
 */
import type { JobTimings } from '../../infra/contracts/job.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { jsonParts, outputElements } from '../../infra/contracts/tensor-json.ts';
import type { JobView } from '../ports.ts';
import type { WaitReason } from '../use-cases/wait-reason.ts';

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
  /** A queued job: why it waits (api/use-cases/wait-reason.ts); absent when it could not be read. */
  waiting?: WaitReason;
  /** In an event (SSE, a job webhook), instead of `outputs` past MAX_JSON_OUTPUT_ELEMENTS: how many, and how to read them. */
  outputsOmitted?: { elements: number; message: string };
}

export function toJobResource(view: JobView, waiting?: WaitReason): JobResource {
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
  if (waiting && view.status === 'queued') resource.waiting = waiting;
  return resource;
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * A job's resource for an event (GET /v1/jobs/{id}/events, the job webhooks), which cannot turn
 * into a GET's 413: past `maxJsonOutputElements` (counted from the outputs' shapes, nothing
 * decoded) it leaves the outputs out, and `outputsOmitted` says how many and how to read them
 * binary. Unbounded when `maxJsonOutputElements` is absent.
 */
export function boundedJobResource(view: JobView, maxJsonOutputElements?: number, waiting?: WaitReason): JobResource {
  const resource = toJobResource(view, waiting);
  const elements = outputElements(resource.outputs ?? []);
  if (maxJsonOutputElements !== undefined && elements > maxJsonOutputElements) {
    delete resource.outputs;
    resource.outputsOmitted = {
      elements,
      message: `the outputs hold ${elements} elements, more than the ${maxJsonOutputElements} one JSON answer may carry (MAX_JSON_OUTPUT_ELEMENTS); read them in binary form: GET /v1/jobs/${view.id} with Accept: application/octet-stream, or ?binary_data_output=true`,
    };
  }
  return resource;
}

/** `boundedJobResource` as JSON text, written from the packed outputs (tensor-json.ts): no JS array of numbers is made. */
export function jobEventJson(view: JobView, maxJsonOutputElements?: number, waiting?: WaitReason): string {
  return [...jsonParts(boundedJobResource(view, maxJsonOutputElements, waiting))].join('');
}
