/**
 * The forecaster on the shared real traces (../shared/traces, beside the clone), walked forward
 * with no look-ahead: at every step it sees only the 28 days before now, and its forecast of the
 * next window's mean rate is scored against what happened, side by side with two naive
 * forecasts: "same as now" (the last window's mean) and "same time yesterday".
 *
 * Score: WAPE = Σ|forecast − actual| / Σ actual over all steps. MAPE divides each hour by its own
 * actual: the ServeGen small trace has hours with no arrivals at all (MAPE undefined) and quiet
 * nights would weigh as much as the peaks capacity is sized for. WAPE is the mean absolute error
 * as a share of the mean rate: scale-free across traces, never divides by ~0, and weighs an
 * error by the traffic it affects. sMAPE is printed beside it for reference.
 *
 * Steps where the actual, the last window or yesterday's window has a missing minute (the NASA
 * outage and its month gap) are skipped for every method alike; the forecaster still has to
 * cope with masked minutes elsewhere in its history.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { parseTime, parseTrace, readTraceFile, type Trace } from '../infra/simulator/trace.ts';

const TRACES = fileURLToPath(new URL('../../shared/traces/', import.meta.url));
const present = existsSync(TRACES);
if (!present) console.warn(`forecast-traces: skipped, the shared traces folder ${TRACES} is absent`);

const MIN = 60_000;
const DAY = 1440;

interface Score {
  trace: string;
  horizonMin: number;
  steps: number;
  methods: Set<string>;
  wape: { forecaster: number; sameAsNow: number; yesterday: number };
  smape: { forecaster: number; sameAsNow: number; yesterday: number };
}

interface Walk {
  horizonMin: number;
  stepMin: number;
  /** First step: minutes of history before the first forecast. */
  warmupMin: number;
  /** Offset of `now` into its minute; the minute containing it is passed partly counted. */
  nowOffsetS: number;
  /** Minutes at each end of the trace that are not whole (a per-request trace's first and last). */
  trimMin?: number;
  /** Score "same time yesterday" too (only steps where it exists are scored). */
  withYesterday: boolean;
}

function windowMean(trace: Trace, from: number, minutes: number): number | undefined {
  const { perMinute } = trace.series;
  let sum = 0;
  for (let i = from; i < from + minutes; i++) {
    if (i < 0 || i >= perMinute.length || trace.missing[i]) return undefined;
    sum += perMinute[i] as number;
  }
  return sum / minutes;
}

function walkForward(name: string, trace: Trace, walk: Walk): Score {
  const { perMinute, startMs } = trace.series;
  const H = walk.horizonMin;
  const end = perMinute.length - (walk.trimMin ?? 0);
  const rows = { forecaster: [] as number[], sameAsNow: [] as number[], yesterday: [] as number[], actual: [] as number[] };
  const methods = new Set<string>();
  for (let n = walk.warmupMin; n + H <= end; n += walk.stepMin) {
    const actual = windowMean(trace, n, H);
    const sameAsNow = windowMean(trace, n - H, H);
    const yesterday = windowMean(trace, n - DAY, H);
    if (actual === undefined || sameAsNow === undefined || (yesterday === undefined && walk.withYesterday)) continue;
    // What the API would hand over at `now`: the last 28 days and the minute in progress, counted so far.
    const from = Math.max(walk.trimMin ?? 0, n - 28 * DAY);
    const partial = Math.floor(((perMinute[n] as number) * walk.nowOffsetS) / 60);
    const forecast = forecastArrivals({
      series: { startMs: startMs + from * MIN, perMinute: [...perMinute.slice(from, n), partial] },
      now: startMs + n * MIN + walk.nowOffsetS * 1000,
      horizonS: H * 60,
      options: { missing: trace.missing.slice(from, n + 1) },
    });
    methods.add(forecast.method);
    rows.forecaster.push(forecast.ratePerSec * 60);
    rows.sameAsNow.push(sameAsNow);
    rows.yesterday.push(yesterday ?? Number.NaN);
    rows.actual.push(actual);
  }
  const total = rows.actual.reduce((a, b) => a + b, 0);
  const wape = (f: number[]) => f.reduce((t, v, i) => t + Math.abs(v - (rows.actual[i] as number)), 0) / total;
  const smape = (f: number[]) =>
    f.reduce((t, v, i) => {
      const a = rows.actual[i] as number;
      return t + (v + a === 0 ? 0 : (2 * Math.abs(v - a)) / (v + a));
    }, 0) / f.length;
  const score = (fn: (f: number[]) => number) => ({
    forecaster: fn(rows.forecaster),
    sameAsNow: fn(rows.sameAsNow),
    yesterday: fn(rows.yesterday),
  });
  return { trace: name, horizonMin: H, steps: rows.actual.length, methods, wape: score(wape), smape: score(smape) };
}

function printTable(scores: Score[]): void {
  const pct = (x: number) => (Number.isNaN(x) ? '—' : `${(100 * x).toFixed(1)}%`);
  const lines = [
    'trace                                   horizon  steps  method    | WAPE: forecaster  same-as-now  yesterday | sMAPE: forecaster  same-as-now  yesterday',
  ];
  for (const s of scores) {
    lines.push(
      `${s.trace.padEnd(40)}${`${s.horizonMin} min`.padStart(7)}${String(s.steps).padStart(7)}  ${[...s.methods].join('+').padEnd(9)} | ` +
        `${pct(s.wape.forecaster).padStart(16)}${pct(s.wape.sameAsNow).padStart(13)}${pct(s.wape.yesterday).padStart(11)} | ` +
        `${pct(s.smape.forecaster).padStart(17)}${pct(s.smape.sameAsNow).padStart(13)}${pct(s.smape.yesterday).padStart(11)}`,
    );
  }
  console.log(`one-window-ahead forecast error, walked forward over the shared traces\n${lines.join('\n')}`);
}

