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
 * What counts (DESIGN §4 job contract), per request: a stream event names a BullMQ job, which
 * carries one request (a job from before queue entries, a bulk chunk) or several (a queue
 * entry's members, infra/contracts/entry.ts), and each request is one outcome:
 * - `completed`: a job's is a success. Its latency is the job's own `timings.queueMs + inferMs`
 *   from the returnvalue in the stream entry, i.e. submit → result as the caller sees it (queue
 *   wait included, since a slower version also backs up its queue), without a job read. An
 *   entry's returnvalue holds each member's outcome: a success with its own timings, a failure
 *   with its own code (a member fails alone: bisected bad input, its deadline), or skipped
 *   (canceled or expired before the worker took the entry: nothing).
 * - `failed`: a failure (BullMQ 6 emits it only for a job's final failure, never for an attempt
 *   that will be retried), except codes that are the caller's doing, which count for nothing
 *   (a tenant can send any number of them, pinned to the canary, to force a rollback):
 *   `invalid_input` (the API's or the worker's validation, and an index out of the model's range,
 *   worker/engine/rejections.ts), `canceled`, and `deadline_exceeded`: the worker fails a job
 *   whose `timeoutMs` passed before it was taken, without running it, so the caller chose the
 *   deadline (`timeoutMs: 1` expires on any version). A version too slow to take its jobs in
 *   time still shows, in the latency of the jobs it serves (queue wait included).
 *   `inference_failed` (the model failed on data it accepts) and `worker_crashed` count.
 *   An entry that failed for good fails each member it still carried: the stream entry holds
 *   only its id and reason, so the counts come from one pipelined read of the entries' BullMQ
 *   hashes (their member lists) and skip sets, made for counted failures only (rare) and before
 *   the batch is applied, which keeps the batch exactly once. An entry whose hash is already gone
 *   counts as one failure.
 * - Everything else (added, waiting, active, member-ended, …) is skipped.
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

import { ENTRY_ID_PREFIX, type EntryData, isEntryResult, type MemberOutcome } from '../contracts/entry.ts';
import { queueName } from '../contracts/job.ts';
import { parseFailure, readEventStreams, type StreamEntry } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { canaryAggKey, canaryCursorKey, entrySkipKey, queueKey } from '../redis/keys.ts';
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

/**
 * What a stream entry says about the version: one outcome per request its job carried, none when
 * it says nothing (or the failure is the caller's). `failedRequests`: for a `failed` entry, how
 * many requests the failed job still carried (see the header); 1 when not given.
 */
export function outcomesOf(streamId: string, fields: Record<string, string>, failedRequests = 1): Outcome[] {
  const atMs = Number(streamId.split('-')[0]);
  if (fields.event === 'completed') return completedOutcomes(atMs, fields.returnvalue);
  if (fields.event !== 'failed' || !countedFailure(fields)) return [];
  return Array.from({ length: failedRequests }, () => ({ atMs, ok: false }));
}

/** A `failed` stream entry whose code is not the caller's doing. */
function countedFailure(fields: Record<string, string>): boolean {
  return fields.event === 'failed' && !IGNORED_FAILURE_CODES.has(parseFailure(fields.failedReason).code);
}

function completedOutcomes(atMs: number, returnvalue: string | undefined): Outcome[] {
  let result: unknown;
  try {
    result = JSON.parse(returnvalue ?? 'null');
  } catch {
    // Not JSON (a foreign producer): the success counts, without a latency.
  }
  if (!isEntryResult(result)) return [{ atMs, ok: true, ...latencyOf(result) }];
  return Object.values(result.members).flatMap((m) => memberOutcome(atMs, m));
}

function memberOutcome(atMs: number, member: MemberOutcome): Outcome[] {
  if (member.status === 'succeeded') return [{ atMs, ok: true, ...latencyOf(member) }];
  if (member.status === 'skipped' || IGNORED_FAILURE_CODES.has(member.error.code)) return [];
  return [{ atMs, ok: false }];
}

/** A JobResult's (or a member outcome's) latency; none without usable timings. */
function latencyOf(result: unknown): { latencyMs?: number } {
  const timings = (result as { timings?: { queueMs?: unknown; inferMs?: unknown } } | null)?.timings;
  const { queueMs, inferMs } = timings ?? {};
  if (typeof queueMs === 'number' && typeof inferMs === 'number' && Number.isFinite(queueMs + inferMs)) {
    return { latencyMs: queueMs + inferMs };
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
    const failedRequests = await failedEntryRequests(queue, entries);
    const buckets = aggregate(entries, now - deps.windowMs, failedRequests);
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

  /**
   * For each counted `failed` stream entry of a queue entry: the requests it still carried (its
   * members less those skipped), by one pipelined read on the queue's slot. Keyed by stream id.
   */
  async function failedEntryRequests(queue: string, entries: readonly StreamEntry[]): Promise<Map<string, number>> {
    const failed = entries.filter((e) => e.fields.jobId?.startsWith(ENTRY_ID_PREFIX) && countedFailure(e.fields));
    const counts = new Map<string, number>();
    if (failed.length === 0) return counts;
    const pipeline = deps.redis.pipeline();
    for (const { fields } of failed) {
      const entryId = fields.jobId as string;
      // The entry's BullMQ job hash (bullJobKey's key, infra/queue/bullmq-keys.ts), named as keys.ts names BullMQ's keys for readers without a Queue.
      pipeline.hget(queueKey(deps.prefix, queue, entryId), 'data');
      pipeline.scard(entrySkipKey(deps.prefix, queue, entryId));
    }
    const replies = (await pipeline.exec()) ?? [];
    failed.forEach(({ id }, i) => {
      const [dataErr, data] = replies[2 * i] ?? [];
      const [skipErr, skipped] = replies[2 * i + 1] ?? [];
      if (dataErr || skipErr) throw dataErr ?? skipErr;
      const members = membersOf(data as string | null);
      // A hash already gone (retention, removed): one failure, as before entries.
      if (members !== undefined) counts.set(id, Math.max(0, members - Number(skipped ?? 0)));
    });
    return counts;
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

/** The member count of an entry's BullMQ `data`; undefined when there is none to read. */
function membersOf(data: string | null): number | undefined {
  if (data === null) return undefined;
  try {
    const members = (JSON.parse(data) as Partial<EntryData>).members;
    return Array.isArray(members) ? members.length : undefined;
  } catch {
    return undefined;
  }
}

/** Bucket start → field → increment, for the entries inside the window. */
function aggregate(
  entries: readonly StreamEntry[],
  windowStartMs: number,
  failedRequests: ReadonlyMap<string, number>,
): Map<number, Map<string, number>> {
  const buckets = new Map<number, Map<string, number>>();
  const inc = (fields: Map<string, number>, field: string) => fields.set(field, (fields.get(field) ?? 0) + 1);
  for (const { id, fields: entry } of entries) {
    for (const outcome of outcomesOf(id, entry, failedRequests.get(id))) count(outcome);
  }
  return buckets;

  function count(outcome: Outcome): void {
    if (outcome.atMs <= windowStartMs) return;
    const bucket = Math.floor(outcome.atMs / BUCKET_MS) * BUCKET_MS;
    const fields = buckets.get(bucket) ?? new Map<string, number>();
    buckets.set(bucket, fields);
    inc(fields, 'n');
    if (!outcome.ok) inc(fields, 'f');
    if (outcome.latencyMs !== undefined) inc(fields, `l${bucketIndex(outcome.latencyMs)}`);
  }
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
