/**
 * Submitting a job: resolve the model version, validate the OIP request against its manifest
 * and the job options (priority, version, deadline, webhook, cache, degradable), check that
 * something serves that version, then place it. Shared by the async route, sync inference and
 * gRPC, so all validate and place the same way.
 *
 * Refusals, in order: a top-level field the request does not have (400 `unknown_field`,
 * known-fields.ts); a bad option; a model or version not in the registry (404); a request its
 * manifest does not take (400); a version no deployment lists and no worker serves (409
 * `model_not_deployed`, serving-check.ts: such a job would wait forever).
 *
 * Placing, in order:
 * 1. Result cache (infra/redis/result-cache.ts). Unless the body says `"cache": false` or names a
 *    webhook, the (model, version, model bytes, inputs, requested outputs) digest is looked up;
 *    a hit is recorded as a job that already succeeded (`cached: true`, timings 0) and no model
 *    runs. Hits skip admission: they add nothing to any queue. Webhook jobs skip the lookup
 *    because the dispatcher only hears of jobs that go through BullMQ, so a cached job would
 *    never be delivered. `"cache": false` also tells the worker not to store the result.
 * 2. Admission against the deployment's `backlogMax` (api/use-cases/admission.ts), when it has one:
 *      under the bound                                       → the drawn version's queue
 *      over it, `"degradable": true`, the deployment names
 *        a `fallback` (infra/deployments/deployment-store.ts)                 → the fallback's queue (step 3)
 *      over it, `"degradable": true`, no fallback, under 2×  → the drawn version's queue, low priority
 *      otherwise                                             → 503 backlog_full + Retry-After
 * 3. Fallback. The job goes to the fallback model's version (the one the deployment names,
 *    else the fallback's own deployment split, else its latest) with the request's priority;
 *    the 202 and the job resource name that model and version. The same body must validate
 *    against the fallback's manifest, else 422 `fallback_incompatible` naming the problem
 *    (never silently the primary). The fallback's own cache entry is looked up (as in 1) and
 *    its own `backlogMax` holds strictly (503, no further degradation). A fallback that is not
 *    in the registry, or that nothing serves (serving-check.ts), counts as no fallback.
 *
 * With an Idempotency-Key the key is claimed only after validation (a rejected request holds
 * no key, like Stripe) and released if placing fails, so a retry can claim it again. Placing
 * runs under the claim, so a retry of an accepted request replays its job even while the
 * backlog is full, and a replayed cache hit is the same (succeeded) job.
 */
import { createHash } from 'node:crypto';
import type { QueuedRequest } from '../../infra/contracts/entry.ts';
import { PRIORITIES, type Priority } from '../../infra/contracts/job.ts';
import { MODEL_NAME_PATTERN, type ModelManifest, VERSION_PATTERN } from '../../infra/contracts/manifest.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { type ValidatedInferRequest, validateInferRequest } from '../../infra/contracts/oip-validate.ts';
import { fromJsonData, type TensorData, type TensorToPack } from '../../infra/contracts/packed-tensors.ts';
import type { WebhookSpec } from '../../infra/contracts/webhook.ts';
import type { Fallback } from '../../infra/deployments/deployment-store.ts';
import { InvalidInputError, NotFoundError, OverloadedError } from '../../infra/kernel/errors.ts';
import { randomId } from '../../infra/kernel/random-id.ts';
import type { OpenJobs } from '../../infra/redis/open-jobs.ts';
import { requestDigest } from '../../infra/redis/result-cache.ts';
import type { SubmitKind } from '../../infra/telemetry/metrics.ts';
import type { IdempotencyStore } from '../http/idempotency.ts';
import type { Clock, DeploymentLookup, JobQueue, JobView, ModelCatalog } from '../ports.ts';
import { parseWebhookSpec } from '../webhooks/webhook-spec.ts';
import { checkAdmission, deploymentBacklog } from './admission.ts';
import type { FleetView } from './fleet-view.ts';
import { JOB_REQUEST_FIELDS, rejectUnknownFields } from './known-fields.ts';
import { ensureServed } from './serving-check.ts';
import { chooseVersion } from './traffic-split.ts';

/**
 * What submit needs of the job queue. `answerFromCache` (infra/queue/job-queue.ts has it) is
 * optional so a queue without a result cache simply never hits.
 */
export type SubmitJobQueue = JobQueue & {
  answerFromCache?(request: QueuedRequest, options: { jobId: string }): Promise<JobView | null>;
};

