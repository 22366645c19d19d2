/**
 * Per-deployment arrival and completion counts per minute, in Redis, for the forecaster's
 * weeks of history (DESIGN §8). The API tier records an arrival at submit time; workers (or the
 * controller) record completions.
 *
 * Layout: one string per model per UTC day and kind,
 * `<prefix>:arrivals:<model>:<yyyymmdd>` (and `:completions:`; `:late:` for the completed rows
 * that had waited past SLO_QUEUE_WAIT_MS, what the scaler's SLO control counts; `:cached:` for rows
 * the result cache answered at submit, which no worker saw; infra/redis/keys.ts), holding 1440 unsigned 32-bit
 * big-endian counters, minute of day i at byte 4·i, incremented with BITFIELD INCRBY (atomic,
 * saturating). That is 5.6 KB of counters (about 7 KB of Redis memory) per model per day and
 * kind, 0.4 MB for 28 days of both; a 1440-field hash outgrows Redis's compact listpack encoding
 * (128 entries) and takes about 74 KB a day. Each key expires `retentionDays` (35) after its day
 * ends, so at least 28 full days are always kept without a cleanup job.
 *
 * Writes: `recordMany` applies any number of counts in one MULTI (one round trip; one per key on
 * a Redis Cluster); the API and
 * workers buffer their counts in memory and flush them that way once a second
 * (arrival-counter.ts), since a MULTI per job cost workers 15% of their CPU.
 *
 * Reads: `series` fetches the byte range it needs from every day spanned in one pipeline (one
 * round trip whatever the span; 28 days is 29 GETRANGEs, ~160 KB). Minutes never written read 0:
 * a counter with no arrivals and a counter never touched are the same thing here.
 */

import type { ArrivalSeries } from '../contracts/pool.ts';
import type { Clock } from '../kernel/clock.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { isCluster, type RedisClient } from '../redis/client.ts';
import { arrivalHistoryKey } from '../redis/keys.ts';

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
const BYTES_PER_MINUTE = 4;

export interface ArrivalHistoryOptions {
  /** Days a day's counters are kept after the day ends (default 35). */
  retentionDays?: number;
}

export type ArrivalKind = 'arrivals' | 'completions' | 'late' | 'cached';

/** `count` arrivals or completions of `model` in the minute containing `at`. */
export interface ArrivalCount {
  kind: ArrivalKind;
  model: string;
  count: number;
  at: number;
}