const DAILY = ['nasa_http_1995_per_minute.csv', 'servegen_language_m-small_10min.csv', 'servegen_language_m-large_10min.csv'];

describe.skipIf(!present)(`forecaster on the shared traces (${TRACES})`, () => {
  it('beats "same as now" and "same time yesterday" one hour ahead on every trace with a daily cycle', () => {
    // Every hour after the first 7 days, forecasting the next hour from 30 s into the hour.
    const scores = DAILY.map((name) =>
      walkForward(name, readTraceFile(`${TRACES}${name}`), {
        horizonMin: 60,
        stepMin: 60,
        warmupMin: 7 * DAY,
        nowOffsetS: 30,
        withYesterday: true,
      }),
    );
    printTable(scores);
    for (const s of scores) {
      expect(s.steps, s.trace).toBeGreaterThan(100);
      expect([...s.methods], s.trace).toEqual(['seasonal']);
      expect(s.wape.forecaster, s.trace).toBeLessThan(s.wape.sameAsNow);
      expect(s.wape.forecaster, s.trace).toBeLessThan(s.wape.yesterday);
      expect(s.smape.forecaster, s.trace).toBeLessThan(s.smape.sameAsNow);
      expect(s.smape.forecaster, s.trace).toBeLessThan(s.smape.yesterday);
    }
  });

  it('falls back to reactive on the one-hour Azure trace and is no worse than "same as now"', () => {
    // One hour, no daily cycle: forecast a cold start's lead time (5 and 15 min) every minute
    // after the first 15. The first and last minutes are partial (the trace starts at 18:15:46).
    const trace = readTraceFile(`${TRACES}azure_llm_2023_conv.csv`);
    const scores = [5, 15].map((horizonMin) =>
      walkForward('azure_llm_2023_conv.csv', trace, {
        horizonMin,
        stepMin: 1,
        warmupMin: 16,
        nowOffsetS: 20,
        trimMin: 1,
        withYesterday: false,
      }),
    );
    printTable(scores);
    for (const s of scores) {
      expect(s.steps).toBeGreaterThan(20);
      expect([...s.methods]).toEqual(['reactive']);
      // Both are estimates of the recent level from the same minutes, and a 5-minute mean of a
      // bursty trace is already a fair one: the EWMA must not lose more than a tenth on it.
      expect(s.wape.forecaster).toBeLessThan(1.1 * s.wape.sameAsNow);
    }
  });
});

describe('trace reader', () => {
  const T = Date.parse('2024-01-01T00:00:00Z');

  it('reads ISO-8601 in its common spellings and epoch seconds, zone-less as UTC', () => {
    expect(parseTime('2024-01-01T00:00:00')).toBe(T);
    expect(parseTime('2024-01-01 00:00:01.5000000')).toBe(T + 1500);
    expect(parseTime('2024-01-01T02:00:00+02:00')).toBe(T);
    expect(parseTime('2023-12-31T19:00:00-0500')).toBe(T);
    expect(parseTime(String(T / 1000 + 0.25))).toBe(T + 250);
    expect(parseTime('yesterday')).toBeUndefined();
  });

  it('counts one row per request per minute, empty minutes as 0', () => {
    const csv = 'ts,tokens\n2024-01-01 00:00:59,1\n2024-01-01 00:00:01,1\n2024-01-01 00:03:00,1\n';
    expect(parseTrace(csv)).toEqual({ series: { startMs: T, perMinute: [2, 0, 0, 1] }, missing: [false, false, false, false], rows: 3 });
  });

  it('spreads counted bins over their minutes and marks holes and outages missing', () => {
    const csv = ['minute,requests,outage', '2024-01-01T00:00:00,10,0', '2024-01-01T00:01:00,0,1', '2024-01-01T00:03:00,7,0'].join('\n');
    const trace = parseTrace(csv);
    expect(trace.series.perMinute).toEqual([10, 0, 0, 7]);
    expect(trace.missing).toEqual([false, true, true, false]);

    const rates = parseTrace('window_start_s,total_rate_rps\n0,2\n600,0.5\n');
    expect(rates.series.perMinute).toEqual([...Array(10).fill(120), ...Array(10).fill(30)]);
    expect(rates.missing.some(Boolean)).toBe(false);
  });

  it('names the line and the column it cannot read', () => {
    expect(() => parseTrace('t\n2024-01-01\nsoon\n')).toThrow(/line 3: cannot read time "soon"/);
    expect(() => parseTrace('t,n\n0,1\n', { countColumn: 'count' })).toThrow(InvalidInputError);
    expect(() => parseTrace('t,count\n0,-1\n')).toThrow(/line 2: bad count/);
  });

  it.skipIf(!present)('reads the shared traces with their outage mask and bin widths', () => {
    const nasa = readTraceFile(`${TRACES}nasa_http_1995_per_minute.csv`);
    const at = (iso: string) => nasa.missing[(Date.parse(`${iso}Z`) - nasa.series.startMs) / MIN];
    expect([at('1995-08-01T14:51:00'), at('1995-08-01T14:52:00'), at('1995-08-03T04:36:00'), at('1995-08-03T04:37:00')]).toEqual([
      false,
      true,
      true,
      false,
    ]);
    expect(at('1995-07-30T12:00:00')).toBe(true); // no rows: not in the trace
    const small = readTraceFile(`${TRACES}servegen_language_m-small_10min.csv`);
    expect(small.series.perMinute).toHaveLength(14 * DAY);
    expect(small.series.perMinute[0]).toBeCloseTo(809.7617 * 60, 6);
  });
});