/** The deployment as submit reads it: the port's fields plus the fallback (and `min`, which a sync timeout names). */
export type SubmitDeployment = NonNullable<Awaited<ReturnType<DeploymentLookup['get']>>> & { fallback?: Fallback; min?: number };

export interface SubmitJobDeps {
  jobs: SubmitJobQueue;
  catalog: ModelCatalog;
  deployments: { get(model: string): Promise<SubmitDeployment | null> };
  clock: Clock;
  newId: () => string;
  idempotency: IdempotencyStore;
  /** Hosts a webhook may name even when they are private (WEBHOOK_ALLOWED_PRIVATE_HOSTS). */
  webhookAllowedPrivateHosts: readonly string[];
  /** Rows one request may carry (MAX_ROWS_PER_JOB); unlimited when absent. */
  maxRows?: number;
  /** Elements one input may declare, a zero-length axis counted as 1 (MAX_ELEMENTS_PER_JOB); unlimited when absent. */
  maxElements?: number;
  /** A tenant's open jobs and their cap (MAX_OPEN_JOBS_PER_TENANT); no cap when absent. */
  openJobs?: { store: Pick<OpenJobs, 'admit' | 'release'>; maxPerTenant: number };
  /** Called for each job enqueued (not for cache hits: nothing is enqueued). */
  onSubmitted?: (e: { model: string; version: string; kind: SubmitKind; rows: number }) => void;
  /** Picks a version by the deployment's traffic split; Math.random when absent. */
  random?: () => number;
  /**
   * The workers' heartbeats (fleet-view.ts), read only for a version no deployment lists: a
   * hand-started worker serves it. Absent: no such worker is known, so only deployed versions
   * take jobs.
   */
  fleet?: FleetView;
}

/** The longest start deadline a job may ask for: a day. */
export const MAX_TIMEOUT_MS = 86_400_000;

export interface SubmitJobInput {
  tenant: string;
  model: string;
  /** From the URL; wins over `body.version`. */
  version?: string;
  body: unknown;
  /**
   * The bytes of inputs sent as binary tensor data, by input name (the OIP binary extension's
   * body after the JSON header, or gRPC's raw contents); such inputs have no `data` in `body`.
   */
  binary?: ReadonlyMap<string, Uint8Array>;
  kind: SubmitKind;
  /** Overrides `body.priority`. */
  priority?: Priority;
  /** Validated by the route (parseIdempotencyKey). */
  idempotencyKey?: string;
}

export interface SubmittedJob {
  id: string;
  /** The model and version the job runs on: the fallback's when it was degraded. */
  model: string;
  version: string;
  createdAt: number;
  rows: number;
  /** The OIP request id, when the caller sent one. */
  requestId?: string;
  /** True when an Idempotency-Key matched an earlier request: this is that request's job. */
  replayed?: boolean;
  /** Answered from the result cache: the job is already `succeeded`. */
  cached?: true;
  /** Set when the backlog was full and the job went to the deployment's fallback instead. */
  fallbackFor?: { model: string; version: string };
}

/** `job_` + 20 URL-safe characters (120 random bits). */
export function newJobId(): string {
  return `job_${randomId()}`;
}

/** A validated request and its options, ready to place (step 1–3 of the header). */
interface Submission {
  tenant: string;
  kind: SubmitKind;
  priority: Priority;
  timeoutMs: number | undefined;
  webhook: WebhookSpec | undefined;
  degradable: boolean;
  /** false: the request opted out of the result cache. */
  cache: boolean;
  /** The body as sent: a fallback validates it against its own manifest. */
  body: unknown;
  binary: ReadonlyMap<string, Uint8Array> | undefined;
  target: Target;
  request: ValidatedInferRequest;
}

export async function submitJob(deps: SubmitJobDeps, input: SubmitJobInput): Promise<SubmittedJob> {
  const body = input.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new InvalidInputError('invalid_body', 'request body must be a JSON object');
  }
  const fields = body as Record<string, unknown>;
  rejectUnknownFields(fields, JOB_REQUEST_FIELDS, input.kind === 'sync' ? 'an inference request' : 'a job request');
  const priority = input.priority ?? parsePriority(fields.priority);
  const timeoutMs = parseTimeoutMs(fields.timeoutMs);
  const webhook = parseWebhookSpec(fields.webhook, { allowedPrivateHosts: deps.webhookAllowedPrivateHosts });
  const degradable = parseFlag(fields.degradable, 'degradable', false);
  const cache = parseFlag(fields.cache, 'cache', true);
  const target = await resolveTarget(deps, input.model, input.version ?? parseVersion(fields.version));
  const request = validateInferRequest(body, target.manifest, limitsOf(deps), input.binary);
  await ensureServed(deps, target.manifest, target.deployment);
  const submission: Submission = {
    tenant: input.tenant,
    kind: input.kind,
    priority,
    timeoutMs,
    webhook,
    degradable,
    cache,
    body,
    binary: input.binary,
    target,
    request,
  };
  // The OIP id travels with the answer, never with the job: no worker reads it.
  const submit = async () => withRequestId(await place(deps, submission), request.id);
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

