/**
 * `warmpool simulate --trace FILE.csv [--time-col NAME] [--count-col NAME] [--scale X]
 * [--policy FILE.json] [--slo-ms N] [--cold-start-s N] [--worker-rps N] [--max-batch N]
 * [--tick-s N] [--seed N] [--arrivals uniform|poisson|gamma] [--cv N] [--history-days N]
 * [--days N] [--standby-price X] [--out DIR]`
 *
 * Replays a trace through predictive, reactive, static-peak and oracle (infra/simulator) and
 * writes report.json and report.md to --out (default ./simulation). Bad input exits 2 with a
 * message naming the problem: a flag, a column, a time, rows out of order.
 */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { InvalidInputError } from '../../infra/errors.ts';
import type { PolicySettings } from '../../infra/scaler/contracts.ts';
import { parseTime, readTraceFile, type Trace } from '../../infra/scaler/trace.ts';
import type { ArrivalPattern } from '../../infra/simulator/arrivals.ts';
import { compare, defaultSettings, type SimulationSettings } from '../../infra/simulator/compare.ts';
import { reportTable, type TraceInfo, writeReport } from '../../infra/simulator/report.ts';

export interface SimulateOut {
  out(text: string): void;
  err(text: string): void;
}

const processOut: SimulateOut = { out: (t) => process.stdout.write(t), err: (t) => process.stderr.write(t) };

const OPTIONS = {
  trace: { type: 'string' },
  'time-col': { type: 'string' },
  'count-col': { type: 'string' },
  scale: { type: 'string' },
  policy: { type: 'string' },
  'slo-ms': { type: 'string' },
  'cold-start-s': { type: 'string' },
  'worker-rps': { type: 'string' },
  'max-batch': { type: 'string' },
  'tick-s': { type: 'string' },
  seed: { type: 'string' },
  arrivals: { type: 'string' },
  cv: { type: 'string' },
  'history-days': { type: 'string' },
  days: { type: 'string' },
  'standby-price': { type: 'string' },
  out: { type: 'string' },
} as const;

export async function simulateMain(args: string[], out: SimulateOut = processOut): Promise<number> {
  try {
    const { values } = parseArgs({ args, options: OPTIONS, allowPositionals: false, strict: true });
    if (!values.trace) throw new InvalidInputError('invalid_flag', '--trace FILE.csv is required');
    const traceOptions = { timeColumn: values['time-col'], countColumn: values['count-col'] };
    checkSorted(values.trace, values['time-col']);
    const trace = readTraceFile(values.trace, traceOptions);
    const settings = settingsFrom(values);
    const comparison = compare(trace, settings);
    const dir = values.out ?? 'simulation';
    writeReport(dir, traceInfo(values.trace, trace), comparison);
    out.out(`${reportTable(comparison)}\n\nwrote ${dir}/report.json and ${dir}/report.md\n`);
    return 0;
  } catch (err) {
    if (err instanceof InvalidInputError || isParseArgsError(err)) {
      out.err(`warmpool simulate: ${(err as Error).message}\n`);
      return 2;
    }
    throw err;
  }
}

type Values = { [K in keyof typeof OPTIONS]?: string };

function settingsFrom(v: Values): SimulationSettings {
  const sloMs = num(v, 'slo-ms', { min: 1 });
  const coldS = num(v, 'cold-start-s', { min: 0 });
  const tickS = num(v, 'tick-s', { min: 0.1 });
  const policy = v.policy ? readPolicy(v.policy) : {};
  return defaultSettings({
    scale: num(v, 'scale', { min: 0, exclusive: true }),
    sloMs,
    coldStartMs: coldS === undefined ? undefined : coldS * 1000,
    workerRps: num(v, 'worker-rps', { min: 0, exclusive: true }),
    maxBatch: num(v, 'max-batch', { min: 1, integer: true }),
    tickMs: tickS === undefined ? undefined : tickS * 1000,
    seed: num(v, 'seed', { min: 0, integer: true }),
    pattern: pattern(v),
    historyDays: num(v, 'history-days', { min: 0 }),
    days: num(v, 'days', { min: 0, exclusive: true }),
    standbyPrice: num(v, 'standby-price', { min: 0 }),
    policy: policy as PolicySettings,
  } as Partial<SimulationSettings>);
}

