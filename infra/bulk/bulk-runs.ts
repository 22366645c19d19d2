/**
 * The bulk-run use case behind `POST/GET/DELETE /v1/bulk-runs` and `warmpool bulk run`: start
 * (create, or resume the same run), get, cancel. Starting never drives: a driver (driver.ts, in
 * the CLI or the dispatcher's supervisor) does. Starting checks what can be checked up front, so
 * a bad run is a 4xx now rather than a failed run later: input and output lie inside the
 * tenant's bulk locations (403 `location_forbidden`, before any S3 call: locations.ts), the
 * model version exists, the input prefix has objects of a known format, the output prefix is
 * empty (a new run must not count someone else's parts as its own). A location whose bucket
 * S3 will not let us use (missing, not granted to this service) is 422 `location_unavailable`.
 *
 * Run ids are the tenant's own (run-store.ts `runRef`): another tenant's run with the same id
 * is not found, never a conflict.
 *
 * Same id, same spec = the same run (spec-conflict.ts says which fields count): `start` returns
 * it. Another spec under the id is 409 `run_conflict`. A running run (its driver interrupted or
 * dead) is resumed: a deadline or webhook given replaces the stored one, and a driver goes on
 * where the last one stopped. A run that ended (succeeded, failed, canceled) is final: it is
 * returned as it ended, with nothing written, so a `bulk.failed` already sent stays true; to
 * score its input again, start a new run.
 */
import { randomBytes } from 'node:crypto';
import type { BulkColumns, BulkFormat, BulkRunRequest, BulkRunSpec, BulkRuns, BulkRunView, BulkWebhookEvent } from '../contracts/bulk.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import { clearCapacityRequest } from '../deployments/capacity-request.ts';
import type { Clock } from '../kernel/clock.ts';
import { InvalidInputError, NotFoundError, OverloadedError } from '../kernel/errors.ts';
import type { Log } from '../kernel/log.ts';
import { createChunkQueue } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { BucketUnavailableError, type ObjectInfo, type ObjectStore } from '../registry/object-store.ts';
import { formatOf } from '../tabular/index.ts';
import { type ActiveRunCaps, type Admission, createActiveRuns, UNCAPPED } from './active-runs.ts';
import type { BulkLocations } from './locations.ts';
import { DEFAULT_CHUNK_ROWS, parseBulkRunRequest } from './run-request.ts';
import { createRunStore, type RunRecord, type RunStore, runRef, viewOf } from './run-store.ts';
import { formatS3Url, parseS3Url } from './s3-url.ts';
import { conflictOf, resumeSettings } from './spec-conflict.ts';

export { parseBulkRunRequest };

export interface BulkDeps {
  redis: RedisClient;
  prefix: string;
  /** An object store for a bucket (input and output may be in different buckets); asked only for locations `locations` allowed. */
  storeFor(bucket: string): ObjectStore;
  /** Which S3 locations each tenant may use (BULK_LOCATIONS). */
  locations: BulkLocations;
  /** Manifest of model@version (NotFoundError when absent); version undefined = latest. */
  getManifest(model: string, version?: string): Promise<ModelManifest>;
  /** The deployment's serving version for a model, or null when not deployed. */
  servingVersion(model: string): Promise<string | null>;
  clock: Clock;
  log: Log;
  /** Progress/completion events for the run's webhook; absent = no webhooks. */
  notify?(event: BulkWebhookEvent, run: BulkRunView): Promise<void>;
  /** Chunk jobs' retries and retention (config.jobs); defaults 3 attempts, one day. */
  jobs?: { attempts: number; retentionS: number };
  /** PARQUET_FOOTER_MAX_BYTES (config.bulk): the largest Parquet footer the driver decodes; config.ts's default when absent. */
  parquetFooterMaxBytes?: number;
  /** Runs not yet ended per tenant and in all (config.bulk); absent = counted, never refused. */
  activeRuns?: ActiveRunCaps;
}

/**
 * Retry-After of a start refused for the overall cap: a slot frees when some run ends, and runs
 * last minutes, so a shorter hint would only make every refused caller poll the API.
 */
export const ACTIVE_RUNS_RETRY_AFTER_S = 30;