/**
 * Steps 1–3 of the header: the cache, admission, the fallback; then the queue. The tenant's
 * open-job slot is asked for beside the cache lookup, so both take one round trip, not two: a
 * hit gives the slot back, and a refusal (429) only counts when the job is to be queued.
 */
async function place(deps: SubmitJobDeps, s: Submission): Promise<SubmittedJob> {
  const id = deps.newId();
  const data = jobData(deps, s, s.target.manifest, s.request);
  const slot = reserveOpenJob(deps, data.tenant, id);
  try {
    const hit = await fromCache(deps, s, id, data);
    if (hit) {
      slot.giveBack();
      return hit;
    }
    const route = await admit(deps, s.target.deployment, s.degradable);
    if (route === 'fallback') return await placeOnFallback(deps, s, id, data, slot);
    return await enqueue(deps, id, data, route === 'low' ? 'low' : s.priority, s.request.rows, s.kind, slot);
  } catch (err) {
    slot.giveBack(); // else it ages out
    throw err;
  }
}

async function placeOnFallback(
  deps: SubmitJobDeps,
  s: Submission,
  id: string,
  primary: QueuedRequest,
  slot: OpenJobSlot,
): Promise<SubmittedJob> {
  const fallback = s.target.deployment?.fallback as Fallback; // admit() answers 'fallback' only when there is one
  const target = await resolveTarget(deps, fallback.model, fallback.version);
  const request = validateForFallback(deps, s, target.manifest);
  const data = jobData(deps, s, target.manifest, request);
  const fallbackFor = { model: primary.model, version: primary.version };
  const hit = await fromCache(deps, s, id, data);
  if (hit) {
    slot.giveBack();
    return { ...hit, fallbackFor };
  }
  await admitStrictly(deps, target.deployment, primary.model);
  return { ...(await enqueue(deps, id, data, s.priority, request.rows, s.kind, slot)), fallbackFor };
}

async function enqueue(
  deps: SubmitJobDeps,
  id: string,
  data: QueuedRequest,
  priority: Priority,
  rows: number,
  kind: SubmitKind,
  slot: OpenJobSlot,
): Promise<SubmittedJob> {
  await slot.taken;
  await deps.jobs.enqueue(data, { priority, jobId: id });
  deps.onSubmitted?.({ model: data.model, version: data.version, kind, rows });
  return submitted(id, data, rows);
}

/** A job's place among its tenant's open jobs, asked for early (see place()). */
interface OpenJobSlot {
  /** Resolves once counted; rejects with 429 `too_many_open_jobs` at the cap. */
  taken: Promise<void>;
  /** Gives a counted slot back (a cache hit, a failure before the queue); idempotent. */
  giveBack(): void;
}

function reserveOpenJob(deps: Pick<SubmitJobDeps, 'openJobs'>, tenant: string, id: string): OpenJobSlot {
  if (!deps.openJobs) return { taken: Promise.resolve(), giveBack: () => undefined };
  const { store, maxPerTenant } = deps.openJobs;
  const admitted = store.admit(tenant, id, maxPerTenant);
  const taken = admitted.then(({ admitted: ok, open }) => {
    if (ok) return;
    throw new InvalidInputError(
      'too_many_open_jobs',
      `tenant ${tenant} has ${open} jobs queued or running, at its limit of ${maxPerTenant}; retry once some have finished (or cancel some)`,
      { status: 429 },
    );
  });
  taken.catch(() => undefined); // awaited only by enqueue(): a cache hit never looks
  let given = false;
  return {
    taken,
    giveBack() {
      if (given) return;
      given = true;
      admitted.then((r) => (r.admitted ? store.release(tenant, [id]) : undefined)).catch(() => undefined);
    },
  };
}

/**
 * The request as the queue takes it: its inputs packed into typed arrays here, once (the one
 * per-element pass, at the HTTP edge), and its result-cache digest when the cache is used.
 */
