import { describe, expect, it } from 'vitest';
import { BANK_FAMILIES, type BankFamily, type BankWorld, generateBank, generateWorld } from './world-bank.ts';

const DAY_MIN = 1440;
const DAY_MS = 86_400_000;
const MONDAY = Date.UTC(2026, 0, 5);
const SEED = 11;
/** Ten worlds of each family, a day each. */
const bank = generateBank(70, SEED, { days: 1 });
const ofFamily = (f: BankFamily) => bank.filter((w) => w.family === f);
/** `count` worlds of one family from the same seed (families go round by index). */
const worldsOf = (f: BankFamily, count: number, days = 1) =>
  Array.from({ length: count }, (_, k) => generateWorld(BANK_FAMILIES.indexOf(f) + BANK_FAMILIES.length * k, SEED, { days }));
const counts = (w: BankWorld) => w.trace.series.perMinute;
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1] as number;

/** Each minute less the centred hour's moving average: what a slow cycle or trend leaves. */
function residuals(xs: readonly number[]): number[] {
  const prefix = [0];
  for (const x of xs) prefix.push((prefix[prefix.length - 1] as number) + x);
  return xs.map((x, t) => {
    const from = Math.max(0, t - 30);
    const to = Math.min(xs.length, t + 31);
    return x - ((prefix[to] as number) - (prefix[from] as number)) / (to - from);
  });
}

/** Dispersion around the hour's moving average: about 1 for Poisson under any slow cycle or trend. */
function localDispersion(xs: readonly number[]): number {
  return mean(residuals(xs).map((r) => r * r)) / mean(xs);
}

function correlation(a: readonly number[], b: readonly number[]): number {
  const ma = mean(a);
  const mb = mean(b);
  let ab = 0;
  let aa = 0;
  let bb = 0;
  a.forEach((x, i) => {
    const y = (b[i] as number) - mb;
    ab += (x - ma) * y;
    aa += (x - ma) ** 2;
    bb += y * y;
  });
  return ab / Math.sqrt(aa * bb);
}

describe('a bank of worlds', () => {
  it('is the same for the same seed and differs for another', () => {
    expect(generateBank(14, 5, { days: 1 })).toEqual(generateBank(14, 5, { days: 1 }));
    const other = generateBank(14, 6, { days: 1 });
    expect(other.map((w) => w.params)).not.toEqual(generateBank(14, 5, { days: 1 }).map((w) => w.params));
    expect(other[0]?.trace.series.perMinute).not.toEqual(generateBank(1, 5, { days: 1 })[0]?.trace.series.perMinute);
  });

  it('has each world depend on its index and the seed only: a small bank is a prefix of a big one', () => {
    expect(bank.slice(0, 20)).toEqual(generateBank(20, SEED, { days: 1 }));
    expect(generateWorld(33, SEED, { days: 1 })).toEqual(bank[33]);
  });

  it('gives every family the same share, in turn, under unique names', () => {
    const fourteen = generateBank(14, 1, { days: 1 });
    for (const f of BANK_FAMILIES) expect(fourteen.filter((w) => w.family === f)).toHaveLength(2);
    expect(fourteen.map((w) => w.family).slice(0, 7)).toEqual([...BANK_FAMILIES]);
    expect(new Set(bank.map((w) => w.name)).size).toBe(bank.length);
    expect(bank.map((w) => w.name)).toEqual(bank.map((w, i) => `w${String(i).padStart(3, '0')}-${w.family}`));
  });

  it('is four days long unless told otherwise, and refuses nonsense', () => {
    const w = generateWorld(0, 1);
    expect([w.days, w.trace.series.perMinute.length]).toEqual([4, 4 * DAY_MIN]);
    expect(() => generateBank(-1, 1)).toThrow(/bank size/);
    expect(() => generateWorld(1.5, 1)).toThrow(/index/);
    expect(() => generateWorld(0, 1, { days: 0 })).toThrow(/minute/);
  });
});

