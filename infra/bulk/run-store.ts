/**
 * A bulk run's record in Redis, under the queue prefix:
 *
 *   <p>:{bulk}:run:<ref>              hash: spec, status, priority, error, listing (pinned at first
 *                                   drive), progress, samples, badRows, rowsDone, chunksDone,
 *                                   manifest, startedAt, finishedAt
 *   <p>:{bulk}:run:<ref>:parts        hash: chunk → its BulkPartResult (a chunk counts once)
 *   <p>:{bulk}:run:<ref>:objects      hash: input key → ObjectStats, once that object was planned
 *   <p>:{bulk}:run:<ref>:outstanding  set: chunks enqueued and not yet counted (cancel removes their jobs)
 *   <p>:{bulk}:running                set: refs of running runs (the supervisor's worklist)
 *   <p>:{bulk}:active-runs[:<tenant>] zsets: runs counted against the caps (active-runs.ts); an end leaves them
 *
 * A run's ref is `<tenant>/<id>` (runRef): run ids are the tenant's own, so the same id from two
 * tenants names two runs, and nothing a tenant does can tell whether another uses an id. The ref
 * is also the run's name in its chunk job ids and capacity requests; '/' is in neither a tenant
 * name nor a run id, so a ref never reads two ways. Runs recorded before ids were per tenant
 * keep their bare id as ref (`<p>:{bulk}:run:<id>`): `find` falls back to it, for its own
 * tenant only, so they stay readable, resumable and drivable.
 *
 * Status: running → succeeded | failed | canceled, each end written by a script that first
 * checks the run is still running (a driver that finishes a run someone canceled meanwhile
 * changes nothing). An end is final: no script leads out of one, and a resume's settings are
 * written only while the run runs, so what its end event told (a `bulk.failed` webhook, the
 * CLI's exit code) stays true. Ended runs expire after RETENTION_S; parts and manifests in S3
 * are the lasting record.
 *
 * `{bulk}` is a Redis Cluster hash tag shared by every run's keys: the scripts touch a run's
 * keys together with the `running` set, so all of them must be in one slot. (Only records live
 * here; the chunk jobs are in the model queues, which spread over the shards.)
 */

import type { BadRow, BulkPartResult, BulkProgress, BulkRunSpec, BulkRunStatus, BulkRunView } from '../contracts/bulk.ts';
import type { RedisClient } from '../redis/client.ts';
import {
  bulkActiveRunsKey,
  bulkRunKey,
  bulkRunLeaseKey,
  bulkRunningKey,
  bulkRunObjectsKey,
  bulkRunOutstandingKey,
  bulkRunPartsKey,
} from '../redis/keys.ts';
import { runRowsPerSecond } from './progress.ts';
import { RUN_ID_PATTERN } from './run-request.ts';
import { formatS3Url } from './s3-url.ts';

export const RETENTION_S = 30 * 86_400;

export interface PinnedObject {
  key: string;
  sizeBytes: number;
  etag?: string;
}

/**
 * An input object's place in the run's chunk numbering, saved once it was planned: a resume
 * whose chunks of it are all counted skips it without reading a byte of it.
 */
export interface ObjectStats {
  firstChunk: number;
  chunks: number;
  bytes: number;
}

export interface RunRecord {
  /** The key the record was read under (runRef, or a bare id for a run from before refs). */
  ref: string;
  spec: BulkRunSpec;
  status: BulkRunStatus;
  priority: 'bulk' | 'urgent';
  error?: { code: string; message: string };
  listing?: PinnedObject[];
  progress?: BulkProgress;
  samples: BadRow[];
  badRows: number;
  rowsDone: number;
  chunksDone: number;
  manifest?: string;
  startedAt?: number;
  finishedAt?: number;
}

