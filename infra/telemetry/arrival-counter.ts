/**
 * Arrival and completion counts summed in memory and written to the arrival history once per
 * flush interval (default 1 s) in one MULTI, instead of a Redis transaction per job. Writing per
 * job cost a draining worker 15% of its CPU (docs/BENCHMARKS.md, "where the time goes").
 *
 * Each count is filed under the minute it was recorded in (the clock read at record time), so a
 * flush that runs after a minute boundary still adds to the right minute.
 *
 * Durability: counts held in memory are lost if the process dies before the next flush (up to
 * one interval's worth), and a flush that Redis refuses is reported to `onError` and dropped,
 * not retried. That is acceptable for what these counts are: the scaler's forecast input, not
 * billing. `close()` flushes what is held; counts recorded after it are written at once.
 *
 * The flush timer only runs while counts are waiting, so an idle process holds no timer. On
 * Lambda a frozen instance flushes when it next thaws (the counts still land in their minute),
 * or never if it is reclaimed first: the same bounded loss as a crash.
 */
import type { Clock } from '../kernel/clock.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { periodicFlush } from '../kernel/periodic-flush.ts';
import type { ArrivalCount, ArrivalHistory, ArrivalKind } from './arrival-history.ts';

const MINUTE_MS = 60_000;

export interface ArrivalCounterOptions {
  /** How often held counts are written (default 1000 ms). */
  flushIntervalMs?: number;
  /** A flush Redis refused (its counts are dropped). Default: ignored. */
  onError?: (err: unknown) => void;
}

export interface ArrivalCounter {
  /** Counts `count` (default 1) arrivals for `model` in the current minute. */
  recordArrival(model: string, count?: number): void;
  /** Counts finished jobs (or rows) the same way. */
  recordCompletion(model: string, count?: number): void;
  /** Counts completed rows that had waited past the SLO the same way. */
  recordLate(model: string, count?: number): void;
  /** Counts rows the result cache answered at submit the same way. */
  recordCached(model: string, count?: number): void;
  /** Writes what is held now; resolves when written (or reported to `onError`). */
  flush(): Promise<void>;
  /** Stops the timer and flushes what is held. Idempotent. */
  close(): Promise<void>;
}

export function createArrivalCounter(
  history: Pick<ArrivalHistory, 'recordMany'>,
  clock: Clock,
  options: ArrivalCounterOptions = {},
): ArrivalCounter {
  const intervalMs = options.flushIntervalMs ?? 1000;
  const onError = options.onError ?? (() => {});
  let held = new Map<string, ArrivalCount>();

  function record(kind: ArrivalKind, model: string, count = 1): void {
    if (!Number.isInteger(count) || count < 0)
      throw new InvalidInputError('invalid_count', `count must be a non-negative integer (got ${count})`);
    if (count === 0) return;
    const minute = Math.floor(clock.now() / MINUTE_MS) * MINUTE_MS;
    const key = `${kind}\n${model}\n${minute}`;
    const entry = held.get(key);
    if (entry) entry.count += count;
    else held.set(key, { kind, model, count, at: minute });
    timer.held();
  }

  async function flush(): Promise<void> {
    if (held.size === 0) return;
    const counts = [...held.values()];
    held = new Map();
    try {
      await history.recordMany(counts);
    } catch (err) {
      onError(err);
    }
  }

  const timer = periodicFlush(flush, clock, intervalMs);

  return {
    recordArrival: (model, count) => record('arrivals', model, count),
    recordCompletion: (model, count) => record('completions', model, count),
    recordLate: (model, count) => record('late', model, count),
    recordCached: (model, count) => record('cached', model, count),
    flush,
    close: timer.close,
  };
}
