/**
 * A bulk run's record in Redis, under the queue prefix:
 *
 *   <p>:{bulk}:run:<id>              hash: spec, status, priority, error, listing (pinned at first
 *                                  drive), progress, samples, badRows, rowsDone, chunksDone,
 *                                  manifest, startedAt, finishedAt
 *   <p>:{bulk}:run:<id>:parts        hash: chunk → its BulkPartResult (a chunk counts once)
 *   <p>:{bulk}:run:<id>:objects      hash: input key → ObjectStats, once that object was read whole
 *   <p>:{bulk}:run:<id>:outstanding  set: chunks enqueued and not yet counted (cancel removes their jobs)
 *   <p>:{bulk}:running               set: ids of running runs (the supervisor's worklist)
 *
 * Status: running → succeeded | failed | canceled, each end written by a script that first
 * checks the run is still running (a driver that finishes a run someone canceled meanwhile
 * changes nothing). A failed or canceled run can be reopened (started again with the same id).
 * Ended runs expire after RETENTION_S; parts and manifests in S3 are the lasting record.
 *
 * `{bulk}` is a Redis Cluster hash tag shared by every run's keys: the scripts touch a run's
 * keys together with the `running` set, so all of them must be in one slot. (Only records live
 * here; the chunk jobs are in the model queues, which spread over the shards.)
 */

import type { BadRow, BulkPartResult, BulkProgress, BulkRunSpec, BulkRunStatus, BulkRunView } from '../contracts/bulk.ts';
import type { RedisClient } from '../redis/client.ts';
import { bulkRunKey, bulkRunLeaseKey, bulkRunningKey, bulkRunObjectsKey, bulkRunOutstandingKey, bulkRunPartsKey } from '../redis/keys.ts';
import { formatS3Url } from './s3-url.ts';

export const RETENTION_S = 30 * 86_400;

export interface PinnedObject {
  key: string;
  sizeBytes: number;
  etag?: string;
}

/** What a whole read of one input object found; lets a resume skip objects whose chunks are all done. */
export interface ObjectStats {
  firstChunk: number;
  chunks: number;
  rows: number;
  badRows: number;
  bytes: number;
}

