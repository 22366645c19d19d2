/**
 * Arrival traces from CSV (DESIGN §8): a time column and, optionally, a count (or rate) column,
 * turned into the per-minute ArrivalSeries the forecaster and the simulator read.
 *
 * - Time: ISO-8601 (`T` or a space between date and time, any number of fractional digits, an
 *   optional `Z`/offset) or epoch seconds. Times without a zone are read as UTC: a trace's wall
 *   clock is kept as written, so its hour of day (what the daily cycle hangs on) is unchanged.
 * - No count column: one row per request; minutes without a row had no requests (0).
 * - Count column (`requests`, `count`) or rate column (`*_rps`, `rate`, in requests per second):
 *   each row is a bin of the trace's resolution (the smallest step between rows, e.g. 60 s or
 *   600 s), spread evenly over the minutes it covers. Minutes no row covers are *missing* (no
 *   data), not zero: an aggregated trace with a hole in it says nothing about that hole.
 * - An `outage` column with a true value (1/true) marks its bin missing as well: the NASA trace's
 *   server was down, which recorded no arrivals but says nothing about demand.
 */
import { readFileSync } from 'node:fs';
import type { ArrivalSeries } from '../contracts/pool.ts';
import { InvalidInputError } from '../kernel/errors.ts';

export const MINUTE_MS = 60_000;

export interface TraceOptions {
  /** Column holding each row's time; default: the first column. */
  timeColumn?: string;
  /** Column holding a count per row (or per bin); default: one named `requests` or `count`. */
  countColumn?: string;
  /** Column holding a rate in requests/s per bin; default: one named `rate` or ending in `_rps`. */
  rateColumn?: string;
  /** Bin width of a counted trace in seconds; default: the smallest step between rows. */
  binS?: number;
}

export interface Trace {
  series: ArrivalSeries;
  /** Per minute, parallel to `series.perMinute`: true where the trace has no data. */
  missing: boolean[];
  rows: number;
}

interface Row {
  atMs: number;
  count: number;
  outage: boolean;
}

export function readTraceFile(file: string, options: TraceOptions = {}): Trace {
  return parseTrace(readFileSync(file, 'utf8'), options);
}

export function parseTrace(text: string, options: TraceOptions = {}): Trace {
  const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '');
  const header = (lines[0] ?? '').split(',').map((name) => name.trim());
  const columns = pickColumns(header, options);
  const rows = lines.slice(1).map((line, i) => parseRow(line.split(','), columns, i + 2));
  if (rows.length === 0) throw new InvalidInputError('invalid_trace', 'trace has no rows');
  rows.sort((a, b) => a.atMs - b.atMs);
  if (columns.count === undefined && columns.rate === undefined) return binEvents(rows);
  return binCounts(rows, options.binS, columns.rate !== undefined);
}

interface Columns {
  time: number;
  count: number | undefined;
  rate: number | undefined;
  outage: number | undefined;
}

function pickColumns(header: string[], options: TraceOptions): Columns {
  const find = (name: string | undefined, fallback: (h: string) => boolean): number | undefined => {
    if (name === undefined) {
      const i = header.findIndex(fallback);
      return i < 0 ? undefined : i;
    }
    const i = header.indexOf(name);
    if (i < 0) throw new InvalidInputError('invalid_trace', `trace has no column "${name}" (columns: ${header.join(', ')})`);
    return i;
  };
  const time = find(options.timeColumn, () => true);
  if (time === undefined) throw new InvalidInputError('invalid_trace', 'trace has no header');
  const count = find(options.countColumn, (h) => h === 'requests' || h === 'count');
  const rate = count !== undefined ? undefined : find(options.rateColumn, (h) => h === 'rate' || h.endsWith('_rps'));
  return { time, count, rate, outage: find(undefined, (h) => h === 'outage') };
}

