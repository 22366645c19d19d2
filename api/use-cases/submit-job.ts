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
 * 4. A shared pool. When the deployment the job was placed for (the primary's, or the fallback's)
 *    names a shared pool, its demand doorbell rings right after the job is queued
 *    (infra/fleet/pool-demand.ts): the pool controller places a model no worker holds at once,
 *    once. The ring is a hint: it never fails or delays the job (the scaler's tick sees the queue).
 *
 * With an Idempotency-Key the key is claimed only after validation (a rejected request holds
 * no key, like Stripe) and released if placing fails, so a retry can claim it again. Placing
 * runs under the claim, so a retry of an accepted request replays its job even while the
 * backlog is full, and a replayed cache hit is the same (succeeded) job. A keyed job's id is a
 * function of the tenant, key and request (keyedJobId), so an API killed between placing and
 * committing leaves a job its retry finds (placedBefore) rather than a second one.
 *
 * The parts live beside it: the body's options (job-options.ts), the version a job runs on
 * (job-target.ts), admission against the backlog (deployment-admission.ts), the tenant's
 * open-job slot (open-job-slot.ts), its stored-bytes budget (stored-bytes-slot.ts: the inputs
 * are charged with the slot; a fallback's are charged at the primary's size) and the
 * Idempotency-Key's rules (idempotency-key.ts).
 */
import type { QueuedRequest } from '../../infra/contracts/entry.ts';
import type { Priority } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { type ValidatedInferRequest, type ValidateLimits, validateInferRequest } from '../../infra/contracts/oip-validate.ts';
import { fromJsonData, packedSize, type TensorData, type TensorToPack } from '../../infra/contracts/packed-tensors.ts';
import type { WebhookSpec } from '../../infra/contracts/webhook.ts';
import type { Fallback } from '../../infra/deployments/deployment-store.ts';
import type { DemandBell } from '../../infra/fleet/pool-demand.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { randomId } from '../../infra/kernel/random-id.ts';
import type { OpenJobs } from '../../infra/redis/open-jobs.ts';
import { requestDigest } from '../../infra/redis/result-cache.ts';
import type { SubmitKind } from '../../infra/telemetry/metrics.ts';
import type { IdempotencyStore } from '../http/idempotency.ts';
import type { Clock, JobQueue, JobView, ModelCatalog } from '../ports.ts';
import { parseWebhookSpec } from '../webhooks/webhook-spec.ts';
import { admit, admitStrictly } from './deployment-admission.ts';
import type { FleetView } from './fleet-view.ts';
import { fingerprint, keyedJobId } from './idempotency-key.ts';
import { parseFlag, parsePriority, parseTimeoutMs, parseVersion } from './job-options.ts';
import { resolveTarget, type SubmitDeployment, type Target } from './job-target.ts';
import { JOB_REQUEST_FIELDS, rejectUnknownFields } from './known-fields.ts';
import { bothSlots, type OpenJobSlot, reserveOpenJob } from './open-job-slot.ts';
import { ensureServed } from './serving-check.ts';
import { reserveStoredBytes, type StoredBytesBudget } from './stored-bytes-slot.ts';

/**
 * What submit needs of the job queue. `answerFromCache` (infra/queue/job-queue.ts has it) is
 * optional so a queue without a result cache simply never hits.
 */
export type SubmitJobQueue = JobQueue & {
  answerFromCache?(request: QueuedRequest, options: { jobId: string }): Promise<JobView | null>;
};

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
  /** BYTES elements one request may carry over all its inputs (MAX_BYTES_ELEMENTS_PER_JOB); unlimited when absent. */
  maxBytesElements?: number;
  /** A tenant's open jobs and their cap (MAX_OPEN_JOBS_PER_TENANT); no cap when absent. */
  openJobs?: { store: Pick<OpenJobs, 'admit' | 'release'>; maxPerTenant: number };
  /** A tenant's kept bytes and their budget (MAX_STORED_BYTES_PER_TENANT, stored-bytes-slot.ts); no budget when absent. */
  storedBytes?: StoredBytesBudget;
  /** Called for each job enqueued (not for cache hits: nothing is enqueued). */
  onSubmitted?: (e: { model: string; version: string; kind: SubmitKind; rows: number }) => void;
  /** A request the result cache answered at submit: no job was queued, no worker needed for it. */
  onCached?: (e: { model: string; version: string; rows: number }) => void;
  /** Picks a version by the deployment's traffic split; Math.random when absent. */
  random?: () => number;
  /**
   * The workers' heartbeats (fleet-view.ts), read only for a version no deployment lists: a
   * hand-started worker serves it. Absent: no such worker is known, so only deployed versions
   * take jobs.
   */
  fleet?: FleetView;
  /** Rung after a job is queued for a model in a shared pool (step 4); absent: the pool's next tick places it. */
  poolDemand?: Pick<DemandBell, 'ring'>;
}

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
  if (input.idempotencyKey === undefined) return withRequestId(await place(deps, submission, deps.newId()), request.id);

  const requestFingerprint = fingerprint(input);
  const id = keyedJobId(input.tenant, input.idempotencyKey, requestFingerprint);
  const placed = () => placedBefore(deps, submission, id);
  const claim = await deps.idempotency.claim<SubmittedJob>(input.tenant, input.idempotencyKey, requestFingerprint, placed);
  if (claim.kind === 'replay') return { ...claim.value, replayed: true };
  let job: SubmittedJob;
  try {
    // A claim that expired with its holder (killed after placing, before commit) left the job.
    const found = await placed();
    job = found ?? withRequestId(await place(deps, submission, id), request.id);
  } catch (err) {
    await claim.release().catch(() => undefined); // the key then expires on its own
    throw err;
  }
  await claim.commit(job);
  return job;
}