export function createBulkRuns(deps: BulkDeps): BulkRuns {
  const store = createRunStore(deps.redis, deps.prefix);
  const active = createActiveRuns(deps.redis, deps.prefix);
  const caps = deps.activeRuns ?? UNCAPPED;

  /**
   * Counts the run against the caps before it is created (active-runs.ts), or refuses it; `body`
   * runs with the slot held, which is given back when `body` fails to make the run active (a
   * refusal of its input, a lost race to create it).
   */
  async function withSlot<T>(tenant: string, ref: string, caps: ActiveRunCaps, body: () => Promise<T>): Promise<T> {
    const admission = await active.admit(tenant, ref, caps, deps.clock.now());
    if (!admission.admitted) throw refusal(tenant, admission, caps);
    try {
      return await body();
    } catch (err) {
      if (admission.added) await active.release(tenant, ref);
      throw err;
    }
  }

  async function resume(found: RunRecord, request: BulkRunRequest): Promise<BulkRunView> {
    const existing = found.spec;
    const conflict = conflictOf(existing, request);
    if (conflict) {
      throw new InvalidInputError(
        'run_conflict',
        `run ${existing.id} exists with another spec: ${conflict}; resume it with its own spec, or start a new run under another "runId" (with an empty "output")`,
        { status: 409 },
      );
    }
    if (found.status !== 'running') return viewOf(found);
    const updated = { ...existing, ...resumeSettings(request) };
    if (JSON.stringify(updated) !== JSON.stringify(existing)) await store.updateSpec(found.ref, updated);
    // Counted already (or from before the caps: counted now, never refused).
    await active.admit(existing.tenant, found.ref, UNCAPPED, deps.clock.now());
    return viewOf((await store.read(found.ref)) ?? found);
  }

  async function create(tenant: string, request: BulkRunRequest, id: string): Promise<BulkRunView | null> {
    const version = request.version ?? (await deps.servingVersion(request.model));
    if (!version) {
      throw new NotFoundError('model_not_deployed', `model ${request.model} is not deployed; deploy it or name a version`);
    }
    const manifest = await deps.getManifest(request.model, version);
    const spec: BulkRunSpec = {
      id,
      tenant,
      model: request.model,
      version: manifest.version,
      input: parseS3Url(request.input, 'input'),
      output: parseS3Url(request.output, 'output'),
      chunkRows: request.chunkRows ?? DEFAULT_CHUNK_ROWS,
      createdAt: deps.clock.now(),
      ...resumeSettings(request),
    };
    if (request.maxBadRows !== undefined) spec.maxBadRows = request.maxBadRows;
    if (request.format) spec.format = request.format;
    if (request.idColumn) spec.idColumn = request.idColumn;
    if (request.columns) spec.columns = resolveColumns(request.columns, manifest);
    const firstFormat = await checkInput(deps, spec, manifest);
    spec.outputFormat = request.outputFormat ?? firstFormat;
    const existingOutput = await listLocation(deps, spec.output, 'output');
    if (existingOutput.length > 0) {
      throw new InvalidInputError(
        'output_not_empty',
        `the output prefix already holds ${existingOutput.length} object(s), e.g. ${existingOutput[0]?.key}; use an empty prefix (or resume the run that wrote them with its run id)`,
        { status: 409 },
      );
    }
    if (!(await store.create(spec))) return null;
    const record = await store.find(tenant, id);
    return record ? viewOf(record) : null;
  }

  return {
    async start(tenant, raw) {
      const request = parseBulkRunRequest(raw, deps.clock.now());
      // First, before any S3 call or any record is read: a location that is not the tenant's
      // answers the same whatever lies there.
      deps.locations.check(tenant, parseS3Url(request.input, 'input'), 'input');
      deps.locations.check(tenant, parseS3Url(request.output, 'output'), 'output');
      const id = request.runId ?? `br_${randomBytes(8).toString('hex')}`;
      for (let attempt = 0; attempt < 2; attempt++) {
        const existing = await store.find(tenant, id);
        if (existing) return resume(existing, request);
        // Counted first, before any S3 call: a tenant at its cap is refused at the cheapest point.
        const created = await withSlot(tenant, runRef(tenant, id), caps, async () => {
          const view = await create(tenant, request, id);
          // Lost the race to create it: the winner's start counted the same ref, so it stays.
          if (!view) throw new LostRace();
          return view;
        }).catch((err: unknown) => {
          if (err instanceof LostRace) return null;
          throw err;
        });
        if (created) return created;
        // Another start with the same id won the race: resume that one.
      }
      throw new InvalidInputError('run_conflict', `run ${id} is being created by another request`, { status: 409 });
    },

    async get(tenant, id) {
      const record = await store.find(tenant, id);
      return record ? viewOf(record) : null;
    },

    async cancel(tenant, id) {
      const record = await store.find(tenant, id);
      if (!record) return null;
      const { ref } = record;
      if (record.status !== 'running') return viewOf(record);
      if (await store.finish(ref, 'canceled', deps.clock.now(), { error: { code: 'canceled', message: 'canceled by the caller' } })) {
        await removeQueuedChunks(deps, store, ref, record.spec);
        const view = viewOf((await store.read(ref)) ?? record);
        await notifyRun(deps, 'bulk.canceled', view);
        return view;
      }
      return viewOf((await store.read(ref)) ?? record);
    },
  };
}

/** Control flow inside withSlot: the slot is given back, the caller carries on. */
class LostRace extends Error {}