function jobData(
  deps: Pick<SubmitJobDeps, 'clock'>,
  s: Submission,
  manifest: ModelManifest,
  request: ValidatedInferRequest,
): QueuedRequest {
  const inputs: TensorToPack[] = request.inputs.map((t) => ({
    name: t.name,
    datatype: t.datatype,
    shape: t.shape,
    data: ArrayBuffer.isView(t.data) ? (t.data as TensorData) : fromJsonData(t.datatype, t.data as OipTensor['data']),
  }));
  const data: QueuedRequest = {
    tenant: s.tenant,
    model: manifest.name,
    version: manifest.version,
    submittedAt: deps.clock.now(),
    rows: request.rows,
    inputs,
  };
  // Not `parameters` nor the OIP `id`: no worker reads them, so they are not kept for the job's retention.
  if (request.outputs) data.outputs = request.outputs;
  if (s.timeoutMs !== undefined) data.timeoutMs = s.timeoutMs;
  if (s.webhook) data.webhook = s.webhook;
  // Webhook jobs skip the cache (the header's step 1): the digest is computed only when it is used.
  if (s.cache && !s.webhook) {
    data.cacheDigest = requestDigest({
      tenant: s.tenant,
      modelSha256: manifest.sha256,
      ...(request.outputs ? { outputs: request.outputs.map((o) => o.name) } : {}),
      tensors: inputs.map((t) => ({ name: t.name, datatype: t.datatype, shape: t.shape, bytes: tensorBytes(t) })),
    });
  }
  return data;
}

function tensorBytes(t: TensorToPack): Uint8Array {
  if (Array.isArray(t.data)) return Buffer.from(JSON.stringify(t.data));
  const typed = t.data as Exclude<TensorToPack['data'], readonly string[]>;
  return new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
}

/** Step 1: a finished job from the result cache, or undefined (a miss, opted out, or a webhook job). */
async function fromCache(deps: SubmitJobDeps, s: Submission, id: string, data: QueuedRequest): Promise<SubmittedJob | undefined> {
  if (data.cacheDigest === undefined || !deps.jobs.answerFromCache) return undefined;
  const view = await deps.jobs.answerFromCache(data, { jobId: id });
  if (!view) return undefined;
  return { ...submitted(id, data, s.request.rows), cached: true };
}

function submitted(id: string, data: QueuedRequest, rows: number): SubmittedJob {
  return { id, model: data.model, version: data.version, createdAt: data.submittedAt, rows };
}

function withRequestId(job: SubmittedJob, requestId: string | undefined): SubmittedJob {
  return requestId === undefined ? job : { ...job, requestId };
}

function limitsOf(deps: Pick<SubmitJobDeps, 'maxRows' | 'maxElements'>): { maxRows?: number; maxElements?: number } {
  const limits: { maxRows?: number; maxElements?: number } = {};
  if (deps.maxRows !== undefined) limits.maxRows = deps.maxRows;
  if (deps.maxElements !== undefined) limits.maxElements = deps.maxElements;
  return limits;
}

/** The request as the fallback model sees it: 422 `fallback_incompatible` when it does not fit. */
function validateForFallback(
  deps: Pick<SubmitJobDeps, 'maxRows' | 'maxElements'>,
  s: Pick<Submission, 'body' | 'binary'>,
  manifest: ModelManifest,
): ValidatedInferRequest {
  try {
    return validateInferRequest(s.body, manifest, limitsOf(deps), s.binary);
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    throw new InvalidInputError(
      'fallback_incompatible',
      `the backlog is full and this request would go to the fallback model ${manifest.name} version ${manifest.version}, which does not accept it (${err.code}: ${err.message})`,
      { status: 422, cause: err },
    );
  }
}

/**
 * What makes two submissions "the same request" for an Idempotency-Key: the model and version
 * asked for (not the one resolved: a redeploy in between must not turn a retry into a
 * conflict) and the body, as canonical JSON (object keys sorted), and its binary inputs' bytes
 * (by name, in name order), hashed.
 */
export function fingerprint(input: Pick<SubmitJobInput, 'model' | 'version' | 'body' | 'binary'>): string {
  const canonical = JSON.stringify({ model: input.model, version: input.version ?? null, body: input.body }, sortKeys);
  const hash = createHash('sha256').update(canonical);
  const names = [...(input.binary?.keys() ?? [])].sort();
  for (const name of names) {
    const bytes = input.binary?.get(name) as Uint8Array;
    hash.update(`\0${name}\0${bytes.byteLength}\0`).update(bytes);
  }
  return hash.digest('hex');
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
 * The version asked for, else the deployed one, else the registry's latest (the model's
 * metadata is there whether or not it is deployed). Unknown everywhere → 404.
 */
