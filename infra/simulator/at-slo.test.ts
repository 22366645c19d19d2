import { describe, expect, it } from 'vitest';
import { SIMULATE_DEFAULTS } from '../kernel/config.ts';
import { baselineAtSlo, baselinesAtSlo, inThisThread, MAX_RUNS } from './at-slo.ts';
import { compare, defaultSettings, type SimulationSettings } from './compare.ts';
import { withReplayThreads } from './replay-pool.ts';
import type { Trace } from './trace.ts';

const traceOf = (perMinute: number[]): Trace => ({
  series: { startMs: Date.UTC(2024, 0, 1), perMinute },
  missing: perMinute.map(() => false),
  rows: perMinute.length,
});

/** Evenly spaced arrivals, fixed cold starts, batches of one: every wait can be worked out by hand. */
const settingsOf = (over: Partial<SimulationSettings>): SimulationSettings =>
  defaultSettings(SIMULATE_DEFAULTS, { maxBatch: 1, pattern: { kind: 'uniform' }, tickMs: 5_000, seed: 1, ...over });

describe('baselines at the SLO target', () => {
  // 1 job/s, evenly spaced, for ten minutes; a job takes 2.5 s (0.4 rows/s, batch 1); SLO 10 s.
  // Three workers take every job at once (each is free again 0.5 s before its next job); two
  // serve 0.8 jobs/s, so the queue grows by 0.2 jobs/s and waits pass 10 s after a minute.
  const steady = traceOf(Array.from({ length: 10 }, () => 60));
  const steadySettings = settingsOf({ workerRps: 0.4, sloMs: 10_000, coldStartMs: 60_000 });

  it('static: the smallest fixed fleet meeting the target, by bisection (3 workers; 2 miss)', async () => {
    const r = await baselineAtSlo('static-peak', steady, steadySettings, 0.99, inThisThread(steady));
    expect(r).toMatchObject({ met: true, setting: 'workers', value: 3, missedAt: 2, sloAttainment: 1 });
    expect(r.workerSeconds).toEqual({ total: 1800, active: 1800, standby: 0, starting: 0 });
    expect(r.cost).toBe(1800);
  });

  it('oracle: meets the target with the 3 workers ⌈2.5 × (1 + h)⌉ holds for h > −0.2; at h ≤ −0.2 it holds 2 and misses', async () => {
    const r = await baselineAtSlo('oracle', steady, steadySettings, 0.99, inThisThread(steady));
    expect(r).toMatchObject({ met: true, setting: 'headroom' });
    expect(r.sloAttainment).toBeGreaterThanOrEqual(0.99);
    expect(r.workerSeconds?.active).toBe(1800);
    expect(r.value).toBeGreaterThan(-0.2);
    expect(r.value).toBeLessThanOrEqual(-0.2 + 0.02);
    expect(r.missedAt).toBeLessThanOrEqual(-0.2);
    expect(r.runs).toBeLessThanOrEqual(MAX_RUNS);
  });

  // Four quiet minutes, then 60 jobs in one minute (one a second), each 20 s long, SLO 10 s, cold
  // start 120 s. With n < 20 fixed workers the k-th job of the burst waits ⌊k / n⌋ × (20 − n) s:
  // the last (k = 59) waits 3 × 4 = 12 s with 16 workers, 3 × 3 = 9 s with 17. Every job must be
  // within the SLO to reach 99 % of 60, so the smallest fleet is 17 (static-peak holds 20).
  const burst = traceOf([0, 0, 0, 0, 60, 0, 0, 0]);
  const burstSettings = settingsOf({ workerRps: 0.05, sloMs: 10_000, coldStartMs: 120_000 });

  it('static: bisection finds the 17 workers worked out by hand, as trying every fleet does', async () => {
    const r = await baselineAtSlo('static-peak', burst, burstSettings, 0.99, inThisThread(burst));
    expect(r).toMatchObject({ met: true, value: 17, missedAt: 16 });
    expect(r.runs).toBeLessThanOrEqual(MAX_RUNS);
    const meets = (n: number) =>
      (compare(burst, { ...burstSettings, staticWorkers: n }, ['static-peak']).policies[0]?.sloAttainment ?? 0) >= 0.99;
    const smallest = Array.from({ length: 20 }, (_, i) => i + 1).find(meets);
    expect(smallest).toBe(17);
  });

  it('reactive cannot meet the target when a burst comes from idle and a cold start is longer than the SLO: said so, no cost', async () => {
    const r = await baselineAtSlo('reactive', burst, burstSettings, 0.99, inThisThread(burst));
    expect(r.met).toBe(false);
    expect(r.value).toBeNull();
    expect(r.cost).toBeNull();
    expect(r.workerSeconds).toBeNull();
    expect(r.sloAttainment).toBeLessThan(0.99);
    expect(r.reason).toMatch(
      /reactive cannot meet the target at any backlogPerWorker tried: .*cold start \(120 s\) is longer than the SLO \(10 s\)/,
    );
    expect(r.runs).toBeLessThanOrEqual(MAX_RUNS);
  });

  it('oracle: perfect foresight launches for the burst a cold start ahead and meets the target with 20 workers', async () => {
    // It holds ⌈20 × (1 + h)⌉ during the burst and releases them as the minute ends (it keeps one
    // for jobs still queued). With 19 (h ≤ −0.05) the last three jobs wait 3 s into the next
    // minute, its tick sees the empty queue of the tick before and drains the pool, and they wait
    // for a cold start: 57 of 60 within the SLO. With 20 (h > −0.05) no job waits.
    const r = await baselineAtSlo('oracle', burst, burstSettings, 0.99, inThisThread(burst));
    expect(r.met).toBe(true);
    expect(r.sloAttainment).toBe(1);
    expect(r.value).toBeGreaterThan(-0.05);
    expect(r.value).toBeLessThanOrEqual(-0.05 + 0.02);
    expect(r.missedAt).toBeLessThanOrEqual(-0.05);
    const below = compare(burst, { ...burstSettings, oracleUtilization: 1 / 0.95 }, ['oracle']).policies[0];
    expect(below?.sloAttainment).toBe(57 / 60);
  });

  it('a real setting is bisected to its resolution: the oracle on Poisson arrivals needs some headroom', async () => {
    const poisson = { ...steadySettings, pattern: { kind: 'poisson' } as const, sloMs: 3_000 };
    const r = await baselineAtSlo('oracle', steady, poisson, 0.99, inThisThread(steady));
    expect(r.met).toBe(true);
    expect(r.sloAttainment).toBeGreaterThanOrEqual(0.99);
    // The setting just below it (within 0.02) missed.
    expect(r.missedAt).not.toBeNull();
    expect((r.value ?? 0) - (r.missedAt ?? 0)).toBeLessThanOrEqual(0.02 + 1e-12);
    const below = compare(steady, { ...poisson, oracleUtilization: 1 / (1 + (r.missedAt ?? 0)) }, ['oracle']).policies[0];
    expect(below?.sloAttainment).toBeLessThan(0.99);
  });

  it('on sweep threads the searches give the same answers as in this thread', async () => {
    const inline = await baselinesAtSlo(burst, burstSettings, 0.99, inThisThread(burst));
    const threaded = await withReplayThreads(burst, 2, (replay) => baselinesAtSlo(burst, burstSettings, 0.99, replay));
    expect(threaded).toEqual(inline);
    expect(Object.keys(threaded.baselines)).toEqual(['static-peak', 'reactive', 'oracle']);
  }, 60_000);
});