/** Drops undefined values, so defaults stand where a flag was not given. */
function num(v: Values, flag: keyof Values, rule: { min: number; exclusive?: boolean; integer?: boolean }): number | undefined {
  const text = v[flag];
  if (text === undefined) return undefined;
  const x = Number(text);
  const bad = !Number.isFinite(x) || (rule.exclusive ? x <= rule.min : x < rule.min) || (rule.integer && !Number.isInteger(x));
  if (bad) {
    const what = `${rule.integer ? 'an integer' : 'a number'} ${rule.exclusive ? '>' : '≥'} ${rule.min}`;
    throw new InvalidInputError('invalid_flag', `--${flag} must be ${what}, got "${text}"`);
  }
  return x;
}

function pattern(v: Values): ArrivalPattern | undefined {
  const kind = v.arrivals;
  if (kind === undefined) return v.cv === undefined ? undefined : { kind: 'gamma', cv: num(v, 'cv', { min: 0, exclusive: true }) ?? 1 };
  if (kind === 'uniform' || kind === 'poisson') return { kind };
  if (kind === 'gamma') return { kind, cv: num(v, 'cv', { min: 0, exclusive: true }) ?? 2 };
  throw new InvalidInputError('invalid_flag', `--arrivals must be uniform, poisson or gamma, got "${kind}"`);
}

const POLICY_KEYS = ['min', 'max', 'standby', 'sloQueueWaitMs', 'coldStartMs', 'scaleDownStabilizationMs', 'targetUtilization'];

function readPolicy(file: string): Partial<PolicySettings> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new InvalidInputError('invalid_flag', `--policy ${file}: ${(err as Error).message}`, { cause: err });
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw new InvalidInputError('invalid_flag', `--policy ${file}: expected a JSON object`);
  }
  for (const [key, value] of Object.entries(parsed)) {
    if (!POLICY_KEYS.includes(key))
      throw new InvalidInputError('invalid_flag', `--policy ${file}: unknown key "${key}" (known: ${POLICY_KEYS.join(', ')})`);
    if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
      throw new InvalidInputError('invalid_flag', `--policy ${file}: "${key}" must be a non-negative number`);
    }
  }
  return parsed as Partial<PolicySettings>;
}

/**
 * trace.ts sorts rows silently; a replay of a log whose rows are out of order is more likely a
 * wrong column or a concatenation mistake than intent, so the CLI refuses it and names the line.
 */
export function checkSorted(file: string, timeColumn: string | undefined): void {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new InvalidInputError('invalid_trace', `cannot read trace ${file}: ${(err as Error).message}`, { cause: err });
  }
  const lines = text.split(/\r?\n/);
  const header = (lines[0] ?? '').split(',').map((h) => h.trim());
  const col = timeColumn === undefined ? 0 : header.indexOf(timeColumn);
  if (col < 0) return; // readTraceFile names the missing column.
  let last = Number.NEGATIVE_INFINITY;
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i] as string;
    if (line.trim() === '') continue;
    const at = parseTime((line.split(',')[col] ?? '').trim());
    if (at === undefined) continue; // readTraceFile names the unreadable time.
    if (at < last) throw new InvalidInputError('invalid_trace', `trace line ${i + 1}: time goes backwards (rows must be sorted by time)`);
    last = at;
  }
}

function traceInfo(file: string, trace: Trace): TraceInfo {
  const minutes = trace.series.perMinute.length;
  return {
    file,
    rows: trace.rows,
    minutes,
    start: new Date(trace.series.startMs).toISOString(),
    end: new Date(trace.series.startMs + minutes * 60_000).toISOString(),
  };
}

function isParseArgsError(err: unknown): boolean {
  return err instanceof Error && 'code' in err && String((err as { code: unknown }).code).startsWith('ERR_PARSE_ARGS');
}
