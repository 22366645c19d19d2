/**
 * Progress arithmetic of a run (pure; the driver passes the clock's `now`): rows/s over a recent
 * window, rows total estimated from bytes read until the inputs were read to the end, ETA,
 * whether a deadline will be met, and the rate a late run needs to make it.
 *
 * While a run runs, the rate counts rows whose parts were written during this window only, so a
 * resumed run's earlier parts do not inflate it, and a stall shows as a falling rate within one
 * window. Once it ended, the window says nothing about the run (the last drive's last minute: a
 * resume that counts at once the parts workers finished meanwhile read as 10× the real rate):
 * a finished run's rate is `runRowsPerSecond`, its rows over its whole life.
 */
import type { BulkProgress } from '../contracts/bulk.ts';

export const DEFAULT_RATE_WINDOW_MS = 60_000;

interface Sample {
  at: number;
  rowsDone: number;
}

/** Rows done over time; rows/s over the last `windowMs` (from the sample in force at its start). */
export class RateWindow {
  private samples: Sample[] = [];

  constructor(private readonly windowMs = DEFAULT_RATE_WINDOW_MS) {}

  add(at: number, rowsDone: number): void {
    // The clock went back: what came before no longer measures anything.
    const last = this.samples.at(-1);
    if (last && at < last.at) this.samples = [];
    this.samples.push({ at, rowsDone });
    const start = at - this.windowMs;
    let first = 0;
    this.samples.forEach((s, i) => {
      if (s.at <= start) first = i;
    });
    this.samples = this.samples.slice(first);
  }

  rowsPerSecond(): number {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (!first || !last || last.at <= first.at) return 0;
    return Math.max(0, (last.rowsDone - first.rowsDone) / ((last.at - first.at) / 1000));
  }
}

/**
 * Rows total so far: exact once every chunk was counted, else the rows counted plus the bytes
 * left at the rows per byte seen so far (before any chunk was counted, `rowsPerByte`: the plan's
 * estimate from the objects' heads).
 */
export function estimateRowsTotal(input: {
  rowsSeen: number;
  bytesSeen: number;
  bytesTotal: number;
  exact: boolean;
  rowsPerByte?: number;
}): number {
  const { rowsSeen, bytesSeen, bytesTotal, exact } = input;
  if (exact) return rowsSeen;
  const rate = bytesSeen > 0 ? rowsSeen / bytesSeen : (input.rowsPerByte ?? 0);
  return Math.max(rowsSeen, Math.round(rowsSeen + Math.max(0, bytesTotal - bytesSeen) * rate));
}

/** The counts a progress view is computed from: the view's own fields, less what is derived here. */
export type ProgressInput = Omit<BulkProgress, 'etaSeconds' | 'etaAt' | 'onTrack'> & { now: number; deadline?: number };

export function computeProgress(input: ProgressInput): BulkProgress {
  const rowsLeft = Math.max(0, input.rowsTotal - input.rowsDone);
  const progress: BulkProgress = {
    rowsDone: input.rowsDone,
    rowsTotal: Math.max(input.rowsTotal, input.rowsDone),
    rowsTotalExact: input.rowsTotalExact,
    chunksDone: input.chunksDone,
    badRows: input.badRows,
    rowsPerSecond: round(input.rowsPerSecond),
  };
  if (input.chunksTotal !== undefined) progress.chunksTotal = input.chunksTotal;
  const finished = input.rowsTotalExact && rowsLeft === 0;
  if (finished || input.rowsPerSecond > 0) {
    const etaSeconds = finished ? 0 : rowsLeft / input.rowsPerSecond;
    progress.etaSeconds = Math.ceil(etaSeconds);
    progress.etaAt = Math.round(input.now + etaSeconds * 1000);
  }
  if (input.deadline !== undefined) {
    // Before there is a rate, a run is on track until its deadline has passed with rows left.
    progress.onTrack = progress.etaAt !== undefined ? progress.etaAt <= input.deadline : input.now <= input.deadline || finished;
  }
  return progress;
}

/** Rows/s the run needs from now on to finish by its deadline (past it: all that is left, within a second). */
export function rowsPerSecondNeeded(progress: BulkProgress, now: number, deadline: number): number {
  const rowsLeft = Math.max(0, progress.rowsTotal - progress.rowsDone);
  const secondsLeft = Math.max(1, (deadline - now) / 1000);
  return rowsLeft / secondsLeft;
}

/**
 * A finished run's rows/s: its rows over its whole life, from its first drive's start to its end,
 * to 0.1. The one figure its manifest (`timings.rowsPerSecond`), its view (API, end webhook) and
 * the CLI's summary all show.
 */
export function runRowsPerSecond(rows: number, startedAt: number, finishedAt: number): number {
  const durationMs = finishedAt - startedAt;
  return durationMs > 0 ? round((rows / durationMs) * 1000) : 0;
}

const round = (x: number) => Math.round(x * 10) / 10;
