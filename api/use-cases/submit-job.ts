/**
 * Submitting a job: resolve the model version, validate the OIP request against its manifest
 * and the job options (priority, version, deadline, webhook), then enqueue. Shared by the async
 * route and sync inference, so both validate the same way.
 *
 * With an Idempotency-Key the key is claimed only after validation (a rejected request holds
 * no key, like Stripe) and released if enqueueing fails, so a retry can claim it again.
 */
import { createHash, randomBytes } from 'node:crypto';
import { checkAdmission, deploymentBacklog } from '../../infra/admission.ts';
import { InvalidInputError, NotFoundError, OverloadedError } from '../../infra/errors.ts';
import type { IdempotencyStore } from '../../infra/idempotency.ts';
import { PRIORITIES, type JobData, type Priority } from '../../infra/job-contract.ts';
import { MODEL_NAME_PATTERN, VERSION_PATTERN, type ModelManifest } from '../../infra/manifest.ts';
import type { SubmitKind } from '../../infra/metrics.ts';
import { validateInferRequest } from '../../infra/oip-validate.ts';
import { chooseVersion } from '../../infra/traffic-split.ts';
import type { Clock, DeploymentLookup, JobQueue, ModelCatalog } from '../ports.ts';
import { parseWebhookSpec } from '../webhooks/webhook-spec.ts';

export interface SubmitJobDeps {
  jobs: JobQueue;
  catalog: ModelCatalog;
  deployments: DeploymentLookup;
  clock: Clock;
  newId: () => string;
  idempotency: IdempotencyStore;
  /** Hosts a webhook may name even when they are private (WEBHOOK_ALLOWED_PRIVATE_HOSTS). */
  webhookAllowedPrivateHosts: readonly string[];
  maxRows?: number;
  onSubmitted?: (e: { model: string; version: string; kind: SubmitKind }) => void;
  /** Picks a version by the deployment's traffic split; Math.random when absent. */
  random?: () => number;
}

/** The longest start deadline a job may ask for: a day. */
export const MAX_TIMEOUT_MS = 86_400_000;

export interface SubmitJobInput {
  tenant: string;
  model: string;
  /** From the URL; wins over `body.version`. */
  version?: string;
  body: unknown;
  kind: SubmitKind;
  /** Overrides `body.priority` (sync inference is always high). */
  priority?: Priority;
  /** Validated by the route (parseIdempotencyKey). */
  idempotencyKey?: string;
}

export interface SubmittedJob {
  id: string;
  model: string;
  version: string;
  createdAt: number;
  rows: number;
  /** The OIP request id, when the caller sent one. */
  requestId?: string;
  /** True when an Idempotency-Key matched an earlier request: this is that request's job. */
  replayed?: boolean;
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
  const timeoutMs = parseTimeoutMs(fields.timeoutMs);
  const webhook = parseWebhookSpec(fields.webhook, { allowedPrivateHosts: deps.webhookAllowedPrivateHosts });
  const degradable = parseDegradable(fields.degradable);
  const { manifest, deployment } = await resolveTarget(deps, input.model, input.version ?? parseVersion(fields.version));
  const request = validateInferRequest(body, manifest, { maxRows: deps.maxRows });
  const admitted = await admit(deps, deployment, degradable);
  const data: JobData = {
    tenant: input.tenant,
    model: manifest.name,
    version: manifest.version,
    inputs: request.inputs,
    submittedAt: deps.clock.now(),
  };
  if (request.outputs) data.outputs = request.outputs;
  if (request.parameters) data.parameters = request.parameters;
  if (request.id !== undefined) data.requestId = request.id;
  if (timeoutMs !== undefined) data.timeoutMs = timeoutMs;
  if (webhook) data.webhook = webhook;
  const submit = () => enqueue(deps, data, admitted === 'low' ? 'low' : priority, request.rows, input.kind);
  if (input.idempotencyKey === undefined) return submit();

  const claim = await deps.idempotency.claim<SubmittedJob>(input.tenant, input.idempotencyKey, fingerprint(input));
  if (claim.kind === 'replay') return { ...claim.value, replayed: true };
  let job: SubmittedJob;
  try {
    job = await submit();
  } catch (err) {
    await claim.release().catch(() => undefined); // the key then expires on its own
    throw err;
  }
  await claim.commit(job);
  return job;
}

async function enqueue(deps: SubmitJobDeps, data: JobData, priority: Priority, rows: number, kind: SubmitKind): Promise<SubmittedJob> {
  const id = deps.newId();
  await deps.jobs.enqueue(data, { priority, jobId: id });
  deps.onSubmitted?.({ model: data.model, version: data.version, kind });
  const submitted: SubmittedJob = { id, model: data.model, version: data.version, createdAt: data.submittedAt, rows };
  if (data.requestId !== undefined) submitted.requestId = data.requestId;
  return submitted;
}

