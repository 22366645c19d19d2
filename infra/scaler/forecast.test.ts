/**
 * The forecaster on synthetic series whose right answer is known: a pure daily sine, a step in
 * level, a burst, short history, an outage, a partial current minute, weekday/weekend shapes.
 * Times start on Monday 2024-01-01 00:00 UTC.
 */
import { describe, expect, it } from 'vitest';
import type { ArrivalSeries } from '../contracts/pool.ts';
import { forecastArrivals } from './forecast.ts';

const T0 = Date.parse('2024-01-01T00:00:00Z');
const MIN = 60_000;
const DAY = 1440;
const HOUR_S = 3600;

/** Per-minute counts for minutes [0, minutes), rate(i) arrivals in minute i. */
function series(minutes: number, rate: (i: number) => number): ArrivalSeries {
  return { startMs: T0, perMinute: Array.from({ length: minutes }, (_, i) => rate(i)) };
}

/** The series as the API would hand it at `now`: minutes before it, plus the minute containing it. */
function upTo(s: ArrivalSeries, nowMin: number, partial = 0): ArrivalSeries {
  return { startMs: s.startMs, perMinute: [...s.perMinute.slice(0, nowMin), partial] };
}

function meanOver(rate: (i: number) => number, from: number, minutes: number): number {
  let sum = 0;
  for (let i = from; i < from + minutes; i++) sum += rate(i);
  return sum / minutes;
}

const sine = (i: number) => 100 + 60 * Math.sin((2 * Math.PI * i) / DAY);

