import { describe, expect, it } from 'vitest';
import { bestKeptRate, describeTrials, nextServingRate, type ServingTrial } from './serving-search.ts';

const t = (ratePerS: number, kept: boolean, p99Ms = kept ? 50 : 300): ServingTrial => ({ ratePerS, p99Ms, kept });

/** Runs the search against a system that keeps the bound up to `capacity` requests/s. */
function search(start: number, capacity: number, steps: number): ServingTrial[] {
  const trials: ServingTrial[] = [];
  for (let r = nextServingRate(trials, start, { steps }); r !== undefined; r = nextServingRate(trials, start, { steps }))
    trials.push(t(r, r <= capacity));
  return trials;
}

describe('nextServingRate', () => {
  it('starts at the given rate and stops when the runs are spent', () => {
    expect(nextServingRate([], 800, { steps: 3 })).toBe(800);
    expect(nextServingRate([t(800, true), t(1000, true), t(1250, true)], 800, { steps: 3 })).toBeUndefined();
  });

  it('raises a kept rate, lowers a missed one, then bisects between the highest kept and the lowest missed above it', () => {
    expect(nextServingRate([t(800, true)], 800, { steps: 6 })).toBe(1000);
    expect(nextServingRate([t(800, false)], 800, { steps: 6 })).toBe(400);
    expect(nextServingRate([t(800, false), t(400, true)], 800, { steps: 6 })).toBe(600);
  });

  it('does not believe a missed run below a kept one', () => {
    expect(nextServingRate([t(400, true), t(300, false), t(800, false)], 800, { steps: 6 })).toBe(600);
    expect(nextServingRate([t(400, true), t(300, false)], 800, { steps: 6 })).toBe(500);
  });

  it('stops once the bracket is within the precision', () => {
    expect(nextServingRate([t(1000, true), t(1080, false)], 800, { steps: 9, precision: 0.1 })).toBeUndefined();
  });

  it('closes in on the capacity of a system from either side', () => {
    expect(bestKeptRate(search(800, 610, 6))).toBeGreaterThan(550);
    expect(bestKeptRate(search(800, 610, 6))).toBeLessThanOrEqual(610);
    expect(bestKeptRate(search(800, 1150, 6))).toBeGreaterThan(1000);
    expect(bestKeptRate(search(800, 1150, 6))).toBeLessThanOrEqual(1150);
  });
});

describe('bestKeptRate', () => {
  it('is the highest kept rate, NaN when none was kept', () => {
    expect(bestKeptRate([t(500, true), t(700, true), t(900, false)])).toBe(700);
    expect(bestKeptRate([t(900, false)])).toBeNaN();
  });
});

describe('describeTrials', () => {
  it('lists each run with its verdict and p99', () => {
    expect(describeTrials([t(800, false, 240.4), t(400, true, 41.6)])).toBe('800✗ 240 ms, 400✓ 42 ms');
  });
});
