/**
 * The bulk-run use case behind `POST/GET/DELETE /v1/bulk-runs` and `warmpool bulk run`: start
 * (create, or resume the same run), get, cancel. Starting never drives: a driver (driver.ts, in
 * the CLI or the dispatcher's supervisor) does. Starting checks what can be checked up front, so
 * a bad run is a 4xx now rather than a failed run later: the model version exists, the input
 * prefix has objects of a known format, the output prefix is empty (a new run must not count
 * someone else's parts as its own).
 *
 * Same id, same spec = the same run: `start` returns it (reopening it when it had failed or was
 * canceled, so "run it again with the same --run-id" continues). What defines the output —
 * model, version, input, output, format, chunkRows — must match (else 409 `run_conflict`); the
 * deadline, webhook and maxBadRows given on a resume replace the stored ones.
 */
import { randomBytes } from 'node:crypto';
import {
  BULK_WEBHOOK_EVENTS,
  type BulkRunRequest,
  type BulkRunSpec,
  type BulkRuns,
  type BulkRunView,
  type BulkWebhookEvent,
} from '../contracts/bulk.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import type { Clock } from '../kernel/clock.ts';
import { InvalidInputError, NotFoundError } from '../kernel/errors.ts';
import type { Log } from '../kernel/log.ts';
import { createChunkQueue } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { clearCapacityRequest } from './capacity-request.ts';
import { formatOf } from './row-reader.ts';
import { DEFAULT_CHUNK_ROWS, parseBulkRunRequest } from './run-request.ts';
import { createRunStore, type RunStore, viewOf } from './run-store.ts';
import { parseS3Url } from './s3-url.ts';

export { parseBulkRunRequest };

export interface BulkDeps {
  redis: RedisClient;
  prefix: string;
  /** An object store for any bucket (input and output may be in different buckets). */
  storeFor(bucket: string): ObjectStore;
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
}

export function createBulkRuns(deps: BulkDeps): BulkRuns {
  const store = createRunStore(deps.redis, deps.prefix);

  async function resume(tenant: string, existing: BulkRunSpec, request: BulkRunRequest): Promise<BulkRunView> {
    const conflict = conflictOf(existing, tenant, request);
    if (conflict) throw new InvalidInputError('run_conflict', `run ${existing.id} exists with ${conflict}`, { status: 409 });
    const updated = { ...existing, ...settingsOf(request) };
    if (JSON.stringify(updated) !== JSON.stringify(existing)) await store.updateSpec(updated);
    await store.reopen(existing.id);
    return viewOf((await store.read(existing.id)) as NonNullable<Awaited<ReturnType<RunStore['read']>>>);
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
      ...settingsOf(request),
    };
    if (request.format) spec.format = request.format;
    await checkInput(deps, spec, manifest);
    const existingOutput = await deps.storeFor(spec.output.bucket).list(spec.output.prefix);
    if (existingOutput.length > 0) {
      throw new InvalidInputError(
        'output_not_empty',
        `the output prefix already holds ${existingOutput.length} object(s), e.g. ${existingOutput[0]?.key}; use an empty prefix (or resume the run that wrote them with its run id)`,
        { status: 409 },
      );
    }
    return (await store.create(spec)) ? viewOf((await store.read(id)) as NonNullable<Awaited<ReturnType<RunStore['read']>>>) : null;
  }

  return {
    async start(tenant, raw) {
      const request = parseBulkRunRequest(raw, deps.clock.now());
      const id = request.runId ?? `br_${randomBytes(8).toString('hex')}`;
      for (let attempt = 0; attempt < 2; attempt++) {
        const existing = await store.read(id);
        if (existing) return resume(tenant, existing.spec, request);
        const created = await create(tenant, request, id);
        if (created) return created;
        // Another start with the same id won the race: resume that one.
      }
      throw new InvalidInputError('run_conflict', `run ${id} is being created by another request`, { status: 409 });
    },

    async get(tenant, id) {
      const record = await store.read(id);
      return record && record.spec.tenant === tenant ? viewOf(record) : null;
    },

    async cancel(tenant, id) {
      const record = await store.read(id);
      if (!record || record.spec.tenant !== tenant) return null;
      if (record.status !== 'running') return viewOf(record);
      if (await store.finish(id, 'canceled', deps.clock.now(), { error: { code: 'canceled', message: 'canceled by the caller' } })) {
        await removeQueuedChunks(deps, store, record.spec);
        const view = viewOf((await store.read(id)) ?? record);
        await notifyRun(deps, 'bulk.canceled', view);
        return view;
      }
      return viewOf((await store.read(id)) ?? record);
    },
  };
}

/** Removes the run's chunk jobs no worker holds yet, and its capacity request. Parts written stay. */
export async function removeQueuedChunks(deps: BulkDeps, store: RunStore, spec: BulkRunSpec): Promise<void> {
  await clearCapacityRequest(deps.redis, deps.prefix, spec.model, spec.id);
  const chunks = await store.outstanding(spec.id);
  if (chunks.length === 0) return;
  const queue = createChunkQueue(deps.redis, deps.prefix, spec.model, spec.version, chunkJobOptions(deps));
  try {
    for (const chunk of chunks) await queue.remove(spec.id, chunk);
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

/** The input prefix holds objects, each of a format this model can read. */
async function checkInput(deps: BulkDeps, spec: BulkRunSpec, manifest: ModelManifest): Promise<void> {
  const objects = (await deps.storeFor(spec.input.bucket).list(spec.input.prefix)).filter((o) => !o.key.endsWith('/'));
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
    if (format === 'csv' && manifest.inputs.length !== 1) {
      throw new InvalidInputError(
        'csv_needs_single_input',
        `${o.key} is CSV but model ${spec.model} has ${manifest.inputs.length} inputs; use JSONL`,
        {
          status: 422,
        },
      );
    }
  }
}

function settingsOf(request: BulkRunRequest): Partial<Pick<BulkRunSpec, 'deadline' | 'webhook' | 'maxBadRows'>> {
  const out: Partial<Pick<BulkRunSpec, 'deadline' | 'webhook' | 'maxBadRows'>> = {};
  if (typeof request.deadline === 'number') out.deadline = request.deadline;
  if (request.webhook) out.webhook = { url: request.webhook.url, events: request.webhook.events ?? [...BULK_WEBHOOK_EVENTS] };
  if (request.maxBadRows !== undefined) out.maxBadRows = request.maxBadRows;
  return out;
}

/** What differs between a stored run and a request for the same id, in words; undefined when none. */
function conflictOf(spec: BulkRunSpec, tenant: string, request: BulkRunRequest): string | undefined {
  if (spec.tenant !== tenant) return 'another owner';
  const input = parseS3Url(request.input, 'input');
  const output = parseS3Url(request.output, 'output');
  const checks: Array<[string, boolean]> = [
    ['model', spec.model !== request.model],
    ['version', request.version !== undefined && spec.version !== request.version],
    ['input', spec.input.bucket !== input.bucket || spec.input.prefix !== input.prefix],
    ['output', spec.output.bucket !== output.bucket || spec.output.prefix !== output.prefix],
    ['format', request.format !== undefined && spec.format !== request.format],
    ['chunkRows', request.chunkRows !== undefined && spec.chunkRows !== request.chunkRows],
  ];
  const differ = checks.filter(([, d]) => d).map(([name]) => name);
  return differ.length > 0 ? `a different ${differ.join(', ')}` : undefined;
}
