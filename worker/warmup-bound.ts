/**
 * How long warm-up measures (worker/warmup.ts), from what it has measured so far: pure rules over
 * the samples and the clock, so they hold for a model nobody has timed before.
 *
 * - A batch size takes timed passes until its median is known well enough (the relative standard
 *   error of the median under `maxRse`, from at least MIN_SAMPLES passes), its share of the time
 *   left runs out, or it has `maxSamples`. A noisy size keeps going; a steady one stops at three.
 * - The time left is split evenly over the thread counts still to measure, and inside one over
 *   its batch sizes in proportion to what each is predicted to cost, so a size that finished
 *   early leaves its time to the next ones.
 * - A bigger batch is not measured when its predicted cost (one discarded pass and MIN_SAMPLES
 *   timed ones, at the per-row time of the largest size measured) would not fit the time left,
 *   when even at the best rows/s so far its pass would not fit the latency budget (it could not
 *   be chosen), or when the curve has flattened: the last two sizes measured were each, to within
 *   `maxRse`, no faster than the best smaller one (warm-up takes a bigger batch only for
 *   NEAR_BEST's 11% more).
 */

/** Timed passes a size takes before its spread means anything (and its p95 is the slowest of them). */
export const MIN_SAMPLES = 3;

/**
 * The precision a size's median (its rows/s, which the chooser and the scaler read) is measured
 * to: ±5% at one standard error. The choices it feeds have wider margins (a bigger batch needs
 * 1/NEAR_BEST = 11% more rows/s, more threads MORE_THREADS_MIN_GAIN = 30% more), so an error of
 * this size does not turn them; a tighter bound costs passes quadratically (n ∝ 1/rse²).
 */
export const WARMUP_MAX_RSE = 0.05;

/** The standard error of a median is this × σ/√n for normally spread samples (√(π/2)). */
const MEDIAN_SE_FACTOR = Math.sqrt(Math.PI / 2);

export interface WarmupBound {
  /** Milliseconds the measuring of a warm-up from an empty profile may take in all, loads included. */
  budgetMs: number;
  /** A size stops once its median's relative standard error is at most this (0.05: ±5%). */
  maxRse: number;
}

/** Relative standard error of the median of `samples`; Infinity with fewer than two or a zero median. */
export function medianRse(samples: readonly number[]): number {
  const n = samples.length;
  if (n < 2) return Number.POSITIVE_INFINITY;
  const mean = samples.reduce((a, b) => a + b, 0) / n;
  const variance = samples.reduce((a, b) => a + (b - mean) ** 2, 0) / (n - 1);
  const sorted = [...samples].sort((a, b) => a - b);
  const median = n % 2 === 1 ? (sorted[(n - 1) / 2] ?? 0) : ((sorted[n / 2 - 1] ?? 0) + (sorted[n / 2] ?? 0)) / 2;
  if (!(median > 0)) return Number.POSITIVE_INFINITY;
  return (MEDIAN_SE_FACTOR * Math.sqrt(variance)) / Math.sqrt(n) / median;
}

export type SampleStop = 'stable' | 'share' | 'budget' | 'max';

export interface SampleLimits {
  maxSamples: number;
  maxRse: number;
  /** Past this (clock ms) a size that has MIN_SAMPLES stops: its share of the time. */
  shareEnd: number;
  /** Past this no pass starts at all: the thread count's time. */
  hardEnd: number;
}

/**
 * Why a size with these timed `samples` (ms) stops at `now`, or undefined to take another pass.
 * A pass is not started where one more like the ones so far would end past the limit.
 */
export function sampleStop(samples: readonly number[], limits: SampleLimits, now: number): SampleStop | undefined {
  const n = samples.length;
  const minSamples = Math.min(MIN_SAMPLES, limits.maxSamples);
  if (n >= limits.maxSamples) return 'max';
  if (n >= minSamples && medianRse(samples) <= limits.maxRse) return 'stable';
  const next = n > 0 ? Math.max(...samples.slice(-MIN_SAMPLES)) : 0;
  if (n > 0 && now + next > limits.hardEnd) return 'budget';
  if (n >= minSamples && now + next > limits.shareEnd) return 'share';
  return undefined;
}

/** What one measured size tells the planner. */
export interface MeasuredSize {
  batch: number;
  p50Ms: number;
  rowsPerS: number;
  /** The median's relative standard error; absent = unknown (fewer than two passes). */
  rse?: number;
}

export type SizeSkip = 'plateau' | 'latency' | 'budget';

export type SizePlan = { measure: true; shareEnd: number } | { measure: false; reason: SizeSkip };

export interface SizePlanInput {
  /** This thread count's sizes measured so far, smallest first. */
  measured: readonly MeasuredSize[];
  /** The sizes still to measure, this one first. */
  remaining: readonly number[];
  now: number;
  /** The end of this thread count's time. */
  hardEnd: number;
  latencyBudgetMs: number;
  /** Sizes measured to within this count towards a plateau; noisier ones do not (they settle nothing). */
  maxRse: number;
}

/** Whether to measure the next batch size (`remaining[0]`) and until when; see the header for why not. */
export function planSize(input: SizePlanInput): SizePlan {
  const { measured, remaining, now, hardEnd } = input;
  const batch = remaining[0] ?? 0;
  const largest = measured.at(-1);
  const msPerRow = largest ? largest.p50Ms / largest.batch : 1;
  const cost = (rows: number) => rows * msPerRow;
  if (largest) {
    if (flattened(measured, input.maxRse)) return { measure: false, reason: 'plateau' };
    const best = Math.max(...measured.map((m) => m.rowsPerS));
    if (best > 0 && (batch / best) * 1000 > input.latencyBudgetMs) return { measure: false, reason: 'latency' };
    if ((1 + MIN_SAMPLES) * cost(batch) > hardEnd - now) return { measure: false, reason: 'budget' };
  }
  // Shares in proportion to predicted cost: linear in rows from the largest size measured.
  const total = remaining.reduce((sum, rows) => sum + cost(rows), 0);
  return { measure: true, shareEnd: now + ((hardEnd - now) * cost(batch)) / Math.max(total, Number.MIN_VALUE) };
}

/**
 * The last two sizes were each no faster than the best size smaller than it, each measured to
 * within `maxRse`: a dip in noisy timings (another process took the core) is no plateau.
 */
function flattened(measured: readonly MeasuredSize[], maxRse: number): boolean {
  if (measured.length < 3) return false;
  const notFaster = (i: number) => {
    const m = measured[i];
    const before = Math.max(...measured.slice(0, i).map((e) => e.rowsPerS));
    return !!m && (m.rse ?? Number.POSITIVE_INFINITY) <= maxRse && m.rowsPerS <= before;
  };
  return notFaster(measured.length - 1) && notFaster(measured.length - 2);
}

/** The end of the next thread count's time: what is left of the budget, split over the thread counts left. */
export function threadEnd(budgetEnd: number, now: number, threadCountsLeft: number): number {
  return now + Math.max(0, budgetEnd - now) / Math.max(1, threadCountsLeft);
}