export async function resolveManifest(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random'>,
  model: string,
  version: string | undefined,
): Promise<ModelManifest> {
  return (await resolveTarget(deps, model, version)).manifest;
}

/** A resolved model version, and the deployment it was drawn from (null when not deployed). */
interface Target {
  manifest: ModelManifest;
  deployment: SubmitDeployment | null;
}

/**
 * The version a job runs on: the one asked for, else one drawn by the deployment's traffic
 * split (per job), else the registry's latest (which submit then refuses unless a worker
 * serves it: serving-check.ts). Unknown everywhere → 404.
 */
async function resolveTarget(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random'>,
  model: string,
  version: string | undefined,
): Promise<Target> {
  if (!MODEL_NAME_PATTERN.test(model)) throw new NotFoundError('model_not_found', `no model named "${model}"`);
  const deployment = await deps.deployments.get(model);
  const chosen = version ?? (deployment ? chooseVersion(deployment, deps.random ?? Math.random) : undefined);
  return { manifest: await deps.catalog.getManifest(model, chosen), deployment };
}

/**
 * Step 2: admission against the deployment's backlog bound (only when it has one, so unbounded
 * deployments pay no extra Redis round trip).
 */
async function admit(
  deps: Pick<SubmitJobDeps, 'jobs' | 'catalog' | 'deployments' | 'random' | 'fleet'>,
  deployment: SubmitDeployment | null,
  degradable: boolean,
): Promise<'normal' | 'low' | 'fallback'> {
  if (deployment?.backlogMax === undefined) return 'normal';
  const depth = await deploymentBacklog(deployment, (m, v) => deps.jobs.depth(m, v));
  const fallbackOk = degradable && deployment.fallback !== undefined && (await fallbackUsable(deps, deployment.fallback));
  const decision = checkAdmission({ depth, backlogMax: deployment.backlogMax, lowPriorityOk: degradable, fallbackOk });
  if (!decision.admit) {
    const hint = degradable
      ? ''
      : ` (or send "degradable": true to ${deployment.fallback ? 'be served by its fallback model' : 'queue at low priority'})`;
    throw new OverloadedError(
      'backlog_full',
      `${deployment.model} has ${depth} jobs queued, at its bound of ${deployment.backlogMax}; retry after ${decision.retryAfterS} s${hint}`,
      decision.retryAfterS,
    );
  }
  return decision.fallback ? 'fallback' : decision.priority === 'low' ? 'low' : 'normal';
}

/**
 * A fallback missing from the registry, or one nothing serves (serving-check.ts), counts as
 * none: the request is not the caller's mistake, and a job sent where no worker runs would never
 * end.
 */
async function fallbackUsable(
  deps: Pick<SubmitJobDeps, 'catalog' | 'deployments' | 'random' | 'fleet'>,
  fallback: Fallback,
): Promise<boolean> {
  try {
    const target = await resolveTarget(deps, fallback.model, fallback.version);
    await ensureServed(deps, target.manifest, target.deployment);
    return true;
  } catch (err) {
    if (err instanceof NotFoundError) return false;
    if (err instanceof InvalidInputError && err.code === 'model_not_deployed') return false;
    throw err;
  }
}

/** The fallback's own bound, with no further degradation (no fallback of a fallback). */
async function admitStrictly(deps: Pick<SubmitJobDeps, 'jobs'>, deployment: SubmitDeployment | null, primary: string): Promise<void> {
  if (deployment?.backlogMax === undefined) return;
  const depth = await deploymentBacklog(deployment, (m, v) => deps.jobs.depth(m, v));
  const decision = checkAdmission({ depth, backlogMax: deployment.backlogMax });
  if (decision.admit) return;
  throw new OverloadedError(
    'backlog_full',
    `${primary} is at its backlog bound, and so is its fallback ${deployment.model} (${depth} jobs queued, bound ${deployment.backlogMax}); retry after ${decision.retryAfterS} s`,
    decision.retryAfterS,
  );
}

function parseFlag(raw: unknown, name: string, absent: boolean): boolean {
  if (raw === undefined) return absent;
  if (typeof raw === 'boolean') return raw;
  throw new InvalidInputError('invalid_body', `"${name}" must be true or false, got ${JSON.stringify(raw)}`);
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
