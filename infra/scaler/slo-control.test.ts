import { describe, expect, it } from 'vitest';
import type { PolicyInput, SloControlState } from '../contracts/pool.ts';
import { decide } from './policy.ts';
import { MAX_FACTOR, MAX_WINDOW_WEIGHT, MIN_FACTOR, noteSloTick, type SloTick, STEP, sloFactor } from './slo-control.ts';

const T0 = Date.UTC(2026, 11, 1);
const SLO_MS = 30_000;
const TICK_MS = 10_000;
const TARGETS = { sloTarget: 0.99 };

/** Runs `windows` SLO windows of ticks through the controller; `tick(i)` fills in each tick. */
function run(state: SloControlState | undefined, windows: number, tick: (i: number) => Partial<SloTick>, from = T0) {
  // The first tick only opens a window: every later SLO_MS of ticks closes one.
  let s = state ?? noteSloTick(undefined, { now: from, windowMs: SLO_MS, sinceMs: TICK_MS, missed: false }, TARGETS);
  const perWindow = SLO_MS / TICK_MS;
  for (let i = 0; i < windows * perWindow; i++) {
    s = noteSloTick(s, { now: from + (i + 1) * TICK_MS, windowMs: SLO_MS, sinceMs: TICK_MS, missed: false, ...tick(i) }, TARGETS);
  }
  return s;
}

describe('closed-loop SLO control', () => {
  it('starts at a factor of 1 and moves only when a window closes', () => {
    expect(sloFactor(undefined)).toBe(1);
    const first = noteSloTick(undefined, { now: T0, windowMs: SLO_MS, sinceMs: TICK_MS, missed: true }, TARGETS);
    expect(sloFactor(first)).toBe(1);
    const mid = noteSloTick(first, { now: T0 + TICK_MS, windowMs: SLO_MS, sinceMs: TICK_MS, missed: true }, TARGETS);
    expect(sloFactor(mid)).toBe(1);
    expect(mid.windowMissTicks).toBe(1);
  });

  describe('with late rows counted', () => {
    // 30 rows a window, 10 a tick.
    const rows = (late: number, extra: Partial<SloTick> = {}) => ({ served: 10, late, canHelp: true, ...extra });

    it('moves by STEP × (late share − α) a usual window: up while more than α of the rows are late, down below', () => {
      const up = run(undefined, 10, () => rows(1)); // 10 % late
      expect(Math.log(sloFactor(up))).toBeCloseTo(10 * STEP * (0.1 - 0.01), 9);
      const down = run(undefined, 10, () => rows(0));
      expect(Math.log(sloFactor(down))).toBeCloseTo(-10 * STEP * 0.01, 9);
      // Exactly α late: it stays.
      const even = run(undefined, 10, (i) => rows(i % 300 === 0 ? 3 : 0));
      expect(Math.abs(Math.log(sloFactor(even)))).toBeLessThan(1e-9);
    });

    it('counts the late rows the tick sightings miss: none seen waiting, 2 % late, and it still rises', () => {
      const s = run(undefined, 50, (i) => ({ ...rows(i % 5 === 0 ? 1 : 0), missed: false }));
      expect(sloFactor(s)).toBeGreaterThan(1);
    });

    it('weighs a busy window by its rows, at most MAX_WINDOW_WEIGHT usual ones', () => {
      const usual = run(undefined, 20, () => rows(0));
      const before = Math.log(sloFactor(usual));
      // One window serving 100× the usual rows, all of them late.
      const burst = run(usual, 1, () => rows(1000, { served: 1000 }), (usual.updatedAt as number) + 0);
      expect(Math.log(sloFactor(burst)) - before).toBeCloseTo(MAX_WINDOW_WEIGHT * STEP * 0.99, 6);
    });

    it('leaves out late rows where more capacity could not have helped (at max, or no worker up)', () => {
      const s = run(undefined, 10, () => rows(10, { canHelp: false }));
      expect(Math.log(sloFactor(s))).toBeCloseTo(-10 * STEP * 0.01, 9);
    });

    it('keeps the usual rows per window in the state, so a restart weighs windows as before', () => {
      const s = run(undefined, 5, () => rows(0));
      expect(s.servedPerWindow).toBe(30);
      const again = run(JSON.parse(JSON.stringify(s)) as SloControlState, 1, () => rows(3), s.updatedAt);
      expect(Math.log(sloFactor(again)) - Math.log(sloFactor(s))).toBeCloseTo(STEP * (0.3 - 0.01), 9); // 9 of 30 late
    });
  });

  it('moves up on misses by STEP × (1 − α) a window', () => {
    const s = run(undefined, 10, () => ({ missed: true }));
    expect(Math.log(sloFactor(s))).toBeCloseTo(10 * STEP * 0.99, 9);
  });

  it('moves down on slack by STEP × α a window', () => {
    const quiet = run(undefined, 100, () => ({}));
    expect(Math.log(sloFactor(quiet))).toBeCloseTo(-100 * STEP * 0.01, 9);
  });

  it('tracks the target share of missed windows: misses in 1 window of 100 leave the factor where it was', () => {
    const s = run(undefined, 1000, (i) => ({ missed: i % 300 === 0 }));
    expect(Math.abs(Math.log(sloFactor(s)))).toBeLessThan(1e-9);
    // Twice the target share moves it up, half of it down.
    expect(sloFactor(run(undefined, 1000, (i) => ({ missed: i % 150 === 0 })))).toBeGreaterThan(1);
    expect(sloFactor(run(undefined, 1000, (i) => ({ missed: i % 600 === 0 })))).toBeLessThan(1);
  });

  it('is bounded both ways', () => {
    expect(sloFactor(run(undefined, 2000, () => ({ missed: true })))).toBeCloseTo(MAX_FACTOR, 9);
    expect(sloFactor(run(undefined, 20_000, () => ({})))).toBeCloseTo(MIN_FACTOR, 9);
    expect(sloFactor({ ...run(undefined, 1, () => ({})), logHeadroom: 99 })).toBeCloseTo(MAX_FACTOR, 9);
    expect(sloFactor({ ...run(undefined, 1, () => ({})), logHeadroom: Number.NaN })).toBe(1);
  });

  it('a clock gone back or a long gap drops the open window, keeping the factor', () => {
    const up = run(undefined, 20, () => ({ missed: true }));
    const before = sloFactor(up);
    const back = noteSloTick(up, { now: T0, windowMs: SLO_MS, sinceMs: TICK_MS, missed: true }, TARGETS);
    expect(sloFactor(back)).toBe(before);
    expect(back).toMatchObject({ windowStartMs: T0, windowTicks: 0, windowMissTicks: 0 });
    const later = T0 + 24 * 3600_000;
    const gap = noteSloTick(up, { now: later, windowMs: SLO_MS, sinceMs: TICK_MS, missed: true }, TARGETS);
    expect(sloFactor(gap)).toBe(before);
    expect(gap.windowStartMs).toBe(later);
  });
});