function parseRow(cells: string[], columns: Columns, line: number): Row {
  const cell = (i: number | undefined) => (i === undefined ? '' : (cells[i] ?? '').trim());
  const atMs = parseTime(cell(columns.time));
  if (atMs === undefined) throw new InvalidInputError('invalid_trace', `trace line ${line}: cannot read time "${cell(columns.time)}"`);
  let count = 1;
  if (columns.count !== undefined || columns.rate !== undefined) {
    count = Number(cell(columns.count ?? columns.rate));
    if (!Number.isFinite(count) || count < 0)
      throw new InvalidInputError('invalid_trace', `trace line ${line}: bad count "${cell(columns.count ?? columns.rate)}"`);
  }
  const outage = /^(1|true)$/i.test(cell(columns.outage));
  return { atMs, count, outage };
}

const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?)?\s*(Z|[+-]\d{2}:?\d{2})?$/i;

/** Epoch ms, or undefined when `text` is neither ISO-8601 nor epoch seconds. */
export function parseTime(text: string): number | undefined {
  if (/^-?\d+(\.\d+)?$/.test(text)) return Number(text) * 1000;
  const m = ISO.exec(text);
  if (!m) return undefined;
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '', zone] = m;
  const ms = Number(`0.${frac || '0'}`) * 1000;
  let at = Date.UTC(Number(y), Number(mo) - 1, Number(d), Number(h), Number(mi), Number(s), ms);
  if (zone && zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1;
    const digits = zone.slice(1).replace(':', '');
    at -= sign * (Number(digits.slice(0, 2)) * 60 + Number(digits.slice(2))) * MINUTE_MS;
  }
  return Number.isFinite(at) ? at : undefined;
}

function floorMinute(ms: number): number {
  return Math.floor(ms / MINUTE_MS) * MINUTE_MS;
}

/** One row per request: count rows per minute; a minute without rows had none. */
function binEvents(rows: Row[]): Trace {
  const startMs = floorMinute((rows[0] as Row).atMs);
  const length = (floorMinute((rows[rows.length - 1] as Row).atMs) - startMs) / MINUTE_MS + 1;
  const perMinute = new Array<number>(length).fill(0);
  for (const row of rows) {
    const i = (floorMinute(row.atMs) - startMs) / MINUTE_MS;
    perMinute[i] = (perMinute[i] ?? 0) + 1;
  }
  return { series: { startMs, perMinute }, missing: new Array<boolean>(length).fill(false), rows: rows.length };
}

/** Counted bins: spread each bin's count over its minutes; minutes no bin covers are missing. */
function binCounts(rows: Row[], binS: number | undefined, isRate: boolean): Trace {
  const binMs = binS !== undefined ? binS * 1000 : smallestStep(rows);
  const minutesPerBin = Math.max(1, Math.round(binMs / MINUTE_MS));
  const startMs = floorMinute((rows[0] as Row).atMs);
  const length = (floorMinute((rows[rows.length - 1] as Row).atMs) - startMs) / MINUTE_MS + minutesPerBin;
  const perMinute = new Array<number>(length).fill(0);
  const missing = new Array<boolean>(length).fill(true);
  for (const row of rows) {
    const first = (floorMinute(row.atMs) - startMs) / MINUTE_MS;
    // A rate column holds requests/s, so each of the bin's minutes saw rate × 60.
    const perMin = isRate ? row.count * 60 : row.count / minutesPerBin;
    for (let i = first; i < first + minutesPerBin; i++) {
      perMinute[i] = row.outage ? 0 : perMin;
      missing[i] = row.outage;
    }
  }
  return { series: { startMs, perMinute }, missing, rows: rows.length };
}

function smallestStep(rows: Row[]): number {
  let step = Number.POSITIVE_INFINITY;
  for (let i = 1; i < rows.length; i++) {
    const d = (rows[i] as Row).atMs - (rows[i - 1] as Row).atMs;
    if (d > 0 && d < step) step = d;
  }
  return Number.isFinite(step) ? step : MINUTE_MS;
}
