/**
 * The dashboard's pure pieces: histogram arithmetic and percentiles, the per-worker interval
 * differences (a restart is not a negative burst), the per-minute forecast, the chart columns,
 * the "what actually happened" outcome, and reading a real prom-client snapshot.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { actualOutcome } from '../api/insights/outcome.ts';
import { countersOf } from '../api/insights/samples.ts';
import {
  fractionAtMost,
  type Histogram,
  histogramDelta,
  intervalHistogram,
  minuteForecast,
  type PoolSample,
  quantile,
  shapeSeries,
} from '../api/insights/series.ts';
import { chooseSettings } from '../api/use-cases/simulate-deployment.ts';
import type { DecisionRecord } from '../infra/scaler/decision-log.ts';
import { createWorkerMetrics } from '../infra/telemetry/metrics.ts';

const h = (counts: number[], count: number, sum = 0): Histogram => ({ bounds: [1, 2, 4], counts, sum, count });

describe('histograms', () => {
  it('quantile interpolates within the bucket holding the rank, as histogram_quantile does', () => {
    // 10 observations: 4 in (0,1], 4 in (1,2], 2 in (2,4].
    const x = h([4, 8, 10], 10);
    expect(quantile(x, 0.2)).toBeCloseTo(0.5);
    expect(quantile(x, 0.6)).toBeCloseTo(1.5);
    expect(quantile(x, 0.9)).toBeCloseTo(3);
    expect(quantile(h([0, 0, 0], 0), 0.5)).toBeNull();
  });

  it('a rank past the last bound (the +Inf bucket) reads as the last bound', () => {
    expect(quantile(h([1, 1, 1], 10), 0.99)).toBe(4);
  });

  it('fractionAtMost: the share within a bound, linear in its bucket; none past the last bound is known', () => {
    const x = h([4, 8, 10], 10);
    expect(fractionAtMost(x, 1)).toBeCloseTo(0.4);
    expect(fractionAtMost(x, 1.5)).toBeCloseTo(0.6);
    expect(fractionAtMost(x, 100)).toBe(1);
    expect(fractionAtMost(h([1, 1, 1], 4), 100)).toBeCloseTo(0.25);
    expect(fractionAtMost(undefined, 1)).toBeNull();
  });

  it('histogramDelta subtracts, and refuses counters that went down (a restarted worker)', () => {
    expect(histogramDelta(h([1, 2, 3], 3, 5), h([2, 4, 7], 8, 20))).toEqual(h([1, 2, 4], 5, 15));
    expect(histogramDelta(h([5, 5, 5], 5), h([1, 1, 1], 1))).toBeUndefined();
    expect(histogramDelta(undefined, h([1, 1, 1], 1))).toBeUndefined();
  });

  it('intervalHistogram sums the differences, counts all of a worker that just appeared, and leaves out one that restarted', () => {
    const earlier = { a: { batchRows: h([1, 1, 1], 1, 1) }, b: { batchRows: h([9, 9, 9], 9, 9) }, d: {} };
    const later = {
      a: { batchRows: h([3, 3, 3], 3, 3) },
      b: { batchRows: h([1, 1, 1], 1, 1) },
      c: { batchRows: h([7, 7, 7], 7, 7) },
      d: { batchRows: h([1, 1, 1], 1, 1) },
    };
    expect(intervalHistogram(earlier, later, 'batchRows')).toEqual(h([10, 10, 10], 10, 10));
    expect(intervalHistogram(earlier, later, 'queueSeconds')).toBeUndefined();
  });
});

describe('countersOf: a real prom-client snapshot', () => {
  it('reads the batch-size and queue-wait histograms of the model asked for', async () => {
    const registry = new Registry();
    const m = createWorkerMetrics(registry, { model: 'm', version: '1' });
    for (const rows of [1, 8, 8, 100]) m.batchRows.observe({ model: 'm', version: '1' }, rows);
    m.jobQueueSeconds.observe({ model: 'm', version: '1' }, 0.02);
    m.batchRows.observe({ model: 'other', version: '1' }, 5);
    const counters = countersOf(await registry.getMetricsAsJSON(), 'm');
    expect(counters?.batchRows?.count).toBe(4);
    expect(counters?.batchRows?.sum).toBe(117);
    expect(counters?.batchRows?.bounds[0]).toBe(1);
    expect(counters?.batchRows?.counts[counters.batchRows.bounds.indexOf(8)]).toBe(3);
    expect(counters?.queueSeconds?.count).toBe(1);
    expect(countersOf(await registry.getMetricsAsJSON(), 'nobody')).toBeUndefined();
    expect(countersOf('garbage', 'm')).toBeUndefined();
  });
});

function decision(
  at: number,
  ratePerSec: number,
  shadow = false,
  workers = { starting: 0, standby: 1, active: 1, draining: 0 },
): DecisionRecord {
  return {
    at,
    model: 'm',
    version: '1',
    shadow,
    leader: 'x',
    forecast: { ratePerSec, burstRatePerSec: ratePerSec, horizonS: 60, method: 'reactive', components: {} },
    backlog: { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 },
    workers,
    perWorkerRatePerSec: 100,
    settings: {
      min: 1,
      max: 3,
      standby: 1,
      sloQueueWaitMs: 1000,
      coldStartMs: 1000,
      scaleDownStabilizationMs: 1000,
      targetUtilization: 0.8,
    },
    decision: { active: 1, standby: 1, launch: 0, drain: 0, reasons: [] },
    planned: [],
    applied: [],
  };
}

const T0 = Date.UTC(2026, 0, 1, 12, 0);

describe('minuteForecast', () => {
  it('averages the decisions of each minute as rows per minute', () => {
    const f = minuteForecast([decision(T0 + 1000, 1), decision(T0 + 30_000, 2), decision(T0 + 60_000, 0.5)], T0, 2);
    expect(f).toEqual([90, 30]);
  });

  it('a minute without one holds the last decision from at most a heartbeat before it (an unchanged one is not recorded again); then null', () => {
    // Recorded at 0:30 and then not until 3:10: minute 1 holds it, minutes 2 (90 s later) is unknown.
    const f = minuteForecast([decision(T0 + 30_000, 2), decision(T0 + 190_000, 0.5)], T0, 4);
    expect(f).toEqual([120, 120, null, 30]);
    expect(minuteForecast([decision(T0 - 10_000, 1)], T0, 2)).toEqual([60, null]);
  });

  it('prefers the live scaler over a shadow one, and uses shadow decisions when they are all there is', () => {
    expect(minuteForecast([decision(T0, 1), decision(T0 + 1, 9, true)], T0, 1)).toEqual([60]);
    expect(minuteForecast([decision(T0, 9, true)], T0, 1)).toEqual([540]);
  });
});

function sample(at: number, queued: number, workers: PoolSample['workers'], waits?: Histogram, rows?: Histogram): PoolSample {
  const s: PoolSample = { at, queue: { waiting: queued, prioritized: 0, delayed: 0, active: 1, oldestAgeMs: 1500 }, workers };
  if (waits) s.queueSeconds = waits;
  if (rows) s.batchRows = rows;
  return s;
}

describe('shapeSeries', () => {
  it('turns the records into aligned uPlot columns, x in epoch seconds, null where nothing was measured', () => {
    const w = { starting: 1, standby: 1, active: 2, draining: 0 };
    const view = shapeSeries({
      model: 'm',
      at: T0 + 150_000,
      minutes: 3,
      arrivals: { startMs: T0, perMinute: [5, 0, 7] },
      served: { startMs: T0, perMinute: [5, 40] }, // bulk rows served beside the arrivals; the last minute not yet counted
      cached: { startMs: T0, perMinute: [0, 0, 9] },
      decisions: [decision(T0 + 5_000, 0.1)],
      samples: [sample(T0 + 2_000, 3, w), sample(T0 + 4_000, 0, w, h([1, 2, 2], 2), h([0, 0, 4], 4, 12))],
    });
    expect(view.arrivals).toEqual({
      t: [T0 / 1000, T0 / 1000 + 60, T0 / 1000 + 120],
      perMin: [5, 0, 7],
      cachedPerMin: [0, 0, 9],
      servedPerMin: [5, 40, 0],
      forecastPerMin: [6, 6, null],
    });
    expect(view.pool.t).toEqual([T0 / 1000 + 2, T0 / 1000 + 4]);
    expect(view.pool.queued).toEqual([3, 0]);
    expect(view.pool.oldestAgeS).toEqual([1.5, 1.5]);
    expect(view.pool.active).toEqual([2, 2]);
    expect(view.batches.meanRows).toEqual([null, 3]);
    expect(view.batches.jobs).toEqual([0, 2]);
    expect(view.batches.waitP50Ms).toEqual([null, 1000]);
  });
});

describe('actualOutcome', () => {
  it('bills worker counts until the next observation, never across a gap longer than maxGapMs', () => {
    const w = (active: number, standby: number) => ({ starting: 0, standby, active, draining: 0 });
    const out = actualOutcome({
      decisions: [decision(T0, 1, false, w(1, 1)), decision(T0 + 10_000, 1, false, w(2, 0))],
      samples: [sample(T0 + 20_000, 0, w(2, 0), h([1, 2, 4], 4))],
      fromMs: T0,
      toMs: T0 + 200_000,
      sloMs: 2000,
      maxGapMs: 60_000,
    });
    // 10 s of 1 active + 1 standby, 10 s of 2 active, then 2 active for at most 60 s.
    expect(out.workerSeconds).toEqual({ active: 10 + 20 + 120, standby: 10, starting: 0, total: 160 });
    expect(out.cost).toBe(160);
    expect(out.jobs).toBe(4);
    expect(out.sloAttainment).toBe(0.5);
    expect(out.observedMinutes).toBe(1);
  });

  it('with nothing observed: no cost, no jobs, attainment unknown', () => {
    const out = actualOutcome({ decisions: [], samples: [], fromMs: T0, toMs: T0 + 60_000, sloMs: 1000 });
    expect(out).toMatchObject({ cost: 0, jobs: 0, sloAttainment: null, queueWaitP95Ms: null, observedMinutes: 0 });
  });
});

describe('chooseSettings', () => {
  const current = decision(T0, 1).settings;
  it('overrides only what is chosen', () => {
    expect(chooseSettings(current, { standby: 3, min: undefined })).toEqual({ ...current, standby: 3 });
  });
  it('refuses a max below min', () => {
    expect(() => chooseSettings(current, { min: 5 })).toThrow(/max \(3\) is below min \(5\)/);
  });
});
