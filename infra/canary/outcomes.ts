/**
 * Outcomes per model version, over a sliding window, read from the BullMQ events stream of the
 * version's queue (`<prefix>:{infer.<model>.<version>}:events`, the stream the webhook dispatcher
 * reads too) and kept as compact aggregates in Redis, so that any number of guard processes
 * share them and none keeps state in memory across restarts:
 *
 *   <prefix>:canary:agg:<queue>:<bucketStartMs>   hash, one per 10 s bucket: n (outcomes),
 *                                                 f (failures), l<i> (latency histogram counts)
 *   <prefix>:canary:cursor:<queue>                the id of the last stream entry aggregated
 *
 * What counts (DESIGN §4 job contract):
 * - `completed`: a success. Its latency is the job's own `timings.queueMs + inferMs` from the
 *   returnvalue in the entry, i.e. submit → result as the caller sees it (queue wait included,
 *   since a slower version also backs up its queue), without a job read per entry.
 * - `failed`: a failure (BullMQ 6 emits it only for a job's final failure, never for an attempt
 *   that will be retried), except codes that are the caller's doing, which count for nothing
 *   (a tenant can send any number of them, pinned to the canary, to force a rollback):
 *   `invalid_input` (the API's or the worker's validation, and an index out of the model's range,
 *   worker/engine/rejections.ts), `canceled`, and `deadline_exceeded`: the worker fails a job
 *   whose `timeoutMs` passed before it was taken, without running it, so the caller chose the
 *   deadline (`timeoutMs: 1` expires on any version). A version too slow to take its jobs in
 *   time still shows, in the latency of the jobs it serves (queue wait included).
 *   `inference_failed` (the model failed on data it accepts) and `worker_crashed` count.
 * - Everything else (added, waiting, active, …) is skipped.
 *
 * An outcome is bucketed by its entry's time (Redis's clock when the job finished), not by when
 * a guard read it, so a guard that restarts or catches up puts outcomes where they happened.
 * Entries older than the window are skipped; a queue seen for the first time is read from the
 * window's start, not from the stream's (which may hold a day of events).
 *
 * Exactly once, with any number of readers: each batch's increments and the cursor's advance
 * are applied by one script that first checks the cursor is still where the batch was read
 * from; a reader that lost the race drops its batch (the winner counted it) and stops.
 */

import { queueName } from '../contracts/job.ts';
import { parseFailure, readEventStreams, type StreamEntry } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { canaryAggKey, canaryCursorKey } from '../redis/keys.ts';
import { bucketIndex, estimateQuantile, type LatencyCounts } from './latency-histogram.ts';

/** Width of one aggregate bucket. */
export const BUCKET_MS = 10_000;
/** Failure codes that are the caller's doing: they count neither as a request nor as a failure. */
export const IGNORED_FAILURE_CODES: ReadonlySet<string> = new Set(['invalid_input', 'canceled', 'deadline_exceeded']);
/** Cursors of queues nobody reads any more disappear after a day. */
const CURSOR_TTL_MS = 86_400_000;

export interface Outcome {
  /** Epoch ms of the stream entry (when the job finished). */
  atMs: number;
  ok: boolean;
  /** Successes only, when the result carried timings. */
  latencyMs?: number;
}

