/**
 * How `warmpool bulk run` shows a run's progress: a one-line bar redrawn in place on a terminal,
 * a plain line every few seconds otherwise (logs, CI), and a closing summary. Pure: every
 * function takes the run view (and the time, where a rate depends on it) and returns text, so
 * the formats are tested without a terminal.
 *
 * A run whose every row was bad wrote nothing: it is shown as failed whatever its status says.
 */
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import { formatCount, formatDuration, formatRate } from '../../infra/kernel/format-figures.ts';

const FULL = '█';
const EMPTY = '░';

/** `12,345`; totals estimated from bytes read so far get a `~`. */
function rowsText(run: BulkRunView): string {
  return `${formatCount(run.progress.rowsDone)}/${totalText(run) ?? '?'} rows`;
}

function totalText(run: BulkRunView): string | undefined {
  const { rowsTotal, rowsTotalExact } = run.progress;
  return rowsTotal > 0 ? `${rowsTotalExact ? '' : '~'}${formatCount(rowsTotal)}` : undefined;
}

/** `5,230 of ~10,000 rows` (`5,230 rows` while the total is unknown): how far a run got. */
function rowsSoFar(run: BulkRunView): string {
  const total = totalText(run);
  return `${formatCount(run.progress.rowsDone)}${total ? ` of ${total}` : ''} rows`;
}

/**
 * A run that stopped short, as its progress names it: `failed`, `canceled`; undefined while it
 * runs or once it succeeded. Such a run shows where it stopped, never a share done: a failed
 * run at 99.9 % reads as nearly there.
 */
function stoppedAs(run: BulkRunView): 'failed' | 'canceled' | undefined {
  if (run.status === 'canceled') return 'canceled';
  return run.status === 'failed' || allRowsBad(run) ? 'failed' : undefined;
}

/** Share of rows done, 0–1; 0 while the total is unknown. Never 1 before the run succeeded. */
export function fractionDone(run: BulkRunView): number {
  if (run.status === 'succeeded') return 1;
  const { rowsDone, rowsTotal } = run.progress;
  if (rowsTotal <= 0) return 0;
  // An estimated total can fall short of the rows already done: hold at 99.9% until the end.
  return Math.min(rowsDone / rowsTotal, 0.999);
}

/** How long the server's rate looks back (infra/bulk/progress.ts DEFAULT_RATE_WINDOW_MS). */
const RATE_WINDOW_MS = 60_000;

/**
 * Rows/s to show. A finished run's is its view's, rows ÷ its duration (infra/bulk progress.ts
 * `runRowsPerSecond`: the figure its manifest, the API and its end webhook give too). A running
 * run's `rowsPerSecond` is its driver's recent rate; until the run is older than the rate's
 * window this shows rows done ÷ time since it started, which a user can check against the
 * clock; later the recent rate stands (it also leaves out a resumed run's earlier drives).
 */
export function displayRate(run: BulkRunView, now: number): number {
  const { rowsDone, rowsPerSecond } = run.progress;
  if (run.status !== 'running' || run.startedAt === undefined) return rowsPerSecond;
  const elapsedMs = now - run.startedAt;
  if (elapsedMs <= 0) return 0;
  return elapsedMs < RATE_WINDOW_MS ? rowsDone / (elapsedMs / 1000) : rowsPerSecond;
}

/** Seconds left at the rate shown; undefined while there is no rate. */
function etaSeconds(run: BulkRunView, now: number): number | undefined {
  const rate = displayRate(run, now);
  if (rate === run.progress.rowsPerSecond) return run.progress.etaSeconds;
  return rate > 0 ? Math.max(0, run.progress.rowsTotal - run.progress.rowsDone) / rate : undefined;
}

/** The run read all its input and every row was bad: it wrote nothing (said as such, not as a budget overrun). */
export function allRowsBad(run: BulkRunView): boolean {
  // A run ends failed (too_many_bad_rows) when no row was good; one recorded before that rule may say succeeded.
  const ended = run.status === 'succeeded' || (run.status === 'failed' && run.error?.code === 'too_many_bad_rows');
  return ended && run.progress.badRows > 0 && run.progress.rowsDone === 0;
}

/** Whether the run ended in a way its user must hear about as a failure (exit code 1). */
export function endedBadly(run: BulkRunView): boolean {
  return run.status === 'failed' || run.status === 'canceled' || allRowsBad(run);
}

