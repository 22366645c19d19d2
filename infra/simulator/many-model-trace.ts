/**
 * Many-model traces (issue 31 §5): arrivals per minute, per model. Two ways in:
 *
 * - A CSV with a model column: a time column, a model column and, optionally, a count column;
 *   one row per request when there is none, else each row adds its count to its minute (so a
 *   trace of per-minute counts per model reads as written). A minute no row of a model names had
 *   none of its requests: a model's silence is data here, not an outage.
 * - A single-model trace split into models (`--split-models N`): each arrival goes to model k with
 *   Zipf probability ∝ 1 / k^ZIPF_EXPONENT, drawn with a seed, so the pool's total is the trace's
 *   and only its division among models is synthetic. A minute's count is split by a chain of
 *   binomials (model 1 from all, model 2 from the rest, …), exact for small counts and the normal
 *   approximation past SMALL_COUNT, so a 48,000-a-minute trace splits in O(models) a minute.
 */
import { readFileSync } from 'node:fs';
import { InvalidInputError } from '../kernel/errors.ts';
import { seededRandom } from '../kernel/seeded-random.ts';
import { realiseCounts } from './arrivals.ts';
import { parseTime, type Trace } from './trace.ts';

const MINUTE_MS = 60_000;
/** Zipf's exponent for split traces: 1, the classic popularity law of web objects and model hubs. */
export const ZIPF_EXPONENT = 1;
/** Up to this many trials a binomial is drawn trial by trial; beyond, by the normal approximation. */
const SMALL_COUNT = 40;

export interface ManyModelTrace {
  /** Epoch ms of minute 0. */
  startMs: number;
  models: string[];
  /** Whole arrivals per minute, model-major, every row the same length. */
  perMinute: number[][];
  /** Per minute: no data at all (an outage of the source trace), shared by every model. */
  missing: boolean[];
  rows: number;
}

export interface ManyModelTraceOptions {
  timeColumn?: string;
  modelColumn: string;
  countColumn?: string;
}

export function readManyModelTraceFile(file: string, options: ManyModelTraceOptions): ManyModelTrace {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidInputError('invalid_trace', `cannot read trace ${file}`, { cause: err });
  }
  return parseManyModelTrace(text, options);
}

export function parseManyModelTrace(text: string, options: ManyModelTraceOptions): ManyModelTrace {
  const lines = text.split(/\r?\n/).filter((line) => line.trim() !== '');
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  const column = (name: string | undefined, fallback: number | undefined): number | undefined => {
    if (name === undefined) return fallback;
    const i = header.indexOf(name);
    if (i < 0) throw new InvalidInputError('invalid_trace', `trace has no column "${name}" (columns: ${header.join(', ')})`);
    return i;
  };
  const time = column(options.timeColumn, 0) as number;
  const model = column(options.modelColumn, undefined) as number;
  const count = column(options.countColumn, undefined);
  const rows: Array<{ atMs: number; model: string; count: number }> = [];
  for (let i = 1; i < lines.length; i++) {
    const cells = (lines[i] as string).split(',').map((c) => c.trim());
    const atMs = parseTime(cells[time] ?? '');
    if (atMs === undefined) throw new InvalidInputError('invalid_trace', `trace line ${i + 1}: cannot read time "${cells[time] ?? ''}"`);
    const name = cells[model] ?? '';
    if (name === '') throw new InvalidInputError('invalid_trace', `trace line ${i + 1}: no model in column "${options.modelColumn}"`);
    const n = count === undefined ? 1 : Number(cells[count]);
    if (!Number.isFinite(n) || n < 0)
      throw new InvalidInputError('invalid_trace', `trace line ${i + 1}: bad count "${cells[count ?? 0] ?? ''}"`);
    rows.push({ atMs, model: name, count: n });
  }
  if (rows.length === 0) throw new InvalidInputError('invalid_trace', 'trace has no rows');
  const startMs = Math.floor(Math.min(...rows.map((r) => r.atMs)) / MINUTE_MS) * MINUTE_MS;
  const length = Math.floor((Math.max(...rows.map((r) => r.atMs)) - startMs) / MINUTE_MS) + 1;
  // Models by popularity, the busiest first (as a split trace numbers them).
  const totals = new Map<string, number>();
  for (const r of rows) totals.set(r.model, (totals.get(r.model) ?? 0) + r.count);
  const models = [...totals.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0])).map(([m]) => m);
  const index = new Map(models.map((m, i) => [m, i]));
  const perMinute = models.map(() => new Array<number>(length).fill(0));
  for (const r of rows) {
    const series = perMinute[index.get(r.model) as number] as number[];
    const i = Math.floor((r.atMs - startMs) / MINUTE_MS);
    series[i] = (series[i] ?? 0) + r.count;
  }
  return { startMs, models, perMinute, missing: new Array<boolean>(length).fill(false), rows: rows.length };
}

/** Zipf popularity of `n` models, the busiest first, summing to 1. */
export function zipfShares(n: number, exponent = ZIPF_EXPONENT): number[] {
  const raw = Array.from({ length: n }, (_, k) => 1 / (k + 1) ** exponent);
  const total = raw.reduce((a, b) => a + b, 0);
  return raw.map((x) => x / total);
}

/** A single-model trace's arrivals (× scale, rounded as realiseCounts does) split among `n` models by Zipf. */
export function splitIntoModels(trace: Trace, n: number, seed: number, scale = 1): ManyModelTrace {
  const counts = realiseCounts(trace.series.perMinute, trace.missing, scale, seed);
  const shares = zipfShares(n);
  const perMinute = shares.map(() => new Array<number>(counts.length).fill(0));
  const random = seededRandom((seed ^ 0x2545f491) >>> 0);
  counts.forEach((total, minute) => {
    let left = total;
    let rest = 1;
    for (let k = 0; k < n && left > 0; k++) {
      const p = k === n - 1 ? 1 : (shares[k] as number) / rest;
      const x = binomial(left, Math.min(1, p), random);
      (perMinute[k] as number[])[minute] = x;
      left -= x;
      rest -= shares[k] as number;
    }
  });
  const width = String(n).length;
  return {
    startMs: trace.series.startMs,
    models: shares.map((_, k) => `m${String(k + 1).padStart(width, '0')}`),
    perMinute,
    missing: [...trace.missing],
    rows: trace.rows,
  };
}

/** Binomial(n, p): trial by trial up to SMALL_COUNT, the normal approximation beyond (clamped to [0, n]). */
export function binomial(n: number, p: number, random: () => number): number {
  if (p <= 0 || n <= 0) return 0;
  if (p >= 1) return n;
  if (n <= SMALL_COUNT) {
    let x = 0;
    for (let i = 0; i < n; i++) if (random() < p) x++;
    return x;
  }
  const z = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return Math.min(n, Math.max(0, Math.round(n * p + z * Math.sqrt(n * p * (1 - p)))));
}

/** The pool's total per minute (what one shared pool's arrival counter records). */
export function totalPerMinute(t: ManyModelTrace): number[] {
  const out = new Array<number>(t.missing.length).fill(0);
  for (const series of t.perMinute) {
    series.forEach((x, i) => {
      out[i] = (out[i] ?? 0) + x;
    });
  }
  return out;
}
