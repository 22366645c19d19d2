/**
 * The progress line of a long `warmpool simulate` — every mode: one replay with its baselines'
 * searches, --sweep, --walk-forward, --matrix, --bank (issue 29: it printed nothing for 96 s on
 * the README's NASA command, minutes for a matrix):
 *
 *   simulate: 17/40 replays (42%), 1m05s, ETA 1m28s
 *
 * redrawn in place on stderr when stderr is a terminal, at most every `redrawMs`, and cleared
 * when the run ends, so the table on stdout follows on a clean line. Anywhere else (a log, CI,
 * a pipe, a test) it draws nothing: what a reader of stderr gets is unchanged. Lines the run
 * prints meanwhile (the matrix's and the bank's line per cell) go above it, through `note`.
 *
 * The counts come from the simulator (infra/simulator replay-counter.ts): planned up front,
 * each replay counted as its result comes back from its thread. Where a search may stop early
 * the plan is its most, given back as the search ends, so the ETA (time per replay so far × the
 * replays left) errs long and shortens as searches settle. Durations and counts are written as
 * `warmpool bulk run`'s progress writes them (bulk-progress.ts).
 */

import { formatCount, formatDuration } from '../../infra/kernel/format-figures.ts';
import type { ReplayCounter } from '../../infra/simulator/index.ts';
import type { SimulateOut } from './simulate-out.ts';

/** Where the line goes, and the clock its ETA reads. */
export interface ProgressIo {
  write(text: string): void;
  isTTY: boolean;
  columns(): number;
  now(): number;
}

export interface ProgressCounts {
  done: number;
  planned: number;
  elapsedMs: number;
}

/** Seconds left at the pace so far; undefined before the first unit is done. */
export function etaSeconds(c: ProgressCounts): number | undefined {
  if (c.done <= 0) return undefined;
  return (Math.max(0, c.planned - c.done) * c.elapsedMs) / c.done / 1000;
}

/** `simulate: 17/40 replays (42%), 1m05s, ETA 1m28s`; `ETA ?` until something is done. */
export function formatProgress(unit: string, c: ProgressCounts): string {
  const planned = Math.max(c.planned, c.done);
  const share = planned > 0 ? ` (${Math.floor((c.done / planned) * 100)}%)` : '';
  const eta = etaSeconds(c);
  return `simulate: ${formatCount(c.done)}/${formatCount(planned)} ${unit}${share}, ${formatDuration(c.elapsedMs / 1000)}, ETA ${eta === undefined ? '?' : formatDuration(eta)}`;
}

export interface SimulateProgress extends ReplayCounter {
  /** A line of the run's own (it ends in a newline), printed above the progress line. */
  note(text: string): void;
  /** Clears the line; idempotent. */
  close(): void;
}

const CLEAR = '\r\x1b[2K';

export function createProgress(io: ProgressIo, unit: string, options: { redrawMs?: number } = {}): SimulateProgress {
  const redrawMs = options.redrawMs ?? 250;
  const startedAt = io.now();
  let done = 0;
  let planned = 0;
  let shown = false;
  let drawnAt = Number.NEGATIVE_INFINITY;
  const draw = (force: boolean) => {
    if (!io.isTTY) return;
    const now = io.now();
    // The last replay is always shown: a run that ends in a burst still reads as complete.
    if (!force && done < planned && now - drawnAt < redrawMs) return;
    const line = formatProgress(unit, { done, planned, elapsedMs: now - startedAt });
    const width = Math.max(20, io.columns() - 1);
    io.write(`${CLEAR}${line.length > width ? `${line.slice(0, width - 1)}…` : line}`);
    shown = true;
    drawnAt = now;
  };
  const clear = () => {
    if (shown) io.write(CLEAR);
    shown = false;
  };
  return {
    plan(replays) {
      planned += replays;
      draw(false);
    },
    done(replays = 1) {
      done += replays;
      draw(false);
    },
    note(text) {
      clear();
      io.write(text);
      draw(true);
    },
    close: clear,
  };
}

/**
 * Runs `work` with a progress line of `planned` units on `out`'s stderr (drawn only where that is
 * a terminal), cleared when it settles, whichever way.
 */
export async function withProgress<T>(
  out: SimulateOut,
  unit: string,
  planned: number,
  work: (progress: SimulateProgress) => Promise<T>,
): Promise<T> {
  const io = { write: out.err, isTTY: out.errIsTTY === true, columns: () => process.stderr.columns || 80, now: () => Date.now() };
  const progress = createProgress(io, unit);
  progress.plan(planned);
  try {
    return await work(progress);
  } finally {
    progress.close();
  }
}
