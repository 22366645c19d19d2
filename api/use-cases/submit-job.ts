/**
 * Submitting a job: resolve the model version, validate the OIP request against its manifest,
 * enqueue. Shared by the async route and sync inference, so both validate the same way.
 */
import { randomBytes } from 'node:crypto';
import { InvalidInputError, NotFoundError } from '../../infra/errors.ts';
import { PRIORITIES, type JobData, type Priority } from '../../infra/job-contract.ts';
import { MODEL_NAME_PATTERN, VERSION_PATTERN, type ModelManifest } from '../../infra/manifest.ts';
import type { SubmitKind } from '../../infra/metrics.ts';
import { validateInferRequest } from '../../infra/oip-validate.ts';
import type { Clock, DeploymentLookup, JobQueue, ModelCatalog } from '../ports.ts';

export interface SubmitJobDeps {
  jobs: JobQueue;
  catalog: ModelCatalog;
  deployments: DeploymentLookup;
  clock: Clock;
  newId: () => string;
  maxRows?: number;
  onSubmitted?: (e: { model: string; version: string; kind: SubmitKind }) => void;
}

export interface SubmitJobInput {
  tenant: string;
  model: string;
  /** From the URL; wins over `body.version`. */
  version?: string;
  body: unknown;
  kind: SubmitKind;
  /** Overrides `body.priority` (sync inference is always high). */
  priority?: Priority;
}

export interface SubmittedJob {
  id: string;
  model: string;
  version: string;
  createdAt: number;
  rows: number;
  /** The OIP request id, when the caller sent one. */
  requestId?: string;
}

/** `job_` + 20 URL-safe characters (120 random bits). */
export function newJobId(): string {
  return `job_${randomBytes(15).toString('base64url')}`;
}

export async function submitJob(deps: SubmitJobDeps, input: SubmitJobInput): Promise<SubmittedJob> {
  const body = input.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidInputError('invalid_body', 'request body must be a JSON object');
  }
  const fields = body as Record<string, unknown>;
  const priority = input.priority ?? parsePriority(fields.priority);
  const manifest = await resolveManifest(deps, input.model, input.version ?? parseVersion(fields.version));
  const request = validateInferRequest(body, manifest, { maxRows: deps.maxRows });
  const id = deps.newId();
  const createdAt = deps.clock.now();
  const data: JobData = {
    tenant: input.tenant,
    model: manifest.name,
    version: manifest.version,
    inputs: request.inputs,
    submittedAt: createdAt,
  };
  if (request.outputs) data.outputs = request.outputs;
  if (request.parameters) data.parameters = request.parameters;
  if (request.id !== undefined) data.requestId = request.id;
  await deps.jobs.enqueue(data, { priority, jobId: id });
  deps.onSubmitted?.({ model: manifest.name, version: manifest.version, kind: input.kind });
  const submitted: SubmittedJob = { id, model: manifest.name, version: manifest.version, createdAt, rows: request.rows };
  if (request.id !== undefined) submitted.requestId = request.id;
  return submitted;
}

/**
 * The version asked for, else the deployed one, else the registry's latest (a published model
 * that is not deployed still takes jobs; they wait for a pool). Unknown everywhere → 404.
 */
export async function resolveManifest(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments'>,
  model: string,
  version: string | undefined,
): Promise<ModelManifest> {
  if (!MODEL_NAME_PATTERN.test(model)) throw new NotFoundError('model_not_found', `no model named "${model}"`);
  const chosen = version ?? (await deps.deployments.get(model))?.version;
  return deps.catalog.getManifest(model, chosen);
}

function parsePriority(raw: unknown): Priority {
  if (raw === undefined) return 'normal';
  if (typeof raw === 'string' && Object.hasOwn(PRIORITIES, raw)) return raw as Priority;
  throw new InvalidInputError('invalid_body', `"priority" must be one of ${Object.keys(PRIORITIES).join(', ')}`);
}

function parseVersion(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'string' && VERSION_PATTERN.test(raw)) return raw;
  throw new InvalidInputError('invalid_body', '"version" must be a version name such as "1" or "2024-05-01"');
}
