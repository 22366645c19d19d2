/**
 * Series shaping for the dashboard's charts: pure functions from what is recorded (per-minute
 * arrivals, the scaler's decision records, the dashboard's own pool samples) to columnar arrays
 * uPlot draws as they are (one x array in epoch seconds, one y array per line, null for "no
 * data" so a gap is drawn as a gap, never as a zero).
 *
 * Batch size and latency come from Prometheus histograms that every worker publishes
 * cumulatively (infra/telemetry/metrics.ts). The sampler keeps each worker's own counters from one sample
 * to the next, so an interval's histogram is the sum of each worker's difference
 * (intervalHistogram): a worker that restarted (its counters went down) is left out of that
 * interval rather than read as a negative burst. Samples store the interval
 * histograms, not the raw counters, so reading an hour of them stays small.
 */
import type { ArrivalSeries, Backlog, WorkerCounts } from '../../infra/contracts/pool.ts';
import { DECISION_HEARTBEAT_MS, type DecisionRecord } from '../../infra/scaler/index.ts';

/**
 * A Prometheus histogram: cumulative counts at each finite upper bound (ascending); `count` is
 * every observation, so `count - counts.at(-1)` fell in the +Inf bucket (which JSON could not
 * carry as a bound).
 */
export interface Histogram {
  bounds: number[];
  counts: number[];
  sum: number;
  count: number;
}

/** One worker's cumulative counters at a sample. */
export interface WorkerCounters {
  batchRows?: Histogram;
  queueSeconds?: Histogram;
}

/** What the dashboard records per model at each sample (samples.ts). */
export interface PoolSample {
  at: number;
  queue: Backlog;
  workers: WorkerCounts;
  /** Rows per forward pass and queue waits (s) of the batches and jobs since the previous sample; absent for the first. */
  batchRows?: Histogram;
  queueSeconds?: Histogram;
}

export interface SeriesView {
  model: string;
  at: number;
  minutes: number;
  /**
   * Per minute, x in epoch seconds: arrivals (online rows that need a worker), rows the result
   * cache answered at submit (no worker needed: not arrivals, not forecast), rows served (online
   * and bulk: bulk rows are no arrivals) and the scaler's forecast of arrivals for that minute.
   */
  arrivals: { t: number[]; perMin: number[]; cachedPerMin: number[]; servedPerMin: number[]; forecastPerMin: Array<number | null> };
  /** Per sample: the queue (jobs not yet taken, jobs running, oldest waiting age) and workers by state. */
  pool: {
    t: number[];
    queued: number[];
    running: number[];
    oldestAgeS: number[];
    starting: number[];
    standby: number[];
    active: number[];
    draining: number[];
  };
  /** Per interval between samples: mean rows per forward pass, queue-wait percentiles, jobs taken. */
  batches: {
    t: number[];
    meanRows: Array<number | null>;
    waitP50Ms: Array<number | null>;
    waitP95Ms: Array<number | null>;
    waitP99Ms: Array<number | null>;
    jobs: number[];
  };
}

const MINUTE_MS = 60_000;

/** `a + b`, bucket by bucket; undefined when either is missing or their bounds differ. */
export function addHistograms(a: Histogram | undefined, b: Histogram | undefined): Histogram | undefined {
  if (!a) return b;
  if (!b) return a;
  if (!sameBounds(a, b)) return undefined;
  return { bounds: a.bounds, counts: a.counts.map((c, i) => c + (b.counts[i] ?? 0)), sum: a.sum + b.sum, count: a.count + b.count };
}

/** `later - earlier`, or undefined when the counters went down (a restart) or the bounds differ. */
export function histogramDelta(earlier: Histogram | undefined, later: Histogram | undefined): Histogram | undefined {
  if (!later) return undefined;
  if (!earlier) return undefined;
  if (!sameBounds(earlier, later) || later.count < earlier.count) return undefined;
  const counts = later.counts.map((c, i) => c - (earlier.counts[i] ?? 0));
  if (counts.some((c) => c < 0)) return undefined;
  return { bounds: later.bounds, counts, sum: later.sum - earlier.sum, count: later.count - earlier.count };
}

function sameBounds(a: Histogram, b: Histogram): boolean {
  return a.bounds.length === b.bounds.length && a.bounds.every((x, i) => x === b.bounds[i]);
}

/**
 * The q-quantile the way Prometheus's histogram_quantile reads it: linear within the bucket
 * that holds the rank (from 0 for the first bucket); the last bound when the rank falls past it
 * (the +Inf bucket). Null when the histogram is empty.
 */
export function quantile(h: Histogram | undefined, q: number): number | null {
  if (!h || h.count <= 0) return null;
  const rank = q * h.count;
  for (let i = 0; i < h.bounds.length; i++) {
    const upTo = h.counts[i] ?? 0;
    if (upTo < rank) continue;
    const upper = h.bounds[i] as number;
    const lower = i === 0 ? 0 : (h.bounds[i - 1] as number);
    const below = i === 0 ? 0 : (h.counts[i - 1] ?? 0);
    return lower + ((upper - lower) * (rank - below)) / (upTo - below);
  }
  return h.bounds.at(-1) ?? null;
}

/** Fraction of observations ≤ `bound`, linear within its bucket (past the last bound: none known); null when empty. */
export function fractionAtMost(h: Histogram | undefined, bound: number): number | null {
  if (!h || h.count <= 0) return null;
  for (let i = 0; i < h.bounds.length; i++) {
    const upper = h.bounds[i] as number;
    if (bound >= upper) continue;
    const lower = i === 0 ? 0 : (h.bounds[i - 1] as number);
    const below = i === 0 ? 0 : (h.counts[i - 1] ?? 0);
    const share = Math.max(0, (bound - lower) / (upper - lower));
    return Math.min(1, (below + ((h.counts[i] ?? 0) - below) * share) / h.count);
  }
  return Math.min(1, (h.counts.at(-1) ?? 0) / h.count);
}