describe('closed-loop SLO control inside decide()', () => {
  const RATE = 100;
  const base = (now: number, memory: PolicyInput['memory'], oldestAgeMs: number): PolicyInput => ({
    now,
    forecast: {
      ratePerSec: 400,
      upperRatePerSec: 500,
      upperQuantile: 0.9,
      horizonS: 120,
      method: 'seasonal',
      burstRatePerSec: 500,
      components: {},
    },
    backlog: { waiting: oldestAgeMs > 0 ? 50 : 0, active: 0, prioritized: 0, delayed: 0, oldestAgeMs },
    workers: { starting: 0, standby: 0, active: 5, draining: 0 },
    perWorkerRatePerSec: RATE,
    settings: {
      min: 0,
      max: 100,
      standby: 0,
      sloQueueWaitMs: SLO_MS,
      coldStartMs: 60_000,
      scaleDownStabilizationMs: 60_000,
      targetUtilization: 1,
    },
    memory,
    observed: { arrivedRows: 400 * (TICK_MS / 1000), servedRows: 400 * (TICK_MS / 1000), sinceMs: TICK_MS },
  });

  /** Ticks decide() with its memory carried through JSON (as the controller stores it in Redis). */
  function ticks(n: number, oldestAgeMs: (i: number) => number, from = T0, start: PolicyInput['memory'] = { recentDesired: [] }) {
    let memory = start;
    let last = decide(base(from, memory, 0));
    for (let i = 0; i < n; i++) {
      last = decide(base(from + (i + 1) * TICK_MS, memory, oldestAgeMs(i)));
      memory = JSON.parse(JSON.stringify(last.memory));
    }
    return { last, memory };
  }

  it('raises sized capacity after measured misses, and the factor survives a restart through PolicyMemory', () => {
    const calm = ticks(3, () => 0);
    const missing = ticks(90, () => 2 * SLO_MS);
    expect(missing.last.terms?.sloFactor).toBeGreaterThan(1.5);
    expect(missing.last.terms?.sloActive).toBeGreaterThan(calm.last.terms?.sloActive ?? Infinity);
    expect(missing.last.reasons.some((r) => r.startsWith('capacity ×'))).toBe(true);
    // A restarted controller reads the stored memory and goes on from the same factor.
    const restarted = decide(base(T0 + 91 * TICK_MS, missing.memory, 0));
    expect(restarted.terms?.sloFactor).toBeCloseTo(missing.last.terms?.sloFactor ?? 0, 9);
  });

  it('lowers it again on slack, but never sizes below the mean', () => {
    const up = ticks(90, () => 2 * SLO_MS);
    const after = ticks(3000, () => 0, T0 + 100 * TICK_MS, up.memory);
    expect(after.last.terms?.sloFactor).toBeLessThan(up.last.terms?.sloFactor ?? 0);
    // Long slack takes it to its floor, where the mean still holds: 400/s at 100/s a worker.
    const floor = ticks(20_000, () => 0, T0 + 4000 * TICK_MS, after.memory);
    expect(floor.last.terms?.sloFactor).toBeCloseTo(MIN_FACTOR, 9);
    expect(floor.last.terms?.sloActive).toBe(4);
  });

  it('leaves the factor alone without the controller counts, and counts no miss with no worker up', () => {
    let memory: PolicyInput['memory'] = { recentDesired: [] };
    for (let i = 0; i < 60; i++) {
      const { observed: _none, ...rest } = base(T0 + i * TICK_MS, memory, 2 * SLO_MS);
      memory = decide(rest).memory;
    }
    expect(memory.sloControl).toBeUndefined();
    for (let i = 0; i < 60; i++) {
      const input = base(T0 + i * TICK_MS, memory, 2 * SLO_MS);
      memory = decide({ ...input, workers: { ...input.workers, active: 0 } }).memory;
    }
    expect(sloFactor(memory.sloControl)).toBeLessThanOrEqual(1);
  });
});