/**
 * The job an earlier claim of the same key placed, when it did (keyedJobId names it). Its
 * answer was never recorded, so this is the answer: the same id, model and version.
 */
async function placedBefore(deps: SubmitJobDeps, s: Submission, id: string): Promise<SubmittedJob | undefined> {
  const view = await deps.jobs.get(id);
  if (!view || view.tenant !== s.tenant) return undefined;
  const job: SubmittedJob = { id, model: view.model, version: view.version, createdAt: view.createdAt, rows: s.request.rows };
  if (view.cached) job.cached = true;
  return withRequestId(job, s.request.id);
}

/**
 * Steps 1–3 of the header: the cache, admission, the fallback; then the queue. The tenant's
 * open-job slot is asked for beside the cache lookup, so both take one round trip, not two: a
 * hit gives the slot back, and a refusal (429) only counts when the job is to be queued.
 */
async function place(deps: SubmitJobDeps, s: Submission, id: string): Promise<SubmittedJob> {
  const data = jobData(deps, s, s.target.manifest, s.request);
  const slot = bothSlots(reserveOpenJob(deps, data.tenant, id), reserveStoredBytes(deps, data.tenant, id, packedSize(data.inputs)));
  try {
    const hit = await fromCache(deps, s, id, data);
    if (hit) {
      slot.giveBack();
      return hit;
    }
    const route = await admit(deps, s.target.deployment, s.degradable);
    if (route === 'fallback') return await placeOnFallback(deps, s, id, data, slot);
    const priority = route === 'low' ? 'low' : s.priority;
    return await enqueue(deps, id, data, priority, s.request.rows, s.kind, slot, s.target.deployment?.pool);
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
  return { ...(await enqueue(deps, id, data, s.priority, request.rows, s.kind, slot, target.deployment?.pool)), fallbackFor };
}

async function enqueue(
  deps: SubmitJobDeps,
  id: string,
  data: QueuedRequest,
  priority: Priority,
  rows: number,
  kind: SubmitKind,
  slot: OpenJobSlot,
  pool: string | undefined,
): Promise<SubmittedJob> {
  await slot.taken;
  await deps.jobs.enqueue(data, { priority, jobId: id });
  deps.onSubmitted?.({ model: data.model, version: data.version, kind, rows });
  if (pool !== undefined) deps.poolDemand?.ring(pool, data.model, data.version);
  return submitted(id, data, rows);
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
  deps.onCached?.({ model: data.model, version: data.version, rows: s.request.rows });
  return { ...submitted(id, data, s.request.rows), cached: true };
}

function submitted(id: string, data: QueuedRequest, rows: number): SubmittedJob {
  return { id, model: data.model, version: data.version, createdAt: data.submittedAt, rows };
}

function withRequestId(job: SubmittedJob, requestId: string | undefined): SubmittedJob {
  return requestId === undefined ? job : { ...job, requestId };
}

function limitsOf(deps: Pick<SubmitJobDeps, 'maxRows' | 'maxElements' | 'maxBytesElements'>): ValidateLimits {
  const limits: ValidateLimits = {};
  if (deps.maxRows !== undefined) limits.maxRows = deps.maxRows;
  if (deps.maxElements !== undefined) limits.maxElements = deps.maxElements;
  if (deps.maxBytesElements !== undefined) limits.maxBytesElements = deps.maxBytesElements;
  return limits;
}

/** The request as the fallback model sees it: 422 `fallback_incompatible` when it does not fit. */
function validateForFallback(
  deps: Pick<SubmitJobDeps, 'maxRows' | 'maxElements' | 'maxBytesElements'>,
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
