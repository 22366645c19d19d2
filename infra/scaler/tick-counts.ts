/**
 * What arrived (or finished) between two controller ticks, read off the per-minute counters of
 * the arrival history (infra/telemetry/arrival-history.ts), whose last minute is still running:
 * each tick leaves a mark (its minute and that minute's count so far), and the next one sums the
 * minutes from the marked one on, less the marked count. The policy's closed-loop SLO control
 * (slo-control.ts) reads these counts at the SLO's time scale, which the minute series hides.
 * Pure; the controller keeps the marks in memory (a restart loses one tick's count, no more).
 */

import type { ArrivalSeries } from '../contracts/pool.ts';

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
