/**
 * What arrived (or finished) between two controller ticks, read off the per-minute counters of
 * the arrival history (infra/telemetry/arrival-history.ts), whose last minute is still running:
 * each tick leaves a mark (its minute and that minute's count so far), and the next one sums the
 * minutes from the marked one on, less the marked count. The policy's closed-loop SLO control
 * (slo-control.ts) reads these counts at the SLO's time scale, which the minute series hides.
 * Pure; the controller keeps the marks in memory (a restart loses one tick's count, no more).
 */

import type { ArrivalSeries, PolicyInput } from '../contracts/pool.ts';

const MINUTE_MS = 60_000;

export interface CountMark {
  at: number;
  /** Start of the minute the mark was taken in, and that minute's count then. */
  minuteMs: number;
  count: number;
}

/**
 * Rows counted since `prev` in `series` (which must reach the minute containing `now`), and the
 * mark for the next tick. `rows` is absent on the first tick, when the clock went back, or when
 * the marked minute is outside the series.
 */
export function countSince(prev: CountMark | undefined, series: ArrivalSeries, now: number): { rows?: number; mark: CountMark } {
  const last = series.perMinute.length - 1;
  const minuteMs = series.startMs + Math.max(0, last) * MINUTE_MS;
  const mark = { at: now, minuteMs, count: last >= 0 ? (series.perMinute[last] ?? 0) : 0 };
  if (!prev || prev.at >= now || prev.minuteMs < series.startMs || prev.minuteMs > minuteMs) return { mark };
  let rows = 0;
  for (let i = (prev.minuteMs - series.startMs) / MINUTE_MS; i <= last; i++) rows += series.perMinute[i] ?? 0;
  return { rows: Math.max(0, rows - prev.count), mark };
}

/** The per-minute series the counts are read from (infra/telemetry/arrival-history.ts). */
export interface CountedHistory {
  /** Finished rows per minute: with arrivals, what arrived and was served each tick. */
  completions?(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
  /** Finished rows that had waited past the workers' SLO, per minute. */
  late?(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries>;
}

/**
 * Per model, rows arrived and served since its last tick, and of those served the late ones when
 * `countsLate` (the workers count them against this model's SLO); absent on its first tick.
 * The marks live in the returned closure (a controller's memory).
 */
export function createTickCounts(history: CountedHistory) {
  const marks = new Map<string, { arrived: CountMark; served?: CountMark; late?: CountMark }>();
  return async (model: string, arrivals: ArrivalSeries, now: number, countsLate: boolean): Promise<PolicyInput['observed']> => {
    const prev = marks.get(model);
    const arrived = countSince(prev?.arrived, arrivals, now);
    const from = prev?.served?.minuteMs ?? now;
    const served = history.completions ? countSince(prev?.served, await history.completions(model, from, now), now) : undefined;
    const lateFrom = prev?.late?.minuteMs ?? now;
    const late = countsLate && history.late ? countSince(prev?.late, await history.late(model, lateFrom, now), now) : undefined;
    marks.set(model, { arrived: arrived.mark, ...(served ? { served: served.mark } : {}), ...(late ? { late: late.mark } : {}) });
    if (!prev || arrived.rows === undefined || served?.rows === undefined) return undefined;
    return {
      arrivedRows: arrived.rows,
      servedRows: served.rows,
      ...(late?.rows !== undefined ? { lateRows: late.rows } : {}),
      sinceMs: now - prev.arrived.at,
    };
  };
}