export interface WindowStats {
  /** Outcomes in the window (successes and counted failures). */
  requests: number;
  failures: number;
  /** failures / requests; 0 without requests. */
  errorRate: number;
  /** Successes with a latency: what the percentiles are estimated from. */
  latencySamples: number;
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface OutcomeStoreDeps {
  redis: RedisClient;
  prefix: string;
  /** Length of the sliding window. */
  windowMs: number;
  /** Stream entries read per batch. Default 1000. */
  batchSize?: number;
  /** Batches per queue per ingest call, so one busy queue cannot hold a tick for long. Default 20. */
  maxBatches?: number;
}

export interface OutcomeStore {
  /** Aggregates the version's new stream entries; returns how many entries this call consumed. */
  ingest(model: string, version: string, now: number): Promise<number>;
  /** The version's outcomes in the window ending at `now`. */
  window(model: string, version: string, now: number): Promise<WindowStats>;
}

/** What a stream entry says about the version; null when it says nothing (or is the caller's fault). */
export function outcomeOf(entryId: string, fields: Record<string, string>): Outcome | null {
  const atMs = Number(entryId.split('-')[0]);
  if (fields.event === 'completed') return { atMs, ok: true, ...latencyOf(fields.returnvalue) };
  if (fields.event !== 'failed') return null;
  if (IGNORED_FAILURE_CODES.has(parseFailure(fields.failedReason).code)) return null;
  return { atMs, ok: false };
}

function latencyOf(returnvalue: string | undefined): { latencyMs?: number } {
  try {
    const timings = (JSON.parse(returnvalue ?? 'null') as { timings?: { queueMs?: unknown; inferMs?: unknown } } | null)?.timings;
    const { queueMs, inferMs } = timings ?? {};
    if (typeof queueMs === 'number' && typeof inferMs === 'number' && Number.isFinite(queueMs + inferMs)) {
      return { latencyMs: queueMs + inferMs };
    }
  } catch {
    // Not a JobResult (a foreign producer): the success counts, without a latency.
  }
  return {};
}

/**
 * Applies one batch (see the header). KEYS: cursor, then one aggregate hash per bucket. ARGV:
 * the cursor the batch was read from ('' = none), the new cursor, the buckets' TTL, the
 * cursor's TTL, a JSON array of {field: increment} aligned with KEYS[2…]. 1 = applied, 0 = lost.
 */
const APPLY_SCRIPT = `
if (redis.call('GET', KEYS[1]) or '') ~= ARGV[1] then return 0 end
local increments = cjson.decode(ARGV[5])
for i, fields in ipairs(increments) do
  for field, n in pairs(fields) do redis.call('HINCRBY', KEYS[i + 1], field, n) end
  redis.call('PEXPIRE', KEYS[i + 1], ARGV[3])
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
return 1
`;

export function createOutcomeStore(deps: OutcomeStoreDeps): OutcomeStore {
  const batchSize = deps.batchSize ?? 1000;
  const maxBatches = deps.maxBatches ?? 20;
  // A bucket outlives the window it can fall in, with a bucket to spare for clock skew.
  const bucketTtlMs = deps.windowMs + 2 * BUCKET_MS;
  const cursorKey = (queue: string) => canaryCursorKey(deps.prefix, queue);
  const aggKey = (queue: string, bucket: number) => canaryAggKey(deps.prefix, queue, bucket);

  /** Reads and applies one batch; the new cursor, or null when there was nothing or the race was lost. */
  async function step(queue: string, stored: string | null, now: number): Promise<{ cursor: string; read: number } | null> {
    const from = stored ?? `${Math.max(0, now - deps.windowMs)}-0`;
    const [read] = await readEventStreams(deps.redis, deps.prefix, [[queue, from]], { count: batchSize });
    const entries = read?.entries ?? [];
    const last = entries.at(-1)?.id;
    if (last === undefined) return null;
    const buckets = aggregate(entries, now - deps.windowMs);
    const keys = [...buckets.keys()];
    const applied = await deps.redis.eval(
      APPLY_SCRIPT,
      1 + keys.length,
      cursorKey(queue),
      ...keys.map((b) => aggKey(queue, b)),
      stored ?? '',
      last,
      bucketTtlMs,
      CURSOR_TTL_MS,
      JSON.stringify(keys.map((b) => Object.fromEntries(buckets.get(b) ?? []))),
    );
    return applied === 1 ? { cursor: last, read: entries.length } : null;
  }

  return {
    async ingest(model, version, now) {
      const queue = queueName(model, version);
      let cursor = await deps.redis.get(cursorKey(queue));
      let consumed = 0;
      for (let i = 0; i < maxBatches; i++) {
        const done = await step(queue, cursor, now);
        if (!done) break;
        consumed += done.read;
        cursor = done.cursor;
        if (done.read < batchSize) break;
      }
      return consumed;
    },

    async window(model, version, now) {
      const queue = queueName(model, version);
      const first = Math.floor((now - deps.windowMs) / BUCKET_MS) + 1;
      const last = Math.floor(now / BUCKET_MS);
      const pipeline = deps.redis.pipeline();
      for (let b = first; b <= last; b++) pipeline.hgetall(aggKey(queue, b * BUCKET_MS));
      const hashes = ((await pipeline.exec()) ?? []).map(([, value]) => (value ?? {}) as Record<string, string>);
      return statsOf(hashes);
    },
  };
}

/** Bucket start → field → increment, for the entries inside the window. */
function aggregate(entries: readonly StreamEntry[], windowStartMs: number): Map<number, Map<string, number>> {
  const buckets = new Map<number, Map<string, number>>();
  const inc = (fields: Map<string, number>, field: string) => fields.set(field, (fields.get(field) ?? 0) + 1);
  for (const { id, fields: entry } of entries) {
    const outcome = outcomeOf(id, entry);
    if (!outcome || outcome.atMs <= windowStartMs) continue;
    const bucket = Math.floor(outcome.atMs / BUCKET_MS) * BUCKET_MS;
    const fields = buckets.get(bucket) ?? new Map<string, number>();
    buckets.set(bucket, fields);
    inc(fields, 'n');
    if (!outcome.ok) inc(fields, 'f');
    if (outcome.latencyMs !== undefined) inc(fields, `l${bucketIndex(outcome.latencyMs)}`);
  }
  return buckets;
}

/** Sums bucket hashes into window figures. */
export function statsOf(hashes: ReadonlyArray<Record<string, string>>): WindowStats {
  let requests = 0;
  let failures = 0;
  const latency: LatencyCounts = new Map();
  for (const hash of hashes) {
    for (const [field, raw] of Object.entries(hash)) {
      const n = Number(raw);
      if (field === 'n') requests += n;
      else if (field === 'f') failures += n;
      else if (field.startsWith('l')) {
        const index = Number(field.slice(1));
        latency.set(index, (latency.get(index) ?? 0) + n);
      }
    }
  }
  return {
    requests,
    failures,
    errorRate: requests > 0 ? failures / requests : 0,
    latencySamples: [...latency.values()].reduce((sum, n) => sum + n, 0),
    p50Ms: estimateQuantile(latency, 0.5),
    p95Ms: estimateQuantile(latency, 0.95),
  };
}