/** The parts every format shares after the counts: rate, ETA, bad rows, late. */
function details(run: BulkRunView, now: number): string[] {
  const parts = stoppedAs(run) ? [] : [`${formatRate(displayRate(run, now))} rows/s`];
  if (run.status === 'running') {
    const eta = etaSeconds(run, now);
    parts.push(`ETA ${eta === undefined ? '?' : formatDuration(eta)}`);
  }
  if (run.progress.badRows > 0) parts.push(`${formatCount(run.progress.badRows)} bad`);
  // Late: the ETA is past the deadline, so the run was (or is being) raised to urgent.
  if (run.progress.onTrack === false) parts.push('late');
  return parts;
}

/**
 * `[██████░░░░░░] 52.3% 5,230/10,000 rows 812 rows/s ETA 5s 2 bad late`, for a TTY of `width`
 * columns; a run that stopped short: `[██████░░░░░░] failed at 5,230 of 10,000 rows 2 bad`.
 */
export function formatProgressBar(run: BulkRunView, width = 80, now = Date.now()): string {
  const fraction = fractionDone(run);
  const stopped = stoppedAs(run);
  const head = stopped ? `${stopped} at ${rowsSoFar(run)}` : `${(fraction * 100).toFixed(1)}% ${rowsText(run)}`;
  const tail = ` ${[head, ...details(run, now)].join(' ')}`;
  const barWidth = Math.max(10, Math.min(40, width - tail.length - 3));
  const filled = Math.round(fraction * barWidth);
  const line = `[${FULL.repeat(filled)}${EMPTY.repeat(barWidth - filled)}]${tail}`;
  return line.length > width ? `${line.slice(0, Math.max(0, width - 1))}…` : line;
}

/**
 * `bulk <id>: 5,230/10,000 rows (52.3%), 812 rows/s, ETA 5s, 2 bad, late`: one log line; a run
 * that stopped short: `bulk <id>: failed at 5,230 of 10,000 rows, 2 bad`.
 */
export function formatProgressLine(run: BulkRunView, now = Date.now()): string {
  const stopped = stoppedAs(run);
  const head = stopped ? `${stopped} at ${rowsSoFar(run)}` : `${rowsText(run)} (${(fractionDone(run) * 100).toFixed(1)}%)`;
  return `bulk ${run.id}: ${[head, ...details(run, now)].join(', ')}`;
}

/** The closing line: what happened, how long it took, where the output is, or why it stopped. */
export function formatSummary(run: BulkRunView, now = Date.now()): string {
  const timed = run.finishedAt !== undefined && run.startedAt !== undefined;
  const took = timed ? ` in ${formatDuration(((run.finishedAt as number) - (run.startedAt as number)) / 1000)}` : '';
  const bad = run.progress.badRows > 0 ? `, ${formatCount(run.progress.badRows)} bad rows` : '';
  if (allRowsBad(run)) {
    const first = formatBadRows(run)[0]?.trim();
    return `bulk ${run.id} failed: all ${formatCount(run.progress.badRows)} rows were bad${first ? ` (first: ${first})` : ''}; nothing was written`;
  }
  switch (run.status) {
    case 'succeeded': {
      const rate = timed ? ` (${formatRate(displayRate(run, now))} rows/s)` : '';
      return `bulk ${run.id} succeeded: ${formatCount(run.progress.rowsDone)} rows${bad}${took}${rate}; manifest ${run.manifest ?? `${run.output}_manifest.json`}`;
    }
    case 'failed':
      return `bulk ${run.id} failed after ${rowsSoFar(run)}${took}: ${failure(run)}`;
    case 'canceled':
      return `bulk ${run.id} canceled after ${rowsSoFar(run)}${run.error ? ` (${run.error.message})` : ''}`;
    default:
      return formatProgressLine(run, now);
  }
}

/** `code: message`, naming the run's input when the message names no object of it. */
function failure(run: BulkRunView): string {
  if (!run.error) return `no reason recorded (input ${run.input})`;
  const { code, message } = run.error;
  return `${code}: ${message}${message.includes('s3://') ? '' : ` (input ${run.input})`}`;
}

/** The first few bad rows, for the user to fix their input: `  s3://…/a.jsonl line 7: message`. */
export function formatBadRows(run: BulkRunView): string[] {
  const [bucket] = run.input.replace(/^s3:\/\//, '').split('/');
  return run.badRowSamples.map((b) => `  s3://${bucket}/${b.object} line ${b.line}: ${b.message}`);
}