/** 429 for the tenant's own cap (its own runs to end or cancel); 503 + Retry-After for everyone's. */
function refusal(tenant: string, admission: Exclude<Admission, { admitted: true }>, caps: ActiveRunCaps): Error {
  if (admission.over === 'tenant') {
    return new InvalidInputError(
      'too_many_bulk_runs',
      `tenant ${tenant} has ${admission.tenantActive} bulk runs not yet ended, the most MAX_ACTIVE_BULK_RUNS_PER_TENANT (${caps.perTenant}) allows; wait for one to end or cancel one (DELETE /v1/bulk-runs/<id>)`,
      { status: 429 },
    );
  }
  return new OverloadedError(
    'too_many_bulk_runs',
    `${admission.allActive} bulk runs of all tenants are not yet ended, the most MAX_ACTIVE_BULK_RUNS (${caps.overall}) allows; wait for one to end or retry in ${ACTIVE_RUNS_RETRY_AFTER_S} s`,
    ACTIVE_RUNS_RETRY_AFTER_S,
  );
}

/** Removes the run's chunk jobs no worker holds yet, and its capacity request. Parts written stay. */
export async function removeQueuedChunks(deps: BulkDeps, store: RunStore, ref: string, spec: BulkRunSpec): Promise<void> {
  await clearCapacityRequest(deps.redis, deps.prefix, spec.model, ref);
  const chunks = await store.outstanding(ref);
  const queue = createChunkQueue(deps.redis, deps.prefix, spec.model, spec.version, chunkJobOptions(deps));
  try {
    await queue.forgetRun(ref);
    for (const chunk of chunks) await queue.remove(ref, chunk);
  } finally {
    await queue.close();
  }
}

export function chunkJobOptions(deps: BulkDeps) {
  return {
    attempts: deps.jobs?.attempts ?? 3,
    backoffMs: 1000,
    retentionS: deps.jobs?.retentionS ?? 86_400,
    onError: (err: Error) => deps.log.warn({ err: err.message }, 'bulk chunk queue error'),
  };
}

/** Sends a webhook event when the run asked for it; a failure is logged, never fatal to the run. */
export async function notifyRun(deps: BulkDeps, event: BulkWebhookEvent, view: BulkRunView): Promise<void> {
  if (!deps.notify || !view.webhook?.events.includes(event)) return;
  await deps.notify(event, view).catch((err: unknown) => deps.log.warn({ err, runId: view.id, event }, 'bulk webhook not queued'));
}

/**
 * Columns per model input as the caller gave them, checked against the model: every name an
 * input of it; the CLI's bare list (`a,b,c`, key '') is the single input's.
 */
function resolveColumns(columns: BulkColumns, manifest: ModelManifest): BulkColumns {
  const out: BulkColumns = {};
  const names = manifest.inputs.map((i) => i.name);
  for (const [input, cols] of Object.entries(columns)) {
    if (input === '') {
      const only = manifest.inputs.length === 1 ? names[0] : undefined;
      if (!only) {
        throw new InvalidInputError(
          'invalid_bulk_run',
          `"columns" must name the input each list is for: model ${manifest.name} has inputs ${names.join(', ')}`,
        );
      }
      out[only] = cols;
    } else if (!names.includes(input)) {
      throw new InvalidInputError(
        'invalid_bulk_run',
        `"columns" names "${input}", which is not an input of ${manifest.name} (${names.join(', ')})`,
      );
    } else out[input] = cols;
  }
  return out;
}

/** The input prefix holds objects, each of a format this model can read; returns the first object's format. */
async function checkInput(deps: BulkDeps, spec: BulkRunSpec, manifest: ModelManifest): Promise<BulkFormat> {
  const objects = (await listLocation(deps, spec.input, 'input')).filter((o) => !o.key.endsWith('/'));
  if (objects.length === 0) {
    throw new InvalidInputError('empty_input', `no objects under s3://${spec.input.bucket}/${spec.input.prefix}`, { status: 422 });
  }
  for (const o of objects) {
    const format = formatOf(o.key, spec.format);
    if (!format) {
      throw new InvalidInputError('unknown_format', `cannot tell the format of ${o.key}: name it .jsonl or .csv, or give "format"`, {
        status: 422,
      });
    }
    if (format === 'csv' && manifest.inputs.length !== 1 && !spec.columns) {
      throw new InvalidInputError(
        'csv_needs_single_input',
        `${o.key} is CSV but model ${spec.model} has ${manifest.inputs.length} inputs; give "columns" for each input, or use JSONL or Parquet`,
        { status: 422 },
      );
    }
  }
  return formatOf((objects[0] as ObjectInfo).key, spec.format) as BulkFormat;
}

/**
 * Lists a location the tenant may use; a bucket S3 will not let this service use is the
 * tenant's own problem to hear about (its locations are its own), never a 500.
 */
async function listLocation(deps: BulkDeps, location: BulkRunSpec['input'], field: 'input' | 'output'): Promise<ObjectInfo[]> {
  try {
    return await deps.storeFor(location.bucket).list(location.prefix);
  } catch (err) {
    if (!(err instanceof BucketUnavailableError)) throw err;
    throw new InvalidInputError(
      'location_unavailable',
      `"${field}" ${formatS3Url(location)} cannot be used: its bucket does not exist or this service may not use it`,
      { status: 422, cause: err },
    );
  }
}