describe('forecastArrivals', () => {
  it('follows a pure daily cycle, ramps included, far closer than "same as now"', () => {
    const history = series(14 * DAY, sine);
    for (const hour of [0, 3, 6, 9, 12, 15, 18, 21]) {
      const nowMin = 13 * DAY + hour * 60;
      const f = forecastArrivals({ series: upTo(history, nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
      const truth = meanOver(sine, nowMin, 60);
      const sameAsNow = meanOver(sine, nowMin - 60, 60);
      expect(f.method).toBe('seasonal');
      expect(Math.abs(f.ratePerSec * 60 - truth)).toBeLessThan(0.01 * truth);
      if (Math.abs(sameAsNow - truth) > 1) expect(Math.abs(f.ratePerSec * 60 - truth)).toBeLessThan(Math.abs(sameAsNow - truth) / 3);
    }
  });

  it('keeps a level step: a day running at twice the usual stays at twice', () => {
    const stepAt = 13 * DAY + 8 * 60;
    const rate = (i: number) => sine(i) * (i >= stepAt ? 2 : 1);
    const nowMin = stepAt + 3 * 60;
    const f = forecastArrivals({ series: upTo(series(nowMin, rate), nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    const truth = meanOver(rate, nowMin, 60);
    expect(f.method).toBe('seasonal');
    expect(Math.abs(f.ratePerSec * 60 - truth)).toBeLessThan(0.03 * truth);
  });

  it('puts a burst term above the rate when recent minutes spike, by how long the bursts last, and none on a flat series', () => {
    const flat = series(10 * DAY, () => 50);
    const nowMin = 10 * DAY - 1;
    const calm = forecastArrivals({ series: upTo(flat, nowMin), now: T0 + nowMin * MIN, horizonS: 300 });
    expect(calm.burstRatePerSec).toBeCloseTo(calm.ratePerSec, 9);
    expect(calm.ratePerSec).toBeCloseTo(50 / 60, 6);
    for (const b of calm.burstsBySpan ?? []) expect(b.ratePerSec).toBeCloseTo(calm.ratePerSec, 9);

    // One-minute spikes of 400 every ten minutes over a level of 50.
    const spiky = series(10 * DAY, (i) => (i > nowMin - 60 && i % 10 === 0 ? 400 : 50));
    const f = forecastArrivals({ series: upTo(spiky, nowMin), now: T0 + nowMin * MIN, horizonS: 300 });
    const bursts = f.burstsBySpan ?? [];
    expect(bursts.map((b) => b.spanS)).toEqual([60, 120, 240, 300]); // 1, 2, 4 minutes, then the horizon
    // A one-minute burst is the spike itself (400 against a mean of 85 a minute) ...
    expect(bursts[0]?.ratePerSec).toBeGreaterThan(3 * f.ratePerSec);
    // ... averaged over the 5-minute horizon it is one spike in five minutes: (400 + 4 × 50) / 5 = 120.
    expect(f.burstRatePerSec).toBe(bursts[3]?.ratePerSec);
    expect(f.burstRatePerSec / f.ratePerSec).toBeCloseTo(120 / 85, 1);
    expect(f.components.peakToMean).toBeCloseTo(120 / 85, 1);
    for (let i = 1; i < bursts.length; i++) expect(bursts[i]?.ratePerSec).toBeLessThanOrEqual(bursts[i - 1]?.ratePerSec ?? 0);
  });

  it('averages the level over at least two minutes: a one-minute spike moves a short horizon by under a third of it', () => {
    // 60 a minute for two hours, then one minute of 120; a cold start plus a tick ahead (125 s).
    const nowMin = 121;
    const f = forecastArrivals({
      series: upTo(
        series(nowMin, (i) => (i === nowMin - 1 ? 120 : 60)),
        nowMin,
      ),
      now: T0 + nowMin * MIN,
      horizonS: 125,
    });
    // Half-life 2 minutes: the newest minute weighs 1 − 2^(−1/2) ≈ 0.29 of the level (77.6); with
    // the old one-minute floor it weighed half (90).
    expect(f.ratePerSec * 60).toBeCloseTo(60 + 60 * (1 - 2 ** -0.5), 0);
  });

  it('falls back to reactive (the recent level) with less than a day of history', () => {
    const rate = (i: number) => (i < 600 ? 20 : 80);
    const nowMin = 20 * 60;
    const f = forecastArrivals({ series: upTo(series(nowMin, rate), nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    expect(f.method).toBe('reactive');
    expect(f.ratePerSec * 60).toBeCloseTo(80, 6);
    expect(f.components.analogues).toBe(0);

    const longer = 27 * 60;
    const g = forecastArrivals({ series: upTo(series(longer, sine), longer), now: T0 + longer * MIN, horizonS: HOUR_S });
    expect(g.method).toBe('seasonal');
  });

  it('forecasts zero from an empty history, and reactive from a series that starts after now', () => {
    const empty = forecastArrivals({ series: { startMs: T0, perMinute: [0] }, now: T0 + 30_000, horizonS: 60 });
    expect(empty).toMatchObject({ method: 'reactive', ratePerSec: 0, burstRatePerSec: 0 });
    const future = forecastArrivals({ series: { startMs: T0, perMinute: [5, 5, 5] }, now: T0 - 10 * MIN, horizonS: 60 });
    expect(future.ratePerSec).toBe(0);
  });

  it('skips a masked outage in the history instead of reading it as no demand', () => {
    const nowMin = 13 * DAY + 9 * 60;
    // The server was down from four days ago until three hours past yesterday's matching hour.
    const outage = (i: number) => i >= nowMin - 4 * DAY - 180 && i < nowMin - DAY + 180;
    const recorded = upTo(
      series(nowMin, (i) => (outage(i) ? 0 : sine(i))),
      nowMin,
    );
    const missing = recorded.perMinute.map((_, i) => outage(i));
    const truth = meanOver(sine, nowMin, 60);
    const masked = forecastArrivals({ series: recorded, now: T0 + nowMin * MIN, horizonS: HOUR_S, options: { missing } });
    const unmasked = forecastArrivals({ series: recorded, now: T0 + nowMin * MIN, horizonS: HOUR_S });
    const error = (f: { ratePerSec: number }) => Math.abs(f.ratePerSec * 60 - truth) / truth;
    expect(error(masked)).toBeLessThan(0.005);
    expect(masked.components.analogues).toBeLessThan(unmasked.components.analogues ?? 0);
    expect(error(unmasked)).toBeGreaterThan(0.02); // read as no demand, the outage drags the forecast down
  });

  it('uses the seasonal profile when the recent window itself was an outage', () => {
    const nowMin = 13 * DAY + 9 * 60;
    const missing = Array.from({ length: nowMin + 1 }, (_, i) => i >= nowMin - 240);
    const recorded = series(nowMin, (i) => (missing[i] ? 0 : sine(i)));
    const f = forecastArrivals({ series: upTo(recorded, nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S, options: { missing } });
    const truth = meanOver(sine, nowMin, 60);
    expect(f.method).toBe('seasonal');
    expect(f.components.profilePerMin).toBeDefined();
    expect(Math.abs(f.ratePerSec * 60 - truth)).toBeLessThan(0.05 * truth);
  });

  it('does not read the partial current minute, or a series that ends early, as a drop', () => {
    const history = series(14 * DAY, sine);
    const nowMin = 13 * DAY + 7 * 60;
    const atStart = forecastArrivals({ series: upTo(history, nowMin, 0), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    for (const seconds of [1, 30, 59]) {
      const partial = Math.round((sine(nowMin) * seconds) / 60);
      const mid = forecastArrivals({ series: upTo(history, nowMin, partial), now: T0 + nowMin * MIN + seconds * 1000, horizonS: HOUR_S });
      expect(mid.ratePerSec).toBe(atStart.ratePerSec);
    }
    // The series stops three minutes before now (a slow reader): unknown minutes, not zeros.
    const early = { startMs: T0, perMinute: history.perMinute.slice(0, nowMin - 3) };
    const f = forecastArrivals({ series: early, now: T0 + nowMin * MIN, horizonS: HOUR_S });
    expect(Math.abs(f.ratePerSec - atStart.ratePerSec)).toBeLessThan(0.02 * atStart.ratePerSec);
  });

  it('ignores entries after now (a clock that went back)', () => {
    const history = series(14 * DAY, sine);
    const nowMin = 12 * DAY + 5 * 60;
    const exact = forecastArrivals({ series: upTo(history, nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    const withFuture = forecastArrivals({ series: history, now: T0 + nowMin * MIN, horizonS: HOUR_S });
    expect(withFuture).toEqual(exact);
  });

  it('is robust to one odd day in the history', () => {
    const nowMin = 13 * DAY + 10 * 60;
    const odd = (i: number) => i >= nowMin - 2 * DAY && i < nowMin - 2 * DAY + 60;
    const history = series(nowMin, (i) => (odd(i) ? 20 * sine(i) : sine(i)));
    const f = forecastArrivals({ series: upTo(history, nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    const truth = meanOver(sine, nowMin, 60);
    expect(Math.abs(f.ratePerSec * 60 - truth)).toBeLessThan(0.02 * truth);
  });

  it('anticipates a weekday morning ramp on Monday although the weekend had none', () => {
    const weekday = (i: number) => Math.floor(i / DAY) % 7 < 5;
    const rate = (i: number) => (weekday(i) && i % DAY >= 9 * 60 && i % DAY < 17 * 60 ? 300 : 60);
    const nowMin = 28 * DAY + 8 * 60 + 45; // Monday of week 5, 08:45
    const f = forecastArrivals({ series: upTo(series(nowMin, rate), nowMin), now: T0 + nowMin * MIN, horizonS: HOUR_S });
    const truth = meanOver(rate, nowMin, 60); // 15 minutes at 60, 45 at 300
    expect(truth).toBe(240);
    expect(f.method).toBe('seasonal');
    expect(f.ratePerSec * 60).toBeGreaterThan(0.8 * truth);
    expect(f.ratePerSec * 60).toBeLessThan(1.2 * truth);
  });

  it('reports its inputs and keeps burst ≥ rate', () => {
    const nowMin = 9 * DAY + 123;
    const f = forecastArrivals({ series: upTo(series(nowMin, sine), nowMin), now: T0 + nowMin * MIN + 17_000, horizonS: 240 });
    expect(f.horizonS).toBe(240);
    expect(f.burstRatePerSec).toBeGreaterThanOrEqual(f.ratePerSec);
    expect(Object.keys(f.components)).toEqual(
      expect.arrayContaining(['recentLevelPerMin', 'seasonalGrowth', 'rawGrowth', 'growthTrust', 'analogues', 'peakToMean']),
    );
  });
});

describe('forecastArrivals: upper quantile and dispersion', () => {
  // Seeded Poisson counts around a level: the noise the queueing model absorbs, not rate uncertainty.
  function poissonSeries(minutes: number, level: (i: number) => number, seed = 7): ArrivalSeries {
    let state = seed;
    const random = () => {
      state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
      return state / 2 ** 32;
    };
    const draw = (mean: number) => {
      let k = 0;
      for (let p = random(), limit = Math.exp(-mean); p > limit; p *= random()) k++;
      return k;
    };
    return series(minutes, (i) => draw(level(i)));
  }

  it('a steady Poisson level: dispersion near 1 and an upper quantile near the rate', () => {
    const s = poissonSeries(600, () => 30);
    const f = forecastArrivals({ series: upTo(s, 600), now: T0 + 600 * MIN, horizonS: 180 });
    expect(f.upperQuantile).toBe(0.9);
    expect(f.dispersion).toBeGreaterThan(0.7);
    expect(f.dispersion).toBeLessThan(1.4);
    expect(f.upperRatePerSec).toBeGreaterThanOrEqual(f.ratePerSec);
    // What is left is the level's own noise (a one-minute half-life reads few arrivals): ≈ 10 %.
    expect((f.upperRatePerSec ?? 0) / f.ratePerSec).toBeLessThan(1.2);
  });

  it('a level that wanders widens the upper quantile; too little history leaves it at the rate', () => {
    // The level jumps between 15 and 45 every 7 minutes: a forecast a horizon ahead is often wrong.
    const s = poissonSeries(600, (i) => (Math.floor(i / 7) % 2 === 0 ? 15 : 45));
    const f = forecastArrivals({ series: upTo(s, 600), now: T0 + 600 * MIN, horizonS: 180 });
    expect((f.upperRatePerSec ?? 0) / f.ratePerSec).toBeGreaterThan(1.3);
    expect(f.dispersion).toBeGreaterThan(2);
    const young = forecastArrivals({ series: upTo(s, 20), now: T0 + 20 * MIN, horizonS: 180 });
    expect(young.upperRatePerSec).toBe(young.ratePerSec);
    expect(young.components.errors).toBeLessThan(30);
  });
});