/** Workers' counters by worker id. */
export type CountersByWorker = Record<string, WorkerCounters>;

/**
 * One counter's histogram over an interval, summed over workers: a worker seen at both ends
 * counts its difference (nothing if its counters went down: it restarted); a worker first seen
 * at the later end counts all it has, since its counters started at zero after the earlier
 * sample (a worker publishes from its start, and has no histogram until its first observation).
 */
export function intervalHistogram(earlier: CountersByWorker, later: CountersByWorker, field: keyof WorkerCounters): Histogram | undefined {
  let total: Histogram | undefined;
  for (const [id, now] of Object.entries(later)) {
    const before = earlier[id];
    const delta = before?.[field] ? histogramDelta(before[field], now[field]) : now[field];
    if (delta) total = addHistograms(total, delta);
  }
  return total;
}

/**
 * The forecast per minute (arrivals per minute the scaler expected), the mean over the decisions
 * taken in that minute; live decisions only, unless only a shadow scaler ran. The scaler records
 * an unchanged decision only once per heartbeat (infra/scaler/decision-log.ts), so a minute with
 * none carries the last decision from at most a heartbeat before it; after a longer silence
 * nothing is known and the minute is null.
 */
export function minuteForecast(
  decisions: readonly DecisionRecord[],
  startMs: number,
  minutes: number,
  heartbeatMs = DECISION_HEARTBEAT_MS,
): Array<number | null> {
  const live = decisions.filter((d) => !d.shadow);
  const used = [...(live.length > 0 ? live : decisions)].sort((a, b) => a.at - b.at);
  const sums = new Array<number>(minutes).fill(0);
  const seen = new Array<number>(minutes).fill(0);
  for (const d of used) {
    const i = Math.floor((d.at - startMs) / MINUTE_MS);
    if (i < 0 || i >= minutes) continue;
    sums[i] = (sums[i] ?? 0) + d.forecast.ratePerSec * 60;
    seen[i] = (seen[i] ?? 0) + 1;
  }
  return sums.map((s, i) => {
    if ((seen[i] ?? 0) > 0) return round(s / (seen[i] as number), 2);
    const minuteStart = startMs + i * MINUTE_MS;
    const held = lastBefore(used, minuteStart);
    return held && minuteStart - held.at <= heartbeatMs ? round(held.forecast.ratePerSec * 60, 2) : null;
  });
}

/** The last of `sorted` (by time) taken before `ms`. */
function lastBefore(sorted: readonly DecisionRecord[], ms: number): DecisionRecord | undefined {
  let found: DecisionRecord | undefined;
  for (const d of sorted) {
    if (d.at >= ms) break;
    found = d;
  }
  return found;
}

export function shapeSeries(input: {
  model: string;
  at: number;
  minutes: number;
  arrivals: ArrivalSeries;
  /** Completions over the same minutes as `arrivals`. */
  served: ArrivalSeries;
  /** Result-cache answers over the same minutes (absent: none recorded). */
  cached?: ArrivalSeries;
  decisions: readonly DecisionRecord[];
  samples: readonly PoolSample[];
}): SeriesView {
  const { arrivals, samples } = input;
  const n = arrivals.perMinute.length;
  return {
    model: input.model,
    at: input.at,
    minutes: input.minutes,
    arrivals: {
      t: arrivals.perMinute.map((_, i) => (arrivals.startMs + i * MINUTE_MS) / 1000),
      perMin: [...arrivals.perMinute],
      cachedPerMin: arrivals.perMinute.map((_, i) => input.cached?.perMinute[i] ?? 0),
      servedPerMin: arrivals.perMinute.map((_, i) => input.served.perMinute[i] ?? 0),
      forecastPerMin: minuteForecast(input.decisions, arrivals.startMs, n),
    },
    pool: poolColumns(samples),
    batches: batchColumns(samples),
  };
}

function poolColumns(samples: readonly PoolSample[]): SeriesView['pool'] {
  return {
    t: samples.map((s) => s.at / 1000),
    queued: samples.map((s) => s.queue.waiting + s.queue.prioritized + s.queue.delayed),
    running: samples.map((s) => s.queue.active),
    oldestAgeS: samples.map((s) => round(s.queue.oldestAgeMs / 1000, 1)),
    starting: samples.map((s) => s.workers.starting),
    standby: samples.map((s) => s.workers.standby),
    active: samples.map((s) => s.workers.active),
    draining: samples.map((s) => s.workers.draining),
  };
}

function batchColumns(samples: readonly PoolSample[]): SeriesView['batches'] {
  const out: SeriesView['batches'] = { t: [], meanRows: [], waitP50Ms: [], waitP95Ms: [], waitP99Ms: [], jobs: [] };
  for (const { at, batchRows: rows, queueSeconds: waits } of samples) {
    const ms = (q: number) => {
      const s = quantile(waits, q);
      return s === null ? null : round(s * 1000, 1);
    };
    out.t.push(at / 1000);
    out.meanRows.push(rows && rows.count > 0 ? round(rows.sum / rows.count, 2) : null);
    out.waitP50Ms.push(ms(0.5));
    out.waitP95Ms.push(ms(0.95));
    out.waitP99Ms.push(ms(0.99));
    out.jobs.push(waits?.count ?? 0);
  }
  return out;
}

export function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
