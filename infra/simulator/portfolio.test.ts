/**
 * The self-tuning portfolio: the window a retune replays, the candidates it holds, the choice
 * with its hysteresis, and one cheap retune over three hours of steady synthetic traffic.
 */
import { describe, expect, it } from 'vitest';
import type { ArrivalSeries, CandidateScore, PolicySettings } from '../contracts/pool.ts';
import { seededRandom } from '../kernel/seeded-random.ts';
import {
  chooseCandidate,
  patternOf,
  portfolio,
  retune,
  SWITCH_SAVING,
  type TuningInput,
  tuningWindow,
  WINDOW_MAX_MINUTES,
  WINDOW_MIN_MINUTES,
} from './portfolio.ts';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 8, 0, 0);

const SETTINGS: PolicySettings = {
  min: 1,
  max: 20,
  standby: 1,
  sloQueueWaitMs: 10_000,
  coldStartMs: 60_000,
  scaleDownStabilizationMs: 10 * MIN,
  targetUtilization: 0.8,
};

const flat = (minutes: number, perMinute: number): ArrivalSeries => ({ startMs: T0, perMinute: new Array(minutes).fill(perMinute) });
/** Half a minute into minute `m`: the series' last entry when it holds m + 1 minutes. */
const inMinute = (m: number) => T0 + m * MIN + 30_000;

describe('tuningWindow', () => {
  it('ends at the minute containing now, which it leaves out', () => {
    expect(tuningWindow(flat(121, 100), inMinute(120), 0.99)).toEqual({ from: 60, to: 120 });
    // now past the series' end: the window ends with the series.
    expect(tuningWindow(flat(120, 100), inMinute(500), 0.99)).toEqual({ from: 60, to: 120 });
  });

  it('a busy deployment gets WINDOW_MIN_MINUTES even when fewer minutes hold enough jobs', () => {
    // 2,000 jobs (20 misses at 99 %) arrive in 20 minutes at 100 a minute.
    const w = tuningWindow(flat(301, 100), inMinute(300), 0.99);
    expect(w).toEqual({ from: 300 - WINDOW_MIN_MINUTES, to: 300 });
  });

  it('takes the fewest whole hours holding WINDOW_MISSES_EXPECTED / (1 − target) jobs', () => {
    // 20 a minute: 2,000 jobs take 100 minutes, so two hours.
    expect(tuningWindow(flat(301, 20), inMinute(300), 0.99)).toEqual({ from: 180, to: 300 });
    // At a 95 % target 400 jobs suffice: 20 minutes, so one hour.
    expect(tuningWindow(flat(301, 20), inMinute(300), 0.95)).toEqual({ from: 240, to: 300 });
    // 9 a minute: 2,000 jobs take 223 minutes, so four hours.
    expect(tuningWindow(flat(301, 9), inMinute(300), 0.99)).toEqual({ from: 60, to: 300 });
  });

  it('counts the jobs of the window itself, not of older minutes', () => {
    // An hour of 100 a minute long ago, and 1 a minute since: the window must reach back to it.
    const perMinute = [...new Array(60).fill(100), ...new Array(1000).fill(1)];
    const w = tuningWindow({ startMs: T0, perMinute: [...perMinute, 1] }, inMinute(1060), 0.99);
    // The last 1,000 minutes hold 1,000 jobs; 10 minutes of the busy hour make 2,000, and whole
    // hours make that 1,020 minutes (17 hours).
    expect(w).toEqual({ from: 40, to: 1060 });
  });

  it('a sparse deployment gets WINDOW_MAX_MINUTES, however few jobs it holds', () => {
    expect(tuningWindow(flat(3001, 1), inMinute(3000), 0.99)).toEqual({ from: 3000 - WINDOW_MAX_MINUTES, to: 3000 });
  });

  it('with too few jobs and less than a day of history, the whole history, whole hours or not', () => {
    expect(tuningWindow(flat(91, 1), inMinute(90), 0.99)).toEqual({ from: 0, to: 90 });
  });

  it('is undefined with less than WINDOW_MIN_MINUTES of finished minutes, or no jobs at all', () => {
    expect(tuningWindow(flat(60, 1_000), inMinute(59), 0.99)).toBeUndefined();
    expect(tuningWindow(flat(61, 1_000), inMinute(60), 0.99)).toEqual({ from: 0, to: 60 });
    expect(tuningWindow({ startMs: T0, perMinute: [] }, inMinute(100), 0.99)).toBeUndefined();
    expect(tuningWindow(flat(2000, 0), inMinute(1999), 0.99)).toBeUndefined();
    expect(tuningWindow(flat(200, 100), T0 - MIN, 0.99)).toBeUndefined();
  });
});

