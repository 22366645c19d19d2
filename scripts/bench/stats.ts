/**
 * The arithmetic behind the rows: latency percentiles through an HDR histogram (fixed relative
 * precision, so a p99 over 100,000 samples costs the same memory as over 100), rates, and the
 * plan for a fixed-rate latency run at a share of the measured maximum.
 */
import { build } from 'hdr-histogram-js';

export interface LatencySummary {
  count: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

/**
 * Percentiles of durations in ms, recorded at 1 µs resolution with 3 significant digits (an
 * HDR histogram's error is below 0.1% of the value). Negative durations (clocks of two
 * processes a hair apart) count as 0. No samples: NaN everywhere, count 0.
 */
export function summarizeMs(valuesMs: Iterable<number>): LatencySummary {
  const histogram = build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: 3 });
  for (const ms of valuesMs) {
    if (Number.isFinite(ms)) histogram.recordValue(Math.max(0, Math.round(ms * 1000)));
  }
  const count = histogram.totalCount;
  const max = count === 0 ? NaN : histogram.maxValue / 1000;
  // A bucket reports its highest equivalent value, which can sit a hair above the true max.
  const at = (p: number) => (count === 0 ? NaN : Math.min(max, histogram.getValueAtPercentile(p) / 1000));
  const summary = { count, p50: at(50), p95: at(95), p99: at(99), max };
  histogram.destroy();
  return summary;
}

/** Events per second over [startMs, endMs]; NaN when the interval is empty. */
export function ratePerS(count: number, startMs: number, endMs: number): number {
  const seconds = (endMs - startMs) / 1000;
  return seconds > 0 ? count / seconds : NaN;
}

export interface LatencyRunPlan {
  /** Requests per second to offer. */
  ratePerS: number;
  /** Requests in all: `ratePerS × durationS`. */
  amount: number;
  /** Connections to offer them on. */
  connections: number;
}

/**
 * A fixed-rate run at `fraction` of the measured maximum. A keep-alive connection carries one
 * request at a time, so the connections bound how many are in flight: with too few, requests
 * wait in the generator for a free one, and that wait is counted as the server's latency (the
 * run measures from the scheduled send). Each connection gets `slackMs` per request, i.e. one
 * connection per `1000 / slackMs` requests/s, at least `minConnections`: 100 ms (the serving
 * bound) keeps 80 connections open at 800 requests/s. With 20 ms, as before, a stack whose 202
 * took 40 ms under load got 14 connections for 650 requests/s, could not carry more than 350,
 * and reported the generator's queue as a p99 of 2 s.
 */
export function planLatencyRun(
  maxPerS: number,
  options: { fraction?: number; durationS: number; slackMs?: number; minConnections?: number; maxConnections?: number },
): LatencyRunPlan {
  if (!Number.isFinite(maxPerS) || maxPerS <= 0) throw new RangeError(`no maximum rate to take a share of (got ${maxPerS})`);
  const fraction = options.fraction ?? 0.8;
  const slackMs = options.slackMs ?? 100;
  const maxConnections = options.maxConnections ?? 256;
  const rate = Math.max(1, Math.floor(maxPerS * fraction));
  const connections = Math.min(maxConnections, Math.max(options.minConnections ?? 16, Math.ceil((rate * slackMs) / 1000)));
  return { ratePerS: rate, amount: Math.max(1, Math.round(rate * options.durationS)), connections };
}

/** The entry with the largest `key`; undefined for an empty list. */
export function maxBy<T>(items: readonly T[], key: (item: T) => number): T | undefined {
  let best: T | undefined;
  for (const item of items) if (best === undefined || key(item) > key(best)) best = item;
  return best;
}

export interface CountBudget {
  /** Values (tensor elements) each item carries. */
  valuesPerItem: number;
  /** At most this many values in all: the run's memory, in Redis and in the processes. */
  maxValues: number;
  /** Items/s the run is expected to reach at best (e.g. raw ONNX Runtime's rows/s). */
  ratePerS: number;
  /** …so at most this long at that rate. */
  seconds: number;
  /** Never fewer (a rate or a percentile needs some). */
  min: number;
}

/**
 * `count`, cut so a run of a large or slow model stays bounded in memory and time: a CNN of
 * 27,648 floats a row would otherwise put gigabytes of JSON into Redis, and a model that runs
 * 500 rows/s would take minutes where the demo model takes a second.
 */
export function boundedCount(count: number, budget: CountBudget): number {
  const byValues = Math.floor(budget.maxValues / Math.max(1, budget.valuesPerItem));
  const byTime = Number.isFinite(budget.ratePerS) && budget.ratePerS > 0 ? Math.floor(budget.ratePerS * budget.seconds) : count;
  return Math.max(budget.min, Math.min(count, byValues, byTime));
}