export interface RunRecord {
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

/** KEYS: record, running, parts, objects, outstanding. ARGV: status, finishedAt, id, ttl, field, value, … */
const FINISH = `
if redis.call('HGET', KEYS[1], 'status') ~= 'running' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'finishedAt', ARGV[2])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
redis.call('SREM', KEYS[2], ARGV[3])
for i = 1, 5 do if i ~= 2 then redis.call('EXPIRE', KEYS[i], ARGV[4]) end end
return 1`;

/** KEYS: record, running, parts, objects, outstanding. ARGV: id. */
const REOPEN = `
local status = redis.call('HGET', KEYS[1], 'status')
if status ~= 'failed' and status ~= 'canceled' then return 0 end
redis.call('HSET', KEYS[1], 'status', 'running')
redis.call('HDEL', KEYS[1], 'error', 'finishedAt')
redis.call('SADD', KEYS[2], ARGV[1])
for i = 1, 5 do if i ~= 2 then redis.call('PERSIST', KEYS[i]) end end
return 1`;

export type RunStore = ReturnType<typeof createRunStore>;

export function createRunStore(redis: RedisClient, prefix: string) {
  const running = bulkRunningKey(prefix);
  const rec = (id: string) => bulkRunKey(prefix, id);
  const keys = (id: string) => [
    rec(id),
    running,
    bulkRunPartsKey(prefix, id),
    bulkRunObjectsKey(prefix, id),
    bulkRunOutstandingKey(prefix, id),
  ];

  return {
    leaseKey: (id: string) => bulkRunLeaseKey(prefix, id),

    /** Creates the record; false when one with this id exists already (nothing written). */
    async create(spec: BulkRunSpec): Promise<boolean> {
      return (await redis.eval(CREATE, 2, rec(spec.id), running, JSON.stringify(spec), spec.id)) === 1;
    },

    async read(id: string): Promise<RunRecord | null> {
      const h = await redis.hgetall(rec(id));
      return h.spec ? parseRecord(h) : null;
    },

    async status(id: string): Promise<BulkRunStatus | null> {
      return (await redis.hget(rec(id), 'status')) as BulkRunStatus | null;
    },

    async runningIds(): Promise<string[]> {
      return redis.smembers(running);
    },

    /** Replaces the spec's settings that do not change outputs (deadline, webhook, maxBadRows). */
    async updateSpec(spec: BulkRunSpec): Promise<void> {
      await redis.hset(rec(spec.id), 'spec', JSON.stringify(spec));
    },

    async reopen(id: string): Promise<boolean> {
      return (await redis.eval(REOPEN, 5, ...keys(id), id)) === 1;
    },

    /** Pins the listing on first call; every call returns the pinned one. */
    async pinListing(id: string, listing: PinnedObject[]): Promise<PinnedObject[]> {
      await redis.hsetnx(rec(id), 'listing', JSON.stringify(listing));
      return JSON.parse((await redis.hget(rec(id), 'listing')) ?? '[]') as PinnedObject[];
    },

    async markStarted(id: string, at: number): Promise<void> {
      await redis.hsetnx(rec(id), 'startedAt', String(at));
    },

    async setPriority(id: string, priority: 'bulk' | 'urgent'): Promise<void> {
      await redis.hset(rec(id), 'priority', priority);
    },

    /** Counts a chunk's part once (true the first time); forgets it as outstanding either way. */
    async recordPart(id: string, chunk: number, part: BulkPartResult): Promise<boolean> {
      const [record, , parts, , outstanding] = keys(id) as [string, string, string, string, string];
      return (await redis.eval(RECORD_PART, 3, record, parts, outstanding, chunk, JSON.stringify(part), part.rows)) === 1;
    },

    async partsDone(id: string, chunks: number[]): Promise<boolean[]> {
      if (chunks.length === 0) return [];
      const found = await redis.hmget(`${rec(id)}:parts`, ...chunks.map(String));
      return found.map((v) => v !== null);
    },

    async parts(id: string): Promise<Map<number, BulkPartResult>> {
      const all = await redis.hgetall(`${rec(id)}:parts`);
      const out = new Map<number, BulkPartResult>();
      for (const [chunk, json] of Object.entries(all)) out.set(Number(chunk), JSON.parse(json) as BulkPartResult);
      return out;
    },

    async objectStats(id: string): Promise<Map<string, ObjectStats>> {
      const all = await redis.hgetall(`${rec(id)}:objects`);
      return new Map(Object.entries(all).map(([key, json]) => [key, JSON.parse(json) as ObjectStats]));
    },

    async saveObjectStats(id: string, key: string, stats: ObjectStats): Promise<void> {
      await redis.hset(`${rec(id)}:objects`, key, JSON.stringify(stats));
    },

    async addOutstanding(id: string, chunk: number): Promise<void> {
      await redis.sadd(`${rec(id)}:outstanding`, String(chunk));
    },

    async outstanding(id: string): Promise<number[]> {
      return (await redis.smembers(`${rec(id)}:outstanding`)).map(Number);
    },

    async saveProgress(id: string, progress: BulkProgress, samples: BadRow[]): Promise<void> {
      await redis.hset(rec(id), 'progress', JSON.stringify(progress), 'badRows', progress.badRows, 'samples', JSON.stringify(samples));
    },

    /** Ends a running run; false when it was not running (someone else ended it first). */
    async finish(
      id: string,
      status: Exclude<BulkRunStatus, 'running'>,
      at: number,
      fields: { error?: { code: string; message: string }; manifest?: string } = {},
    ): Promise<boolean> {
      const extra: string[] = [];
      if (fields.error) extra.push('error', JSON.stringify(fields.error));
      if (fields.manifest) extra.push('manifest', fields.manifest);
      return (await redis.eval(FINISH, 5, ...keys(id), status, at, id, RETENTION_S, ...extra)) === 1;
    },
  };
}

function parseRecord(h: Record<string, string>): RunRecord {
  const json = <T>(v: string | undefined): T | undefined => (v ? (JSON.parse(v) as T) : undefined);
  const num = (v: string | undefined) => (v === undefined ? undefined : Number(v));
  const record: RunRecord = {
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
    progress.rowsPerSecond = record.status === 'succeeded' ? progress.rowsPerSecond : 0;
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
