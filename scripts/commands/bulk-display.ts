/**
 * Where `warmpool bulk run` shows progress. On a terminal: one bar line redrawn in place (at most
 * a few times a second). Elsewhere (a log file, CI): a plain line at once, then one every
 * `lineIntervalMs`, so logs stay readable. Notes (e.g. "watching") go on a line of their own, and
 * so do log lines (bulk-log.ts), on stderr: the bar is cleared first and redrawn at the next update.
 */
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import { formatProgressBar, formatProgressLine } from './bulk-progress.ts';

/** The terminal (or a test's capture) the CLI writes to, and its Ctrl-C. */
export interface BulkIo {
  out(text: string): void;
  err(text: string): void;
  isTTY: boolean;
  columns(): number;
  now(): number;
  /** Calls `handler` on Ctrl-C (SIGINT) until the returned function is called. */
  onInterrupt(handler: () => void): () => void;
}

export function processBulkIo(): BulkIo {
  return {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    isTTY: process.stdout.isTTY === true,
    columns: () => process.stdout.columns ?? 80,
    now: () => Date.now(),
    onInterrupt(handler) {
      process.on('SIGINT', handler);
      return () => process.off('SIGINT', handler);
    },
  };
}

export interface BulkDisplay {
  update(run: BulkRunView): void;
  note(text: string): void;
  /** A log line: on stderr, on a line of its own. */
  log(text: string): void;
  /** Ends the bar's line; idempotent. */
  close(): void;
}

export function createBulkDisplay(io: BulkIo, options: { lineIntervalMs?: number; redrawMs?: number } = {}): BulkDisplay {
  const lineIntervalMs = options.lineIntervalMs ?? 5_000;
  const redrawMs = options.redrawMs ?? 100;
  let lastAt = Number.NEGATIVE_INFINITY;
  let barShown = false;
  let lastLine = '';

  const clearBar = () => {
    if (barShown) io.out('\r\x1b[2K');
    barShown = false;
  };

  return {
    update(run) {
      const now = io.now();
      const ended = run.status !== 'running';
      if (io.isTTY) {
        if (!ended && now - lastAt < redrawMs) return;
        io.out(`\r\x1b[2K${formatProgressBar(run, io.columns(), now)}`);
        barShown = true;
      } else {
        const line = formatProgressLine(run, now);
        // A line at the start, every interval, and the final state; never the same line twice in a row.
        if (line === lastLine || (!ended && now - lastAt < lineIntervalMs)) return;
        io.out(`${line}\n`);
        lastLine = line;
      }
      lastAt = now;
    },
    note(text) {
      clearBar();
      io.out(`${text}\n`);
    },
    log(text) {
      clearBar();
      io.err(`${text}\n`);
    },
    close() {
      if (barShown) io.out('\n');
      barShown = false;
    },
  };
}
