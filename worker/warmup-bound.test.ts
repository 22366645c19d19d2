/**
 * The bounded warm-up's rules on injected timings: no engine, no real clock.
 */
import { describe, expect, it } from 'vitest';
import { MIN_SAMPLES, medianRse, planSize, sampleStop, threadEnd } from './warmup-bound.ts';

const open = { maxSamples: 20, maxRse: 0.05, shareEnd: Number.POSITIVE_INFINITY, hardEnd: Number.POSITIVE_INFINITY };

/** Takes passes of `passes[i]` ms on a fake clock until sampleStop says why it stops. */
function sample(passes: (i: number) => number, limits = open, startAt = 0) {
  const samples: number[] = [];
  let now = startAt;
  let stop = sampleStop(samples, limits, now);
  while (stop === undefined) {
    const ms = passes(samples.length);
    now += ms;
    samples.push(ms);
    stop = sampleStop(samples, limits, now);
  }
  return { samples, stop, now };
}

describe('medianRse', () => {
  it('is 0 for identical samples and unknown for fewer than two', () => {
    expect(medianRse([4, 4, 4])).toBe(0);
    expect(medianRse([4])).toBe(Number.POSITIVE_INFINITY);
    expect(medianRse([])).toBe(Number.POSITIVE_INFINITY);
  });

  it('falls as 1/√n for the same spread', () => {
    const spread = (n: number) => Array.from({ length: n }, (_, i) => (i % 2 === 0 ? 9 : 11));
    // σ (n − 1 in the denominator) is √(16/15) and √(4/3): the ratio is √(4/16) × √((16/15) / (4/3)).
    expect(medianRse(spread(16)) / medianRse(spread(4))).toBeCloseTo(0.5 * Math.sqrt(0.8), 9);
    expect(medianRse(spread(16))).toBeLessThan(medianRse(spread(4)));
  });
});

describe('sampleStop', () => {
  it('stops a steady size at MIN_SAMPLES', () => {
    const r = sample(() => 10);
    expect(r).toMatchObject({ stop: 'stable' });
    expect(r.samples).toHaveLength(MIN_SAMPLES);
  });

  it('keeps a noisy size going until its median is known, or to maxSamples', () => {
    // ±10% alternating: stable only once 1.25·σ/√n/median ≤ 5%, at 7 passes.
    const noisy = sample((i) => (i % 2 === 0 ? 9 : 11));
    expect(noisy).toMatchObject({ stop: 'stable' });
    expect(noisy.samples.length).toBeGreaterThan(MIN_SAMPLES);
    expect(medianRse(noisy.samples)).toBeLessThanOrEqual(0.05 + 1e-9);
    const wild = sample((i) => (i % 2 === 0 ? 1 : 30), { ...open, maxSamples: 12 });
    expect(wild).toMatchObject({ stop: 'max' });
    expect(wild.samples).toHaveLength(12);
  });

  it('stops a noisy size at its share once it has MIN_SAMPLES, not before', () => {
    const r = sample((i) => (i % 2 === 0 ? 5 : 15), { ...open, shareEnd: 20 });
    expect(r).toMatchObject({ stop: 'share' });
    expect(r.samples).toHaveLength(MIN_SAMPLES);
  });

  it('starts no pass that would end past the hard end, even under MIN_SAMPLES', () => {
    const r = sample(() => 40, { ...open, shareEnd: 0, hardEnd: 100 });
    expect(r).toMatchObject({ stop: 'budget' });
    expect(r.samples).toHaveLength(2);
    expect(r.now).toBeLessThanOrEqual(100);
  });

  it('takes exactly maxSamples with a negative maxRse and no ends (the unbounded warm-up)', () => {
    expect(sample(() => 3, { ...open, maxSamples: 7, maxRse: -1 }).samples).toHaveLength(7);
  });

  it('holds when the clock goes backwards: a pass of negative time is not a reason to stop early', () => {
    // A clock stepped back 1 s mid-size: the limits are far ahead, so sampling goes on to stable.
    const passes = [10, -1000, 10, 10, 10, 10, 10, 10];
    const r = sample((i) => passes[i] ?? 10, { ...open, hardEnd: 500, shareEnd: 500 });
    expect(r.stop).not.toBe('budget');
  });
});

describe('planSize', () => {
  const base = { now: 0, hardEnd: 1000, latencyBudgetMs: 250, maxRse: 0.05 };
  const m = (batch: number, p50Ms: number, rse = 0.01) => ({ batch, p50Ms, rowsPerS: (batch / p50Ms) * 1000, rse });

  it('always measures the first size, with a share in proportion to its rows', () => {
    expect(planSize({ ...base, measured: [], remaining: [1, 3] })).toEqual({ measure: true, shareEnd: 250 });
  });

  it('shares the time left by predicted cost, from the per-row time of the largest size measured', () => {
    // 8 rows in 8 ms: 1 ms a row, so 16 and 32 are predicted at 16 and 32 ms: 1/3 and 2/3 of 900 ms.
    const plan = planSize({ ...base, now: 100, measured: [m(1, 2), m(8, 8)], remaining: [16, 32] });
    expect(plan).toEqual({ measure: true, shareEnd: 400 });
  });

  it('skips a size whose discarded pass and MIN_SAMPLES would not fit the time left (the next one would blow the budget)', () => {
    // 32 rows in 50 ms → 128 rows ≈ 200 ms a pass, × (1 + 3) = 800 ms, with 700 left.
    expect(planSize({ ...base, now: 300, measured: [m(8, 14), m(32, 50)], remaining: [128] })).toEqual({
      measure: false,
      reason: 'budget',
    });
    expect(planSize({ ...base, now: 100, measured: [m(8, 14), m(32, 50)], remaining: [128] })).toMatchObject({ measure: true });
  });

  it('skips a size that would miss the latency budget even at the best rows/s so far', () => {
    const plan = planSize({ ...base, hardEnd: 1e9, latencyBudgetMs: 100, measured: [m(8, 10), m(32, 30)], remaining: [128] });
    expect(plan).toEqual({ measure: false, reason: 'latency' });
  });

  it('stops growing once two steady sizes in a row are no faster than a smaller one', () => {
    const flat = [m(1, 2), m(8, 12), m(32, 50)]; // 500, 667, 640 rows/s
    expect(planSize({ ...base, hardEnd: 1e9, measured: flat, remaining: [128] })).toMatchObject({ measure: true });
    const flatter = [...flat, m(64, 101)]; // 634 rows/s: a second size no faster than 8
    expect(planSize({ ...base, hardEnd: 1e9, measured: flatter, remaining: [128] })).toEqual({ measure: false, reason: 'plateau' });
  });

  it('keeps growing past a dip measured on noisy timings', () => {
    const noisy = [m(1, 2), m(8, 12), m(32, 50, 0.3), m(64, 101, 0.2)];
    expect(planSize({ ...base, hardEnd: 1e9, measured: noisy, remaining: [128] })).toMatchObject({ measure: true });
  });
});

describe('threadEnd', () => {
  it('splits what is left evenly over the thread counts left, and nothing when it is spent', () => {
    expect(threadEnd(1500, 100, 2)).toBe(800);
    expect(threadEnd(1500, 800, 1)).toBe(1500);
    expect(threadEnd(1500, 1600, 1)).toBe(1600);
  });
});