export interface ArrivalHistory {
  /** Counts `count` (default 1) arrivals for `model` in the minute containing `at` (default now). */
  recordArrival(model: string, count?: number, at?: number): Promise<void>;
  /** Counts finished jobs (or rows), the same way. */
  recordCompletion(model: string, count?: number, at?: number): Promise<void>;
  /** Applies every count in one MULTI; all or none are written. */
  recordMany(counts: readonly ArrivalCount[]): Promise<void>;
  /** Arrivals per minute from the minute containing `fromMs` to the one containing `toMs`, both included. */
  series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  /** Completions per minute over the same kind of range. */
  completions(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  /** Completed rows that had waited past SLO_QUEUE_WAIT_MS, per minute. */
  late(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  /** Rows the result cache answered at submit (never arrivals: no worker is needed for them), per minute. */
  cached(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
}

export function createArrivalHistory(
  redis: RedisClient,
  prefix: string,
  clock: Clock,
  options: ArrivalHistoryOptions = {},
): ArrivalHistory {
  const retentionMs = (options.retentionDays ?? 35) * DAY_MS;
  const key = (kind: ArrivalKind, model: string, dayStart: number) => arrivalHistoryKey(prefix, kind, model, dayStamp(dayStart));

  async function recordMany(counts: readonly ArrivalCount[]): Promise<void> {
    for (const { count } of counts) {
      if (!Number.isInteger(count) || count < 0)
        throw new InvalidInputError('invalid_count', `count must be a non-negative integer (got ${count})`);
    }
    const written = counts.filter((c) => c.count > 0);
    if (written.length === 0) return;
    // Grouped by key: a counter's increments and its expiry go in one MULTI, so a counter never
    // exists without its expiry. One MULTI for all keys on a single Redis (one round trip); one
    // per key on a Redis Cluster, where a transaction cannot span slots (all or none then holds
    // per key, not across keys). The expiry goes last: one already past deletes its key, which a
    // later INCRBY would revive.
    const byKey = new Map<string, { expiresAt: number; increments: Array<[string, number]> }>();
    for (const { kind, model, count, at } of written) {
      const dayStart = startOfDay(at);
      const k = key(kind, model, dayStart);
      const entry = byKey.get(k) ?? { expiresAt: dayStart + DAY_MS + retentionMs, increments: [] };
      entry.increments.push([`#${Math.floor((at - dayStart) / MINUTE_MS)}`, count]);
      byKey.set(k, entry);
    }
    const groups = isCluster(redis) ? [...byKey].map((e) => [e]) : [[...byKey]];
    await Promise.all(
      groups.map(async (entries) => {
        const multi = redis.multi();
        for (const [k, { increments }] of entries)
          for (const [offset, count] of increments) multi.bitfield(k, 'OVERFLOW', 'SAT', 'INCRBY', 'u32', offset, count);
        for (const [k, { expiresAt }] of entries) multi.pexpireat(k, expiresAt);
        replyValues(await multi.exec());
      }),
    );
  }

  async function read(kind: ArrivalKind, model: string, fromMs: number, toMs: number): Promise<ArrivalSeries> {
    const startMs = floorMinute(fromMs);
    const length = toMs < fromMs ? 0 : (floorMinute(toMs) - startMs) / MINUTE_MS + 1;
    const perMinute = new Array<number>(length).fill(0);
    if (length === 0) return { startMs, perMinute };
    const days: Array<{ offset: number; count: number }> = [];
    // Concurrent reads, not one pipeline: the days' keys lie in different slots, which a
    // pipeline on a Redis Cluster refuses; ioredis still batches concurrent commands per node.
    const reads: Array<Promise<Buffer>> = [];
    for (let dayStart = startOfDay(startMs); dayStart <= toMs; dayStart += DAY_MS) {
      const first = Math.max(startMs, dayStart);
      const last = Math.min(floorMinute(toMs), dayStart + DAY_MS - MINUTE_MS);
      const fromByte = ((first - dayStart) / MINUTE_MS) * BYTES_PER_MINUTE;
      const toByte = ((last - dayStart) / MINUTE_MS + 1) * BYTES_PER_MINUTE - 1;
      reads.push(redis.getrangeBuffer(key(kind, model, dayStart), fromByte, toByte));
      days.push({ offset: (first - startMs) / MINUTE_MS, count: (last - first) / MINUTE_MS + 1 });
    }
    const buffers = await Promise.all(reads);
    for (const [i, day] of days.entries()) decodeInto(perMinute, day.offset, day.count, buffers[i] as Buffer);
    return { startMs, perMinute };
  }

  return {
    recordArrival: (model, count = 1, at = clock.now()) => recordMany([{ kind: 'arrivals', model, count, at }]),
    recordCompletion: (model, count = 1, at = clock.now()) => recordMany([{ kind: 'completions', model, count, at }]),
    recordMany,
    series: (model, fromMs, toMs) => read('arrivals', model, fromMs, toMs),
    completions: (model, fromMs, toMs) => read('completions', model, fromMs, toMs),
    late: (model, fromMs, toMs) => read('late', model, fromMs, toMs),
    cached: (model, fromMs, toMs) => read('cached', model, fromMs, toMs),
  };
}

/** A pipeline's results, or its first error thrown (ioredis reports errors per command). */
function replyValues(replies: Array<[Error | null, unknown]> | null): unknown[] {
  if (replies === null) throw new Error('Redis transaction was aborted');
  return replies.map(([err, value]) => {
    if (err) throw err;
    return value;
  });
}

/** Counters past the end of the stored string were never written: they stay 0. */
function decodeInto(target: number[], offset: number, count: number, bytes: Buffer): void {
  const available = Math.min(count, Math.floor(bytes.length / BYTES_PER_MINUTE));
  for (let i = 0; i < available; i++) target[offset + i] = bytes.readUInt32BE(i * BYTES_PER_MINUTE);
}

function floorMinute(ms: number): number {
  return Math.floor(ms / MINUTE_MS) * MINUTE_MS;
}

function startOfDay(ms: number): number {
  return Math.floor(ms / DAY_MS) * DAY_MS;
}

function dayStamp(dayStart: number): string {
  return new Date(dayStart).toISOString().slice(0, 10).replaceAll('-', '');
}
