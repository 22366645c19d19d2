import { describe, expect, it } from 'vitest';
import { boundedCount, maxBy, planLatencyRun, ratePerS, summarizeMs } from './stats.ts';

describe('summarizeMs', () => {
  it('gives nearest-rank percentiles within the histogram precision', () => {
    const values = Array.from({ length: 1000 }, (_, i) => i + 1); // 1..1000 ms
    const s = summarizeMs(values);
    expect(s.count).toBe(1000);
    expect(s.p50).toBeCloseTo(500, 0);
    expect(s.p95).toBeCloseTo(950, 0);
    expect(s.p99).toBeCloseTo(990, 0);
    expect(s.max).toBe(1000);
  });

  it('keeps sub-millisecond resolution and never reports a percentile above the max', () => {
    const s = summarizeMs([0.25, 0.25, 0.25, 0.75]);
    expect(s.p50).toBeCloseTo(0.25, 3);
    expect(s.p99).toBe(s.max);
    expect(s.max).toBeCloseTo(0.75, 3);
  });

  it('counts negative durations as 0, skips non-numbers, and gives NaN for no samples', () => {
    expect(summarizeMs([-3, Number.NaN, 2]).count).toBe(2);
    expect(summarizeMs([-3]).p50).toBe(0);
    const empty = summarizeMs([]);
    expect(empty.count).toBe(0);
    expect(empty.p99).toBeNaN();
  });
});

describe('ratePerS', () => {
  it('is events per second over the interval, NaN for an empty one', () => {
    expect(ratePerS(500, 1_000, 3_000)).toBe(250);
    expect(ratePerS(5, 1_000, 1_000)).toBeNaN();
  });
});

describe('planLatencyRun', () => {
  it('offers 80% of the maximum for the duration', () => {
    const plan = planLatencyRun(1000, { durationS: 10 });
    expect(plan.ratePerS).toBe(800);
    expect(plan.amount).toBe(8000);
  });

  it('gives each connection the slack per request, within the connection floor and cap', () => {
    expect(planLatencyRun(1000, { durationS: 1 }).connections).toBe(80); // 800/s × 100 ms
    expect(planLatencyRun(1000, { durationS: 1, slackMs: 20, minConnections: 1 }).connections).toBe(16);
    expect(planLatencyRun(100_000, { durationS: 1, maxConnections: 64 }).connections).toBe(64);
    expect(planLatencyRun(2, { durationS: 1 }).connections).toBe(16);
    expect(planLatencyRun(2, { durationS: 1, minConnections: 1 }).connections).toBe(1);
  });

  it('takes another share when asked, and refuses a maximum that is not a positive rate', () => {
    expect(planLatencyRun(1000, { durationS: 2, fraction: 0.5 }).ratePerS).toBe(500);
    expect(() => planLatencyRun(Number.NaN, { durationS: 1 })).toThrow(RangeError);
    expect(() => planLatencyRun(0, { durationS: 1 })).toThrow(RangeError);
  });
});

describe('maxBy', () => {
  it('returns the first entry with the largest key', () => {
    expect(maxBy([{ k: 1 }, { k: 3 }, { k: 3, second: true }], (x) => x.k)).toEqual({ k: 3 });
    expect(maxBy([], () => 0)).toBeUndefined();
  });
});

describe('boundedCount', () => {
  const budget = { valuesPerItem: 64, maxValues: 10_000_000, ratePerS: 1_000_000, seconds: 8, min: 200 };

  it('leaves a count that fits the budget alone', () => {
    expect(boundedCount(1500, budget)).toBe(1500);
  });

  it('cuts to the values budget for large items and to the time budget for slow ones', () => {
    expect(boundedCount(1500, { ...budget, valuesPerItem: 27_648 })).toBe(361);
    expect(boundedCount(1500, { ...budget, ratePerS: 100 })).toBe(800);
  });

  it('never goes below the minimum, and ignores a rate that is not known', () => {
    expect(boundedCount(1500, { ...budget, ratePerS: 1 })).toBe(200);
    expect(boundedCount(1500, { ...budget, ratePerS: Number.NaN })).toBe(1500);
  });
});
