/**
 * The within-minute dispersion as plain steps: per-tick counts are fed at an advancing `now`
 * (12 ticks of 5 s a minute, as the controller counts them) and the state returned is fed back.
 */
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../kernel/seeded-random.ts';
import { DECAY_PER_MINUTE, emptyTickDispersion, noteTick, type TickDispersionState, tickDispersion } from './tick-dispersion.ts';

const MIN = 60_000;
const TICK_MS = 5_000;
const TICKS = MIN / TICK_MS;
const T0 = Date.UTC(2024, 0, 8, 0, 0);

/** Feeds one minute's per-tick counts, the first at the minute's start. */
function feedMinute(state: TickDispersionState, minute: number, counts: readonly number[]): TickDispersionState {
  let s = state;
  counts.forEach((n, i) => {
    s = noteTick(s, T0 + minute * MIN + i * TICK_MS, n);
  });
  return s;
}

/** Poisson(lambda) by inversion of its CDF. */
function poisson(lambda: number, random: () => number): number {
  const u = random();
  let k = 0;
  let p = Math.exp(-lambda);
  let cdf = p;
  while (u > cdf && k < 1000) {
    k++;
    p *= lambda / k;
    cdf += p;
  }
  return k;
}

describe('tick dispersion', () => {
  it('is undefined before any arrivals, and after minutes that saw none', () => {
    expect(tickDispersion(emptyTickDispersion())).toBeUndefined();
    let s = emptyTickDispersion();
    for (let m = 0; m < 5; m++) s = feedMinute(s, m, new Array(TICKS).fill(0));
    s = noteTick(s, T0 + 5 * MIN, 0);
    expect(tickDispersion(s)).toBeUndefined();
  });

  it('Poisson per-tick counts give a dispersion near 1', () => {
    const random = seededRandom(28);
    let s = emptyTickDispersion();
    for (let m = 0; m < 600; m++) {
      s = feedMinute(
        s,
        m,
        Array.from({ length: TICKS }, () => poisson(3, random)),
      );
    }
    s = noteTick(s, T0 + 600 * MIN, 0); // folds the last minute
    const d = tickDispersion(s);
    expect(d).toBeGreaterThan(0.8);
    expect(d).toBeLessThan(1.25);
  });

  it('a minute whose arrivals all come in one tick gives the minute count (variance over mean), far above 1', () => {
    // 36 arrivals in the first of 12 ticks: mean 3, sample variance 108, so 36.
    const clumped = [36, ...new Array(TICKS - 1).fill(0)];
    let s = emptyTickDispersion();
    for (let m = 0; m < 30; m++) s = feedMinute(s, m, clumped);
    s = noteTick(s, T0 + 30 * MIN, 0);
    expect(tickDispersion(s)).toBeCloseTo(36, 9);
  });

  it('ticks of one minute accumulate; the minute is folded only when the next one begins', () => {
    let s = feedMinute(emptyTickDispersion(), 0, [1, 2, 3]);
    expect(s.ticks).toEqual([1, 2, 3]);
    expect(tickDispersion(s)).toBeUndefined();
    s = noteTick(s, T0 + MIN, 4);
    // Mean 2, sample variance 1, three ticks: squares 3, means 6, a minute's decay on both.
    expect(s.minute).toBe(Math.floor((T0 + MIN) / MIN));
    expect(s.ticks).toEqual([4]);
    expect(s.squares).toBeCloseTo(3 * DECAY_PER_MINUTE, 12);
    expect(s.means).toBeCloseTo(6 * DECAY_PER_MINUTE, 12);
    expect(tickDispersion(s)).toBeCloseTo(0.5, 12);
  });

  it('a minute with a single tick adds nothing (the sums only decay)', () => {
    let s = feedMinute(emptyTickDispersion(), 0, [5, 1, 0, 2]);
    s = noteTick(s, T0 + MIN, 50); // minute 1: one tick only
    const before = { squares: s.squares, means: s.means, dispersion: tickDispersion(s) };
    s = noteTick(s, T0 + 2 * MIN, 0);
    expect(s.squares).toBeCloseTo(before.squares * DECAY_PER_MINUTE, 12);
    expect(s.means).toBeCloseTo(before.means * DECAY_PER_MINUTE, 12);
    expect(tickDispersion(s)).toBeCloseTo(before.dispersion as number, 12);

    // Alone, a single-tick minute never gives a dispersion.
    let lone = noteTick(emptyTickDispersion(), T0, 50);
    lone = noteTick(lone, T0 + MIN, 0);
    expect(tickDispersion(lone)).toBeUndefined();
  });

  it('negative, NaN and infinite counts count as 0', () => {
    const bad = feedMinute(emptyTickDispersion(), 0, [6, -4, Number.NaN, Number.POSITIVE_INFINITY]);
    expect(bad.ticks).toEqual([6, 0, 0, 0]);
    const good = feedMinute(emptyTickDispersion(), 0, [6, 0, 0, 0]);
    const fold = (s: TickDispersionState) => tickDispersion(noteTick(s, T0 + MIN, 0));
    expect(fold(bad)).toBeCloseTo(6, 12);
    expect(fold(bad)).toBe(fold(good));
  });

  it('a finished minute weighs DECAY_PER_MINUTE less for each minute after it', () => {
    // Minute 0 clumped (squares 144, means 12: dispersion 12), minute 1 even (squares 0, means 12).
    let s = feedMinute(emptyTickDispersion(), 0, [12, 0, 0, 0]);
    s = feedMinute(s, 1, [3, 3, 3, 3]);
    s = noteTick(s, T0 + 2 * MIN, 0);
    const d = DECAY_PER_MINUTE;
    expect(s.squares).toBeCloseTo(144 * d * d, 9);
    expect(s.means).toBeCloseTo(12 * d * d + 12 * d, 9);
    // The even minute pulls the clumped one's 12 down, the older one weighing a little less.
    expect(tickDispersion(s)).toBeCloseTo((144 * d) / (12 * d + 12), 9);
    expect(tickDispersion(s)).toBeLessThan(6);
  });

  it('a long stretch of even minutes wears a clumped past down', () => {
    let s = feedMinute(emptyTickDispersion(), 0, [12, 0, 0, 0]);
    for (let m = 1; m <= 2000; m++) s = feedMinute(s, m, [3, 3, 3, 3]);
    s = noteTick(s, T0 + 2001 * MIN, 0);
    // 0.999^2000 ≈ 0.135 of 144 over about 1,600 weighted means.
    expect(tickDispersion(s)).toBeLessThan(0.05);
  });

  it('after a gap of a week, a clumped minute before it weighs next to nothing', () => {
    let s = feedMinute(emptyTickDispersion(), 0, [12, 0, 0, 0]);
    s = feedMinute(s, 10_000, [3, 3, 3, 3]); // 0.999^10000 ≈ 4.5e-5
    s = noteTick(s, T0 + 10_001 * MIN, 0);
    expect(tickDispersion(s)).toBeLessThan(0.1);
    // The gap weighs on the clumped minute itself, not only on what came before it.
    expect(s.squares).toBeCloseTo(144 * DECAY_PER_MINUTE ** 10_001, 9);
  });

  it('a clock going backwards does not fold the minute in progress: its ticks are dropped and the earlier minute restarts', () => {
    let s = feedMinute(emptyTickDispersion(), 0, [2, 0, 4, 2]);
    s = feedMinute(s, 10, [9, 0, 0, 0]);
    const folded = { squares: s.squares, means: s.means };
    expect(folded.means).toBeGreaterThan(0);
    s = noteTick(s, T0 + 9 * MIN, 1);
    // Nothing folded, nothing decayed.
    expect(s).toEqual({ minute: Math.floor((T0 + 9 * MIN) / MIN), ticks: [1], ...folded });
    // Forward again: minute 9's single tick adds nothing, and minute 10's earlier ticks are gone
    // (the clumped [9, 0, 0, 0] would have raised the dispersion above minute 0's 4/3).
    s = noteTick(s, T0 + 10 * MIN, 0);
    expect(tickDispersion(s)).toBeCloseTo(folded.squares / folded.means, 12);
    expect(tickDispersion(s)).toBeCloseTo(4 / 3, 12);
    expect(s.ticks).toEqual([0]);
  });
});
