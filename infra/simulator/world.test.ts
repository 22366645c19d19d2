import { describe, expect, it } from 'vitest';
import type { ScalerAction } from '../scaler/decision-log.ts';
import { minuteArrivals, realiseCounts } from './arrivals.ts';
import { WaitHistogram } from './wait-histogram.ts';
import { type Observation, type Scaler, simulate, type WorldOptions } from './world.ts';

const base = (over: Partial<WorldOptions>): WorldOptions => ({
  counts: [4],
  startMs: 0,
  pattern: { kind: 'uniform' },
  seed: 1,
  coldStartMs: 30_000,
  activateMs: 1_000,
  maxBatch: 1,
  serviceMs: () => 20_000,
  tickMs: 5_000,
  sloMs: 10_000,
  ...over,
});

function fixed(active: number, onFirstTick: ScalerAction[] = []): Scaler & { seen: Observation[] } {
  const seen: Observation[] = [];
  return {
    name: 'test',
    seen,
    initial: () => ({ active, standby: 0 }),
    tick(obs) {
      seen.push(obs);
      return seen.length === 1 ? onFirstTick : [];
    },
  };
}

describe('world', () => {
  it('one worker, batches of one: jobs at 7.5, 22.5, 37.5, 52.5 s served for 20 s each wait 0, 5, 10, 15 s', () => {
    // A second, empty minute lets the last job finish before the replay ends.
    const run = simulate(fixed(1), base({ counts: [4, 0] }));
    expect(run.jobs).toBe(4);
    expect(run.queueWaitMs.max).toBe(15_000);
    // Waits 0, 5, 10, 15 s against a 10 s SLO: three of four within.
    expect(run.sloAttainment).toBe(0.75);
    expect(run.workerSeconds).toEqual({ total: 120, active: 120, standby: 0, starting: 0 });
    expect(run.jobsDelayedByColdStart).toBe(0);
  });

  it('a burst with a cold start: the two jobs that arrive while the worker starts are delayed by it', () => {
    // No worker at first; the first tick (t = 0) launches one as active, ready at 30 s. It takes
    // jobs 7.5 s and 22.5 s in one batch (10 s), so the job at 37.5 s waits 2.5 s for a busy
    // worker, not for a cold start, and the one at 52.5 s not at all.
    const launch: ScalerAction = { action: 'launch', version: 'sim', count: 1, startAs: 'active' };
    const run = simulate(fixed(0, [launch]), base({ maxBatch: 8, serviceMs: () => 10_000 }));
    expect(run.jobsDelayedByColdStart).toBe(2);
    expect(run.queueWaitMs.max).toBe(22_500);
    expect(run.coldStarts).toBe(1);
    expect(run.scaleEvents).toBe(1);
    expect(run.workerSeconds).toEqual({ total: 60, active: 30, standby: 0, starting: 30 });
  });

  it('tells the scaler each cold start once, launch to warmed, on the tick after it ends (metrics lag a tick)', () => {
    const launch: ScalerAction = { action: 'launch', version: 'sim', count: 2, startAs: 'standby' };
    const scaler = fixed(0, [launch]);
    simulate(scaler, base({ coldStartMs: (n) => 30_000 + n * 2_000 }));
    const told = scaler.seen.flatMap((o) => o.coldStartsMs.map((ms) => ({ at: o.now, ms })));
    // Ready at 30 s and 32 s; the snapshots after the 30 s and 35 s ticks carry them.
    expect(told).toEqual([
      { at: 35_000, ms: 30_000 },
      { at: 40_000, ms: 32_000 },
    ]);
  });

  it("a draining worker finishes its batch; the scaler sees the previous tick's state", () => {
    const scaler = fixed(1, []);
    let ticks = 0;
    scaler.tick = (obs) => {
      scaler.seen.push(obs);
      ticks++;
      // At 10 s the worker holds the job that arrived at 7.5 s (20 s of service): drain it.
      return ticks === 3 ? [{ action: 'drain', version: 'sim', workerId: obs.list[0]?.id ?? '' }] : [];
    };
    const run = simulate(scaler, base({ counts: [4] }));
    // It leaves at 27.5 s, having served one job; the other three wait to the end of the minute.
    expect(run.workerSeconds.active).toBe(27.5);
    expect(run.queueWaitMs.max).toBe(60_000 - 22_500);
    // Staleness: the tick at 10 s saw the snapshot taken at 5 s (jobsInFlight 0 then: none yet at 5 s).
    expect(scaler.seen[2]?.now).toBe(10_000);
    expect(scaler.seen[2]?.list[0]?.jobsInFlight).toBe(0);
    expect(scaler.seen[3]?.list.length).toBe(1);
    expect(scaler.seen[3]?.workers.draining).toBe(1);
  });

  it('is deterministic with a seed, and a different seed places arrivals differently', () => {
    const options = base({ counts: [50, 80, 30], pattern: { kind: 'gamma', cv: 2 }, maxBatch: 8, serviceMs: (b) => 500 + 100 * b });
    const a = simulate(fixed(2), options);
    const b = simulate(fixed(2), options);
    const c = simulate(fixed(2), { ...options, seed: 2 });
    expect(b).toEqual(a);
    expect(c.queueWaitMs).not.toEqual(a.queueWaitMs);
    expect(a.jobs).toBe(160);
  });
});

describe('arrivals', () => {
  it("keeps each minute's count and stays within the minute, sorted", () => {
    for (const pattern of [{ kind: 'poisson' } as const, { kind: 'gamma', cv: 2 } as const]) {
      const t = minuteArrivals(1000, 60_000, 1, pattern, 7);
      expect(t.length).toBe(1000);
      for (let i = 0; i < t.length; i++) {
        expect(t[i]).toBeGreaterThanOrEqual(60_000);
        expect(t[i]).toBeLessThan(120_000);
        if (i > 0) expect(t[i]).toBeGreaterThanOrEqual(t[i - 1] ?? 0);
      }
    }
  });

  it('gamma gaps with CV 2 are burstier than Poisson ones', () => {
    const cv = (t: Float64Array) => {
      const gaps = Array.from(t.subarray(1), (x, i) => x - (t[i] ?? 0));
      const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
      return Math.sqrt(gaps.reduce((a, g) => a + (g - mean) ** 2, 0) / gaps.length) / mean;
    };
    expect(cv(minuteArrivals(5000, 0, 0, { kind: 'gamma', cv: 2 }, 3))).toBeGreaterThan(1.5);
    expect(cv(minuteArrivals(5000, 0, 0, { kind: 'poisson' }, 3))).toBeLessThan(1.2);
  });

  it('rounds scaled counts stochastically, keeping the mean, and replays nothing in missing minutes', () => {
    const counts = realiseCounts(new Array(10_000).fill(1), [false, true], 0.25, 9);
    expect(counts[1]).toBe(0);
    const mean = counts.reduce((a, b) => a + b, 0) / counts.length;
    expect(mean).toBeGreaterThan(0.22);
    expect(mean).toBeLessThan(0.28);
  });
});

describe('WaitHistogram', () => {
  it('reports percentiles within 1 % and counts the SLO exactly', () => {
    const h = new WaitHistogram(500);
    for (let i = 0; i <= 1000; i++) h.record(i);
    expect(h.withinSlo).toBe(501);
    expect(h.max).toBe(1000);
    expect(h.percentile(0.5)).toBeGreaterThanOrEqual(500);
    expect(h.percentile(0.5)).toBeLessThanOrEqual(505.1);
    expect(h.percentile(1)).toBe(1000);
  });
});