/**
 * What makes two submissions "the same request" for an Idempotency-Key: the model and version
 * asked for (not the one resolved: a redeploy in between must not turn a retry into a
 * conflict) and the body, as canonical JSON (object keys sorted), hashed.
 */
export function fingerprint(input: Pick<SubmitJobInput, 'model' | 'version' | 'body'>): string {
  const canonical = JSON.stringify({ model: input.model, version: input.version ?? null, body: input.body }, sortKeys);
  return createHash('sha256').update(canonical).digest('hex');
}

function sortKeys(_key: string, value: unknown): unknown {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return Object.fromEntries(entries);
}

/** The Idempotency-Key header: 1 to 255 printable ASCII characters. */
export function parseIdempotencyKey(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  if (!/^[\x20-\x7e]{1,255}$/.test(raw)) {
    throw new InvalidInputError(
      'invalid_idempotency_key',
      `Idempotency-Key must be 1 to 255 printable ASCII characters (got ${raw.length} characters${/[^\x20-\x7e]/.test(raw) ? ', some not printable' : ''})`,
    );
  }
  return raw;
}

/**
 * The version asked for, else the deployed one, else the registry's latest (a published model
 * that is not deployed still takes jobs; they wait for a pool). Unknown everywhere → 404.
 */
export async function resolveManifest(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random'>,
  model: string,
  version: string | undefined,
): Promise<ModelManifest> {
  return (await resolveTarget(deps, model, version)).manifest;
}

type TargetDeployment = Awaited<ReturnType<DeploymentLookup['get']>>;

/**
 * The version a job runs on: the one asked for, else one drawn by the deployment's traffic
 * split (per job), else the registry's latest (a published model that is not deployed still
 * takes jobs; they wait for a pool). Unknown everywhere → 404.
 */
async function resolveTarget(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random'>,
  model: string,
  version: string | undefined,
): Promise<{ manifest: ModelManifest; deployment: TargetDeployment }> {
  if (!MODEL_NAME_PATTERN.test(model)) throw new NotFoundError('model_not_found', `no model named "${model}"`);
  const deployment = await deps.deployments.get(model);
  const chosen = version ?? (deployment ? chooseVersion(deployment, deps.random ?? Math.random) : undefined);
  return { manifest: await deps.catalog.getManifest(model, chosen), deployment };
}

/**
 * Admission against the deployment's backlog bound (only when it has one, so unbounded
 * deployments pay no extra Redis round trip): refused with 503 + Retry-After, or, for a
 * request marked `degradable`, admitted at low priority.
 */
async function admit(deps: Pick<SubmitJobDeps, 'jobs'>, deployment: TargetDeployment, degradable: boolean): Promise<'normal' | 'low'> {
  if (deployment?.backlogMax === undefined) return 'normal';
  const depth = await deploymentBacklog(deployment, (m, v) => deps.jobs.depth(m, v));
  const decision = checkAdmission({ depth, backlogMax: deployment.backlogMax, lowPriorityOk: degradable });
  if (!decision.admit) {
    throw new OverloadedError(
      'backlog_full',
      `${deployment.model} has ${depth} jobs queued, at its bound of ${deployment.backlogMax}; retry after ${decision.retryAfterS} s (or send "degradable": true to queue at low priority)`,
      decision.retryAfterS,
    );
  }
  return decision.priority === 'low' ? 'low' : 'normal';
}

function parseDegradable(raw: unknown): boolean {
  if (raw === undefined) return false;
  if (typeof raw === 'boolean') return raw;
  throw new InvalidInputError('invalid_body', `"degradable" must be true or false, got ${JSON.stringify(raw)}`);
}

function parsePriority(raw: unknown): Priority {
  if (raw === undefined) return 'normal';
  if (typeof raw === 'string' && Object.hasOwn(PRIORITIES, raw)) return raw as Priority;
  throw new InvalidInputError('invalid_body', `"priority" must be one of ${Object.keys(PRIORITIES).join(', ')}`);
}

function parseTimeoutMs(raw: unknown): number | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'number' && Number.isInteger(raw) && raw >= 1 && raw <= MAX_TIMEOUT_MS) return raw;
  throw new InvalidInputError(
    'invalid_body',
    `"timeoutMs" must be an integer number of milliseconds from 1 to ${MAX_TIMEOUT_MS}, got ${JSON.stringify(raw)}`,
  );
}

function parseVersion(raw: unknown): string | undefined {
  if (raw === undefined) return undefined;
  if (typeof raw === 'string' && VERSION_PATTERN.test(raw)) return raw;
  throw new InvalidInputError('invalid_body', '"version" must be a version name such as "1" or "2024-05-01"');
}
