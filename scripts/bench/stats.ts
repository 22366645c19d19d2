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
 * A fixed-rate run at `fraction` of the measured maximum. The load generator paces each
 * connection at ratePerS / connections; a connection waits for its answer before the next
 * request, so each must get at least `slackMs` between sends or the offered rate silently
 * drops (coordinated omission). Hence one connection per `1000 / slackMs` requests/s.
 */
export function planLatencyRun(
  maxPerS: number,
  options: { fraction?: number; durationS: number; slackMs?: number; maxConnections?: number },
): LatencyRunPlan {
  if (!Number.isFinite(maxPerS) || maxPerS <= 0) throw new RangeError(`no maximum rate to take a share of (got ${maxPerS})`);
  const fraction = options.fraction ?? 0.8;
  const slackMs = options.slackMs ?? 20;
  const maxConnections = options.maxConnections ?? 64;
  const rate = Math.max(1, Math.floor(maxPerS * fraction));
  const connections = Math.min(maxConnections, Math.max(1, Math.ceil((rate * slackMs) / 1000)));
  return { ratePerS: rate, amount: Math.max(1, Math.round(rate * options.durationS)), connections };
}

/** The entry with the largest `key`; undefined for an empty list. */
export function maxBy<T>(items: readonly T[], key: (item: T) => number): T | undefined {
  let best: T | undefined;
  for (const item of items) if (best === undefined || key(item) > key(best)) best = item;
  return best;
}
