/**
 * A latency histogram with fixed bucket bounds, so that counts from many processes and many
 * 10 s buckets can simply be added (in Redis, with HINCRBY) and percentiles estimated from the
 * sum. Bounds grow by about ×1.5–2 from 1 ms to 2 min: an estimate is off by at most one
 * bucket's width, which linear interpolation inside the bucket narrows further; that is enough
 * to tell a p95 1.5× slower from one that is not.
 */

/** Upper bounds (inclusive) of the buckets, in ms; one more bucket holds everything above the last. */
export const LATENCY_BOUNDS_MS: readonly number[] = [
  1, 2, 3, 5, 7, 10, 15, 20, 30, 50, 70, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000, 3000, 5000, 7000, 10_000, 15_000, 20_000, 30_000,
  60_000, 120_000,
];

/** Counts per bucket index (0 … LATENCY_BOUNDS_MS.length); absent = 0. */
export type LatencyCounts = Map<number, number>;

/** The bucket a latency falls in: the first whose bound is ≥ it; the overflow bucket past the last. */
export function bucketIndex(latencyMs: number): number {
  const ms = Math.max(0, latencyMs);
  for (let i = 0; i < LATENCY_BOUNDS_MS.length; i++) if (ms <= (LATENCY_BOUNDS_MS[i] as number)) return i;
  return LATENCY_BOUNDS_MS.length;
}

/**
 * The q-quantile (0 < q ≤ 1) estimated from bucket counts: find the bucket holding the rank
 * q·n, then interpolate linearly between its lower and upper bound. Null without samples. The
 * overflow bucket has no upper bound, so an estimate landing there is the last bound (a floor).
 */
export function estimateQuantile(counts: LatencyCounts, q: number): number | null {
  const total = [...counts.values()].reduce((sum, n) => sum + n, 0);
  if (total === 0) return null;
  const rank = Math.min(total, Math.max(1, q * total));
  let below = 0;
  for (let i = 0; i <= LATENCY_BOUNDS_MS.length; i++) {
    const n = counts.get(i) ?? 0;
    if (n > 0 && below + n >= rank) {
      const lower = i === 0 ? 0 : (LATENCY_BOUNDS_MS[i - 1] as number);
      const upper = LATENCY_BOUNDS_MS[i];
      if (upper === undefined) return lower;
      return lower + (upper - lower) * ((rank - below) / n);
    }
    below += n;
  }
  return LATENCY_BOUNDS_MS.at(-1) ?? null;
}