describe('every world', () => {
  it('keeps its cold start, SLO, rate and service within the issue ranges', () => {
    for (const w of bank) {
      expect(w.coldStartS).toBeGreaterThanOrEqual(10);
      expect(w.coldStartS).toBeLessThanOrEqual(600);
      expect(w.sloS).toBeGreaterThanOrEqual(1);
      expect(w.sloS).toBeLessThanOrEqual(300);
      const [lo, hi] = w.family === 'sparse-heavy' ? [0.002, 0.05] : [0.05, 20];
      expect(w.params.meanRps).toBeGreaterThanOrEqual(lo);
      expect(w.params.meanRps).toBeLessThanOrEqual(hi);
      const realised = w.trace.rows / (w.days * DAY_MIN * 60);
      expect(realised / (w.params.meanRps as number)).toBeGreaterThan(0.5);
      expect(realised / (w.params.meanRps as number)).toBeLessThan(2);
      expect([1, 2, 4, 8, 16, 32]).toContain(w.maxBatch);
      expect(w.jobOverheadMs).toBeGreaterThanOrEqual(0);
      expect(w.jobOverheadMs).toBeLessThanOrEqual(20);
      if (w.params.longJobs === 1) {
        expect([w.maxBatch, w.jobOverheadMs]).toEqual([1, 0]);
        expect(1 / w.workerRps).toBeGreaterThanOrEqual(2);
        expect(1 / w.workerRps).toBeLessThanOrEqual(60.1);
        // At least about one worker at the peak minute.
        expect(w.params.workersAtPeak).toBeGreaterThan(0.99);
      } else {
        // Short jobs stay short: a full batch within 10 s (one worker may then idle at the peak).
        expect(w.maxBatch * (1 / w.workerRps + w.jobOverheadMs / 1000)).toBeLessThanOrEqual(10.01);
      }
      // At most about 200 workers at the mean.
      expect(w.params.workersAtMean).toBeLessThanOrEqual(200.1);
    }
  });

  it('carries the drawn mean to within Poisson noise, wherever the intensity was scaled to it', () => {
    for (const w of bank.filter((w) => w.family !== 'hawkes')) {
      const expected = (w.params.meanRps as number) * w.days * DAY_MIN * 60;
      // The intensity's total is the drawn mean's exactly, so the count's total is Poisson about it.
      expect(Math.abs(w.trace.rows - expected)).toBeLessThan(4 * Math.sqrt(expected));
    }
  });

  it('has whole non-negative counts, a day of minutes per day, rows their sum, nothing missing', () => {
    for (const w of bank) {
      const c = counts(w);
      expect(c).toHaveLength(w.days * DAY_MIN);
      expect(c.every((n) => Number.isInteger(n) && n >= 0)).toBe(true);
      expect(w.trace.rows).toBe(c.reduce((a, b) => a + b, 0));
      expect(w.trace.missing).toEqual(c.map(() => false));
    }
  });

  it('starts at midnight on its drawn day of the week, and spreads minutes as its family says', () => {
    for (const w of bank) {
      expect(w.trace.series.startMs).toBe(MONDAY + (w.params.startDay as number) * DAY_MS);
      const bursty = ['mmpp', 'hawkes', 'flash-crowd', 'on-off'].includes(w.family);
      if (!bursty) expect(w.pattern).toEqual({ kind: 'poisson' });
      else expect(w.pattern).toEqual({ kind: 'gamma', cv: w.params.cv });
      if (w.pattern.kind === 'gamma') expect(w.pattern.cv).toBeGreaterThanOrEqual(1);
      if (w.pattern.kind === 'gamma') expect(w.pattern.cv).toBeLessThanOrEqual(3);
    }
  });
});