describe('portfolio', () => {
  const candidates = portfolio({ perWorkerRatePerSec: 50, settings: { ...SETTINGS, minLifetimeColdStarts: 3 } }, 4);

  it('names every candidate once', () => {
    const names = candidates.map((c) => c.name);
    expect(new Set(names).size).toBe(names.length);
  });

  it('holds the fixed fleet given, three reactive targets around one worker clearing half the SLO, and predictive variants', () => {
    expect(candidates.filter((c) => c.kind === 'fixed')).toEqual([{ kind: 'fixed', name: 'fixed', workers: 4 }]);
    // 50/s × 10 s / 2 = 250 rows a replica, ÷4 and ×4.
    const reactive = candidates.flatMap((c) => (c.kind === 'reactive' ? [c.backlogPerWorker] : []));
    expect(reactive).toEqual([62.5, 250, 1000]);
    const predictive = Object.fromEntries(candidates.flatMap((c) => (c.kind === 'predictive' ? [[c.name, c.overrides]] : [])));
    expect(predictive).toEqual({
      predictive: {},
      'predictive-margin': { capacityMargin: 0.25 },
      'predictive-standby': { standby: 2 },
      'predictive-long-hold': { minLifetimeColdStarts: 9 },
      'predictive-short-hold': { minLifetimeColdStarts: 1 },
    });
  });

  it('at least one row a replica for a slow worker, and a lifetime of 1 cold start when unset', () => {
    const slow = portfolio({ perWorkerRatePerSec: 0.01, settings: SETTINGS }, 1);
    expect(slow.flatMap((c) => (c.kind === 'reactive' ? [c.backlogPerWorker] : []))).toEqual([0.25, 1, 4]);
    const long = slow.find((c) => c.name === 'predictive-long-hold');
    expect(long).toEqual({ kind: 'predictive', name: 'predictive-long-hold', overrides: { minLifetimeColdStarts: 3 } });
  });
});

function score(name: string, cost: number, attainment: number, over: Partial<CandidateScore> = {}): CandidateScore {
  return { name, kind: 'predictive', cost, attainment, coldStarts: 0, jobs: 1_000, met: attainment >= 0.99, ...over };
}

describe('chooseCandidate', () => {
  const table = [score('a', 100, 0.995), score('b', 80, 0.991), score('c', 60, 0.95), score('d', 120, 1)];

  it('with none in force, the cheapest that met the target', () => {
    expect(chooseCandidate(table, undefined)?.name).toBe('b');
    expect(chooseCandidate(table, 'unknown')?.name).toBe('b');
  });

  it('the current one missed: the cheapest that met it, even when dearer than the current one', () => {
    const choice = chooseCandidate(table, 'c');
    expect(choice?.name).toBe('b');
    expect(choice?.why).toMatch(/c missed the target/);
  });

  it('keeps a current one that met the target unless another met it more than SWITCH_SAVING cheaper', () => {
    expect(SWITCH_SAVING).toBe(0.05);
    expect(chooseCandidate([score('cur', 100, 0.999), score('x', 96, 0.999)], 'cur')?.name).toBe('cur');
    expect(chooseCandidate([score('cur', 100, 0.999), score('x', 94, 0.999)], 'cur')?.name).toBe('x');
    // Cheaper, but it missed.
    expect(chooseCandidate([score('cur', 100, 0.999), score('x', 10, 0.9)], 'cur')?.name).toBe('cur');
    // Already the cheapest.
    expect(chooseCandidate(table, 'b')?.name).toBe('b');
    expect(chooseCandidate(table, 'a')?.name).toBe('b');
  });

  it('when none met the target, the best attainment, the cheaper on a tie, whatever is in force', () => {
    const none = [score('p', 50, 0.97), score('q', 90, 0.98), score('r', 70, 0.98)];
    const choice = chooseCandidate(none, 'p');
    expect(choice?.name).toBe('r');
    expect(choice?.why).toMatch(/no candidate met/);
  });

  it('leaves out partial scores and those that saw no jobs', () => {
    const t = [score('cheap', 10, 1, { partial: true }), score('idle', 5, 1, { jobs: 0 }), score('ok', 50, 0.999)];
    expect(chooseCandidate(t, undefined)?.name).toBe('ok');
  });

  it('is undefined with no scores, or none it can use', () => {
    expect(chooseCandidate([], 'a')).toBeUndefined();
    expect(chooseCandidate([score('a', 1, 1, { partial: true }), score('b', 1, 1, { jobs: 0 })], 'a')).toBeUndefined();
  });
});