const CREATE = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'status', 'running', 'priority', 'bulk', 'rowsDone', 0, 'chunksDone', 0, 'badRows', 0)
redis.call('SADD', KEYS[2], ARGV[2])
return 1`;

/** KEYS: record, parts, outstanding. ARGV: chunk, part JSON, rows. */
const RECORD_PART = `
redis.call('SREM', KEYS[3], ARGV[1])
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'rowsDone', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'chunksDone', 1)
return 1`;

/**
 * KEYS: record, running, parts, objects, outstanding, active runs (all tenants'). ARGV: status,
 * finishedAt, id, ttl, the tenants' active-runs key head, field, value, … The run's slots
 * (active-runs.ts) are given back in the same step as its end: its tenant is read from its spec.
 */
const FINISH = `
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'finishedAt', ARGV[2])
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('SREM', KEYS[2], ARGV[3])
redis.call('ZREM', KEYS[6], ARGV[3])
local ok, spec = pcall(cjson.decode, redis.call('HGET', KEYS[1], 'spec') or '')
if ok and type(spec) == 'table' and type(spec.tenant) == 'string' then redis.call('ZREM', ARGV[5] .. spec.tenant, ARGV[3]) end
for i = 1, 5 do if i ~= 2 then redis.call('EXPIRE', KEYS[i], ARGV[4]) end end
return 1`;

/** KEYS: record. ARGV: spec JSON. */
const UPDATE_SPEC = `
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'spec', ARGV[1])
return 1`;

export type RunStore = ReturnType<typeof createRunStore>;

/** A run's ref: the tenant's id for it, qualified by the tenant. */
export function runRef(tenant: string, id: string): string {
  return `${tenant}/${id}`;
}

export function createRunStore(redis: RedisClient, prefix: string) {
  const running = bulkRunningKey(prefix);
  const rec = (ref: string) => bulkRunKey(prefix, ref);
  const keys = (ref: string) => [
    rec(ref),
    running,
    bulkRunPartsKey(prefix, ref),
    bulkRunObjectsKey(prefix, ref),
    bulkRunOutstandingKey(prefix, ref),
  ];
  const read = async (ref: string): Promise<RunRecord | null> => {
    const h = await redis.hgetall(rec(ref));
    return h.spec ? parseRecord(ref, h) : null;
  };

  return {
    leaseKey: (ref: string) => bulkRunLeaseKey(prefix, ref),

    /** Creates the record under runRef(spec.tenant, spec.id); false when one exists already (nothing written). */
    async create(spec: BulkRunSpec): Promise<boolean> {
      const ref = runRef(spec.tenant, spec.id);
      return (await redis.eval(CREATE, 2, rec(ref), running, JSON.stringify(spec), ref)) === 1;
    },

    read,

    /** The tenant's run with this id, or null: another tenant's run with the same id is not found. */
    async find(tenant: string, id: string): Promise<RunRecord | null> {
      if (!RUN_ID_PATTERN.test(id)) return null;
      const record = await read(runRef(tenant, id));
      if (record) return record;
      const legacy = await read(id);
      return legacy?.spec.tenant === tenant ? legacy : null;
    },

    async status(ref: string): Promise<BulkRunStatus | null> {
      return (await redis.hget(rec(ref), 'status')) as BulkRunStatus | null;
    },

    /** The refs of running runs. */
    async runningIds(): Promise<string[]> {
      return redis.smembers(running);
    },

    /** Replaces a running run's spec (a resume's deadline and webhook); false, and nothing written, once it ended. */
    async updateSpec(ref: string, spec: BulkRunSpec): Promise<boolean> {
      return (await redis.eval(UPDATE_SPEC, 1, rec(ref), JSON.stringify(spec))) === 1;
    },

    /** Pins the listing on first call; every call returns the pinned one. */
    async pinListing(ref: string, listing: PinnedObject[]): Promise<PinnedObject[]> {
      await redis.hsetnx(rec(ref), 'listing', JSON.stringify(listing));
      return JSON.parse((await redis.hget(rec(ref), 'listing')) ?? '[]') as PinnedObject[];
    },

    async markStarted(ref: string, at: number): Promise<void> {
      await redis.hsetnx(rec(ref), 'startedAt', String(at));
    },

    async setPriority(ref: string, priority: 'bulk' | 'urgent'): Promise<void> {
      await redis.hset(rec(ref), 'priority', priority);
    },

    /** Counts a chunk's part once (true the first time); forgets it as outstanding either way. */
    async recordPart(ref: string, chunk: number, part: BulkPartResult): Promise<boolean> {
      const [record, , parts, , outstanding] = keys(ref) as [string, string, string, string, string];
      return (await redis.eval(RECORD_PART, 3, record, parts, outstanding, chunk, JSON.stringify(part), part.rows)) === 1;
    },

    async partsDone(ref: string, chunks: number[]): Promise<boolean[]> {
      if (chunks.length === 0) return [];
      const found = await redis.hmget(`${rec(ref)}:parts`, ...chunks.map(String));
      return found.map((v) => v !== null);
    },

    /** Parts of chunks [from, to) in chunk order; undefined where a chunk has none. */
    async partsRange(ref: string, from: number, to: number): Promise<Array<BulkPartResult | undefined>> {
      if (to <= from) return [];
      const fields = Array.from({ length: to - from }, (_, i) => String(from + i));
      const found = await redis.hmget(`${rec(ref)}:parts`, ...fields);
      return found.map((v) => (v === null ? undefined : (JSON.parse(v) as BulkPartResult)));
    },

    async parts(ref: string): Promise<Map<number, BulkPartResult>> {
      const all = await redis.hgetall(`${rec(ref)}:parts`);
      const out = new Map<number, BulkPartResult>();
      for (const [chunk, json] of Object.entries(all)) out.set(Number(chunk), JSON.parse(json) as BulkPartResult);
      return out;
    },

    async objectStats(ref: string): Promise<Map<string, ObjectStats>> {
      const all = await redis.hgetall(`${rec(ref)}:objects`);
      return new Map(Object.entries(all).map(([key, json]) => [key, JSON.parse(json) as ObjectStats]));
    },

    async saveObjectStats(ref: string, key: string, stats: ObjectStats): Promise<void> {
      await redis.hset(`${rec(ref)}:objects`, key, JSON.stringify(stats));
    },

    async addOutstanding(ref: string, chunk: number): Promise<void> {
      await redis.sadd(`${rec(ref)}:outstanding`, String(chunk));
    },

    async outstanding(ref: string): Promise<number[]> {
      return (await redis.smembers(`${rec(ref)}:outstanding`)).map(Number);
    },

    async saveProgress(ref: string, progress: BulkProgress, samples: BadRow[]): Promise<void> {
      await redis.hset(rec(ref), 'progress', JSON.stringify(progress), 'badRows', progress.badRows, 'samples', JSON.stringify(samples));
    },

    /** Ends a running run; false when it was not running (someone else ended it first). */
    async finish(
      ref: string,
      status: Exclude<BulkRunStatus, 'running'>,
      at: number,
      fields: { error?: { code: string; message: string }; manifest?: string } = {},
    ): Promise<boolean> {
      const extra: string[] = [];
      if (fields.error) extra.push('error', JSON.stringify(fields.error));
      if (fields.manifest) extra.push('manifest', fields.manifest);
      const [all, tenants] = [bulkActiveRunsKey(prefix), bulkActiveRunsKey(prefix, '')];
      return (await redis.eval(FINISH, 6, ...keys(ref), all, status, at, ref, RETENTION_S, tenants, ...extra)) === 1;
    },
  };
}

function parseRecord(ref: string, h: Record<string, string>): RunRecord {
  const json = <T>(v: string | undefined): T | undefined => (v ? (JSON.parse(v) as T) : undefined);
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const record: RunRecord = {
    ref,
    spec: JSON.parse(h.spec as string) as BulkRunSpec,
    status: (h.status as BulkRunStatus | undefined) ?? 'running',
    priority: h.priority === 'urgent' ? 'urgent' : 'bulk',
    samples: json<BadRow[]>(h.samples) ?? [],
    badRows: Number(h.badRows ?? 0),
    rowsDone: Number(h.rowsDone ?? 0),
    chunksDone: Number(h.chunksDone ?? 0),
  };
  const optional: Partial<RunRecord> = {
    error: json(h.error),
    listing: json(h.listing),
    progress: json(h.progress),
    manifest: h.manifest,
    startedAt: num(h.startedAt),
    finishedAt: num(h.finishedAt),
  };
  for (const [k, v] of Object.entries(optional)) if (v !== undefined) (record as unknown as Record<string, unknown>)[k] = v;
  return record;
}

/** The run as the API and the CLI show it: live counters over the last saved progress. */
export function viewOf(record: RunRecord): BulkRunView {
  const { spec } = record;
  const saved = record.progress;
  const progress: BulkProgress = {
    rowsTotal: 0,
    rowsTotalExact: false,
    rowsPerSecond: 0,
    ...saved,
    rowsDone: record.rowsDone,
    chunksDone: record.chunksDone,
    badRows: record.badRows,
  };
  progress.rowsTotal = Math.max(progress.rowsTotal, progress.rowsDone);
  if (record.status !== 'running') {
    delete progress.etaAt;
    delete progress.etaSeconds;
    progress.rowsPerSecond = record.status === 'succeeded' ? finishedRate(record, progress.rowsPerSecond) : 0;
  }
  const view: BulkRunView = {
    id: spec.id,
    tenant: spec.tenant,
    model: spec.model,
    version: spec.version,
    status: record.status,
    input: formatS3Url(spec.input),
    output: formatS3Url(spec.output),
    chunkRows: spec.chunkRows,
    priority: record.priority,
    progress,
    badRowSamples: record.samples,
    createdAt: spec.createdAt,
  };
  if (spec.deadline !== undefined) view.deadline = spec.deadline;
  if (spec.webhook) view.webhook = spec.webhook;
  if (record.error) view.error = record.error;
  if (record.manifest) view.manifest = record.manifest;
  if (record.startedAt !== undefined) view.startedAt = record.startedAt;
  if (record.finishedAt !== undefined) view.finishedAt = record.finishedAt;
  return view;
}

/** A succeeded run's rows/s, as its manifest gives it; a record without its times keeps the last rate saved. */
function finishedRate(record: RunRecord, saved: number): number {
  const { startedAt, finishedAt } = record;
  return startedAt !== undefined && finishedAt !== undefined ? runRowsPerSecond(record.rowsDone, startedAt, finishedAt) : saved;
}