describe('each family', () => {
  it('diurnal: a strong world follows the sinusoid of its drawn phase, hour by hour', () => {
    const strong = worldsOf('diurnal', 20).filter((w) => (w.params.amplitude as number) > 0.4);
    expect(strong.length).toBeGreaterThanOrEqual(5);
    for (const w of strong) {
      const hours = Array.from({ length: 24 }, (_, h) =>
        counts(w)
          .slice(h * 60, (h + 1) * 60)
          .reduce((a, b) => a + b, 0),
      );
      const phase = w.params.phase as number;
      const wave = hours.map((_, h) => Math.sin(2 * Math.PI * ((h + 0.5) / 24 - phase)));
      expect(correlation(hours, wave)).toBeGreaterThan(0.9);
    }
  });

  it('diurnal: Saturdays and Sundays, by the calendar, run at the drawn weekend factor', () => {
    const week = worldsOf('diurnal', 5, 7);
    for (const w of week) {
      const days = Array.from({ length: 7 }, (_, d) => mean(counts(w).slice(d * DAY_MIN, (d + 1) * DAY_MIN)));
      const weekend = (d: number) => [0, 6].includes(new Date(w.trace.series.startMs + d * DAY_MS).getUTCDay());
      const ratio = mean(days.filter((_, d) => weekend(d))) / mean(days.filter((_, d) => !weekend(d)));
      expect(ratio).toBeCloseTo(w.params.weekend as number, 1);
    }
  });

  it('mmpp, hawkes, flash-crowd, on-off: bursty minute to minute, where the smooth families are Poisson', () => {
    // Around the hour's moving average, not the day's mean: at hundreds of jobs a minute even a
    // ±10 % daily cycle makes a Poisson world's raw variance many times its mean.
    for (const f of ['diurnal', 'ramp', 'sparse-heavy'] as const)
      for (const w of ofFamily(f)) {
        expect(localDispersion(counts(w))).toBeLessThan(1.25);
        expect(localDispersion(counts(w))).toBeGreaterThan(0.8);
      }
    for (const f of ['mmpp', 'hawkes', 'flash-crowd', 'on-off'] as const) {
      const dispersions = ofFamily(f).map((w) => localDispersion(counts(w)));
      expect(median(dispersions)).toBeGreaterThan(2);
      // An mmpp world may spend its one day in the base state.
      expect(dispersions.filter((d) => d > 1.3).length).toBeGreaterThanOrEqual(8);
    }
  });

  it('hawkes: an excess in one minute carries into the next few, where a Poisson world forgets it', () => {
    // Autocorrelations of the residuals at lags 1–5, summed.
    const memory = (w: BankWorld) => {
      const r = residuals(counts(w));
      return [1, 2, 3, 4, 5].reduce((sum, k) => sum + correlation(r.slice(0, -k), r.slice(k)), 0);
    };
    for (const f of ['diurnal', 'ramp', 'sparse-heavy'] as const) for (const w of ofFamily(f)) expect(memory(w)).toBeLessThan(0.1);
    // Strong and short-lived excitation shows within five minutes; a long τ spreads each cluster
    // over hours, where the moving average takes it (the dispersion above shows those).
    const strong = worldsOf('hawkes', 40).filter((w) => (w.params.tauMin as number) <= 5 && (w.params.branching as number) >= 0.5);
    expect(strong.length).toBeGreaterThanOrEqual(5);
    expect(median(strong.map(memory))).toBeGreaterThan(0.3);
    expect(strong.filter((w) => memory(w) > 0.1).length).toBeGreaterThanOrEqual(strong.length - 1);
  });

  it('ramp: the last day against the first goes the way of the drawn ratio', () => {
    const ramps = worldsOf('ramp', 20, 4).filter((w) => Math.abs(Math.log(w.params.ratio as number)) > Math.log(2));
    expect(ramps.length).toBeGreaterThanOrEqual(3);
    for (const w of ramps) {
      const c = counts(w);
      const change = mean(c.slice(-DAY_MIN)) / mean(c.slice(0, DAY_MIN));
      expect(Math.sign(Math.log(change))).toBe(Math.sign(Math.log(w.params.ratio as number)));
    }
  });

  it('on-off: every off minute is empty, and many minutes are', () => {
    const worlds = ofFamily('on-off');
    const zeros = (w: BankWorld) => counts(w).filter((n) => n === 0).length / counts(w).length;
    for (const w of worlds) expect(zeros(w)).toBeGreaterThanOrEqual(1 - (w.params.duty as number) - 0.001);
    expect(median(worlds.map(zeros))).toBeGreaterThan(0.25);
  });

  it('sparse-heavy: under a job every 20 s, one long job at a time', () => {
    for (const w of ofFamily('sparse-heavy')) {
      expect(w.params.meanRps).toBeLessThan(0.05);
      expect(w.trace.rows / (DAY_MIN * 60)).toBeLessThan(0.06);
      expect([w.maxBatch, w.jobOverheadMs, w.params.longJobs]).toEqual([1, 0, 1]);
    }
  });
});