describe('patternOf', () => {
  it('Poisson up to a dispersion of 1.2, or when it is not known', () => {
    for (const d of [undefined, Number.NaN, Number.POSITIVE_INFINITY, 0, 1, 1.2]) expect(patternOf(d)).toEqual({ kind: 'poisson' });
  });

  it('gamma with CV √dispersion above it, at most 4', () => {
    expect(patternOf(2.25)).toEqual({ kind: 'gamma', cv: 1.5 });
    expect(patternOf(16)).toEqual({ kind: 'gamma', cv: 4 });
    expect(patternOf(100)).toEqual({ kind: 'gamma', cv: 4 });
  });
});

describe('retune', () => {
  // Three hours of about 300 jobs a minute (5/s) for workers of 2/s: one hour is the window.
  const random = seededRandom(3);
  const perMinute = Array.from({ length: 181 }, () => 300 + Math.round((random() - 0.5) * 20));
  const input: TuningInput = {
    series: { startMs: T0, perMinute },
    now: inMinute(180),
    settings: SETTINGS,
    sloTarget: 0.99,
    perWorkerRatePerSec: 2,
    maxBatch: 8,
    tickMs: 15_000,
    coldStartsMs: [],
    cpuBudgetMs: Number.POSITIVE_INFINITY,
    cpuMs: () => 0,
  };

  it('scores every candidate of the portfolio on the last whole hour and adopts one that met the target', () => {
    const choice = retune(input);
    expect(choice).toBeDefined();
    if (!choice) return;
    expect({ fromMs: choice.fromMs, toMs: choice.toMs }).toEqual({ fromMs: T0 + 120 * MIN, toMs: T0 + 180 * MIN });
    const names = choice.table.map((s) => s.name);
    for (const c of portfolio(input, 1)) expect(names).toContain(c.name);
    expect(new Set(names).size).toBe(names.length);
    const chosen = choice.table.find((s) => s.name === choice.chosen.name);
    expect(chosen?.met).toBe(true);
    expect(chosen?.partial).toBeUndefined();
    // Nothing that met it was cheaper.
    for (const s of choice.table) if (s.met) expect(s.cost).toBeGreaterThanOrEqual(chosen?.cost ?? 0);
    expect(choice.previous).toBeUndefined();
  });

  it('the same input gives the same choice', () => {
    expect(retune(input)).toEqual(retune(input));
  });

  it('over its CPU budget, leaves the candidates it did not reach out of the choice', () => {
    let cpu = 0;
    const choice = retune({ ...input, cpuBudgetMs: 0, cpuMs: () => cpu++ });
    expect(choice).toBeDefined();
    const partial = choice?.table.filter((s) => s.partial) ?? [];
    expect(partial.length).toBeGreaterThan(0);
    expect(partial.every((s) => s.jobs === 0 && !s.met)).toBe(true);
    expect(partial.map((s) => s.name)).not.toContain(choice?.chosen.name);
  });

  it('is undefined with under an hour of history or no measured worker rate', () => {
    expect(retune({ ...input, series: { startMs: T0, perMinute: perMinute.slice(0, 60) }, now: inMinute(59) })).toBeUndefined();
    expect(retune({ ...input, perWorkerRatePerSec: 0 })).toBeUndefined();
    expect(retune({ ...input, perWorkerRatePerSec: Number.NaN })).toBeUndefined();
  });
});
