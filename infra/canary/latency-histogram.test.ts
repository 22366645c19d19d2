import { describe, expect, it } from 'vitest';
import { bucketIndex, estimateQuantile, LATENCY_BOUNDS_MS, type LatencyCounts } from './latency-histogram.ts';

function histogram(latencies: number[]): LatencyCounts {
  const counts: LatencyCounts = new Map();
  for (const ms of latencies) counts.set(bucketIndex(ms), (counts.get(bucketIndex(ms)) ?? 0) + 1);
  return counts;
}

describe('latency histogram', () => {
  it('puts a latency in the first bucket whose bound reaches it, and past the last in the overflow bucket', () => {
    expect(bucketIndex(0)).toBe(0);
    expect(bucketIndex(-3)).toBe(0);
    expect(bucketIndex(1)).toBe(0);
    expect(bucketIndex(1.01)).toBe(1);
    expect(bucketIndex(100)).toBe(LATENCY_BOUNDS_MS.indexOf(100));
    expect(bucketIndex(101)).toBe(LATENCY_BOUNDS_MS.indexOf(150));
    expect(bucketIndex(10_000_000)).toBe(LATENCY_BOUNDS_MS.length);
  });

  it('has no quantile without samples', () => {
    expect(estimateQuantile(new Map(), 0.95)).toBeNull();
  });

  it('estimates quantiles within the bucket that holds them', () => {
    const latencies = Array.from({ length: 1000 }, (_, i) => 1 + i); // 1 … 1000 ms, uniform
    const counts = histogram(latencies);
    const p50 = estimateQuantile(counts, 0.5) as number;
    const p95 = estimateQuantile(counts, 0.95) as number;
    // The true values are 500 and 950; the estimate stays inside their buckets (300–500, 700–1000).
    expect(p50).toBeGreaterThan(300);
    expect(p50).toBeLessThanOrEqual(500);
    expect(p95).toBeGreaterThan(700);
    expect(p95).toBeLessThanOrEqual(1000);
    expect(p95).toBeGreaterThan(p50);
  });

  it('answers the last bound for a quantile in the overflow bucket', () => {
    expect(estimateQuantile(histogram([500_000, 600_000]), 0.95)).toBe(LATENCY_BOUNDS_MS.at(-1));
  });
});
