/**
 * How `warmpool bulk run` shows a run's progress: a one-line bar redrawn in place on a terminal,
 * a plain line every few seconds otherwise (logs, CI), and a closing summary. Pure: every
 * function takes the run view and returns text, so the formats are tested without a terminal.
 */
import type { BulkRunView } from '../../infra/contracts/bulk.ts';

const FULL = '█';
const EMPTY = '░';

/** `12,345`; totals estimated from bytes read so far get a `~`. */
function rowsText(run: BulkRunView): string {
  const { rowsDone, rowsTotal, rowsTotalExact } = run.progress;
  const total = rowsTotal > 0 ? `${rowsTotalExact ? '' : '~'}${count(rowsTotal)}` : '?';
  return `${count(rowsDone)}/${total} rows`;
}

/** Share of rows done, 0–1; 0 while the total is unknown. Never 1 before the run succeeded. */
export function fractionDone(run: BulkRunView): number {
  if (run.status === 'succeeded') return 1;
  const { rowsDone, rowsTotal } = run.progress;
  if (rowsTotal <= 0) return 0;
  // An estimated total can fall short of the rows already done: hold at 99.9% until the end.
  return Math.min(rowsDone / rowsTotal, 0.999);
}

export function count(n: number): string {
  return Math.round(n).toLocaleString('en-US');
}

/** `45s`, `3m05s`, `2h07m`, `3d04h`: short enough for a status line. */
export function formatDuration(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  const pad = (n: number) => String(n).padStart(2, '0');
  if (s < 3600) return `${Math.floor(s / 60)}m${pad(s % 60)}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h${pad(Math.floor((s % 3600) / 60))}m`;
  return `${Math.floor(s / 86_400)}d${pad(Math.floor((s % 86_400) / 3600))}h`;
}

function rateText(run: BulkRunView): string {
  const r = run.progress.rowsPerSecond;
  return `${r >= 100 ? count(r) : r.toFixed(1)} rows/s`;
}

/** The parts every format shares after the counts: rate, ETA, bad rows, late. */
function details(run: BulkRunView): string[] {
  const parts = [rateText(run)];
  if (run.status === 'running') parts.push(`ETA ${run.progress.etaSeconds === undefined ? '?' : formatDuration(run.progress.etaSeconds)}`);
  if (run.progress.badRows > 0) parts.push(`${count(run.progress.badRows)} bad`);
  // Late: the ETA is past the deadline, so the run was (or is being) raised to urgent.
  if (run.progress.onTrack === false) parts.push('late');
  return parts;
}

/** `[██████░░░░░░] 52.3% 5,230/10,000 rows 812 rows/s ETA 5s 2 bad late`, for a TTY of `width` columns. */
export function formatProgressBar(run: BulkRunView, width = 80): string {
  const fraction = fractionDone(run);
  const tail = ` ${(fraction * 100).toFixed(1)}% ${rowsText(run)} ${details(run).join(' ')}`;
  const barWidth = Math.max(10, Math.min(40, width - tail.length - 3));
  const filled = Math.round(fraction * barWidth);
  const line = `[${FULL.repeat(filled)}${EMPTY.repeat(barWidth - filled)}]${tail}`;
  return line.length > width ? `${line.slice(0, Math.max(0, width - 1))}…` : line;
}

/** `bulk <id>: 5,230/10,000 rows (52.3%), 812 rows/s, ETA 5s, 2 bad, late`: one log line. */
export function formatProgressLine(run: BulkRunView): string {
  return `bulk ${run.id}: ${rowsText(run)} (${(fractionDone(run) * 100).toFixed(1)}%), ${details(run).join(', ')}`;
}

/** The closing line: what happened, how long it took, where the output is, or why it stopped. */
export function formatSummary(run: BulkRunView): string {
  const took =
    run.finishedAt !== undefined && run.startedAt !== undefined ? ` in ${formatDuration((run.finishedAt - run.startedAt) / 1000)}` : '';
  const bad = run.progress.badRows > 0 ? `, ${count(run.progress.badRows)} bad rows` : '';
  switch (run.status) {
    case 'succeeded':
      return `bulk ${run.id} succeeded: ${count(run.progress.rowsDone)} rows${bad}${took}; manifest ${run.manifest ?? `${run.output}_manifest.json`}`;
    case 'failed':
      return `bulk ${run.id} failed${took}: ${run.error ? `${run.error.code}: ${run.error.message}` : 'no reason recorded'}`;
    case 'canceled':
      return `bulk ${run.id} canceled after ${count(run.progress.rowsDone)} rows${run.error ? ` (${run.error.message})` : ''}`;
    default:
      return formatProgressLine(run);
  }
}

/** The first few bad rows, for the user to fix their input: `  s3://…/a.jsonl line 7: message`. */
export function formatBadRows(run: BulkRunView): string[] {
  const [bucket] = run.input.replace(/^s3:\/\//, '').split('/');
  return run.badRowSamples.map((b) => `  s3://${bucket}/${b.object} line ${b.line}: ${b.message}`);
}
