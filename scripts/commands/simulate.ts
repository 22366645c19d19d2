/**
 * `warmpool simulate --trace FILE.csv [--time-col NAME] [--count-col NAME] [--scale X]
 * [--policy FILE.json] [--slo-ms N] [--cold-start-s N] [--worker-rps N] [--max-batch N]
 * [--tick-s N] [--seed N] [--arrivals uniform|poisson|gamma] [--cv N] [--history-days N]
 * [--days N] [--standby-price X] [--cold-start-phases launching=S,…] [--cold-start-cv X]
 * [--batch-profile FILE.json] [--job-overhead-ms N] [--out DIR] [--sweep NAME=V1,V2,… …] [--slo-target X] [--threads N]
 * [--walk-forward [--train-fraction X]]`
 * `warmpool simulate --matrix --traces DIR|--trace FILE [--quick] [--cell-budget-s N] [--train-fraction X] …`
 * (simulate-matrix.ts): every trace through a grid of worlds, the default policy, walk-forward.
 * `warmpool simulate calibrate …` (simulate-calibrate.ts): the simulator against a real worker.
 * `warmpool simulate --shared-pool (--trace F --model-col M | --trace F --split-models N | --generate-models N) …`
 * (simulate-shared.ts): many models on one shared pool, four policies at the SLO target.
 *
 * Replays a trace through predictive, reactive, static-peak and oracle (infra/simulator), then
 * searches each baseline's cheapest setting meeting --slo-target (default 0.99; at-slo.ts, on
 * --threads sweep threads), and writes report.json, report.md and the charts to --out (default
 * ./simulation), costs compared as-is and at equal SLO attainment; with --sweep,
 * the predictive policy over a grid of its settings: sweep.json, sweep.md and pareto.svg. With
 * --walk-forward (infra/simulator/walk-forward.ts) the sweep (--sweep's grid, or a default one)
 * tunes on the first --train-fraction of the replay only, and the report covers only the rest,
 * for the tuned and the default policy. Bad input exits 2 with a message naming the problem: a
 * flag, a column, a time, rows out of order.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { PolicySettings } from '../../infra/contracts/pool.ts';
import { SIMULATE_DEFAULTS } from '../../infra/kernel/config.ts';
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';
import type { ArrivalPattern } from '../../infra/simulator/index.ts';
import {
  AT_SLO_BASELINES,
  AT_SLO_REPLAYS,
  atSloTable,
  baselinesAtSlo,
  batchPointsFrom,
  cheapestLine,
  coldStartModel,
  compare,
  DEFAULT_SLO_TARGET,
  DEFAULT_TRAIN_FRACTION,
  DEFAULT_WALK_FORWARD_SWEEP,
  defaultSettings,
  POLICY_NAMES,
  parsePhases,
  parseSweep,
  parseTime,
  readPolicyFile,
  readTraceFile,
  reportTable,
  runSweep,
  runWalkForward,
  type SimulationSettings,
  sweepReplays,
  sweepTable,
  type Trace,
  type TraceInfo,
  walkForwardReplays,
  walkForwardTable,
  withReplayThreads,
  writeReport,
  writeSweep,
  writeWalkForward,
} from '../../infra/simulator/index.ts';
import { SIMULATE } from './cli-options.ts';
import type { SimulateOut } from './simulate-out.ts';
import { withProgress } from './simulate-progress.ts';

const processOut: SimulateOut = {
  out: (t) => process.stdout.write(t),
  err: (t) => process.stderr.write(t),
  errIsTTY: process.stderr.isTTY === true,
};

/** The table `--help` prints (cli-options.ts); `--sweep`'s words are split off first (splitSweep). */
const OPTIONS = SIMULATE.options;

const DEFAULT_CELL_BUDGET_S = 600;
/** Two days of history and two scored: enough for the forecaster's daily analogues. */
const DEFAULT_BANK_DAYS = 4;

export async function simulateMain(args: string[], out: SimulateOut = processOut): Promise<number> {
  if (args[0] === 'calibrate') return (await import('./simulate-calibrate.ts')).calibrateMain(args.slice(1), out);
  try {
    const { flags, sweep } = splitSweep(args);
    const { values } = parseArgs({ args: flags, options: OPTIONS, allowPositionals: false, strict: true });
    checkModes(values, sweep);
    const sloTarget = num(values, 'slo-target', { min: 0, max: 1 }) ?? DEFAULT_SLO_TARGET;
    const threads = num(values, 'threads', { min: 1, integer: true });
    const trainFraction = num(values, 'train-fraction', { min: 0, max: 1, exclusive: true }) ?? DEFAULT_TRAIN_FRACTION;
    if (values['shared-pool']) return await sharedPool(values, sloTarget, out);
    if (values.matrix) return await matrix(values, { sloTarget, threads, trainFraction }, out);
    if (values.bank !== undefined) return await bank(values, { sloTarget, threads, trainFraction }, out);
    if (!values.trace) throw new InvalidInputError('invalid_flag', '--trace FILE.csv is required');
    const axes = sweep === undefined ? undefined : parseSweep(sweep);
    const traceOptions = { timeColumn: values['time-col'], countColumn: values['count-col'] };
    checkSorted(values.trace, values['time-col']);
    const trace = readTraceFile(values.trace, traceOptions);
    const settings = settingsFrom(values);
    const dir = values.out ?? 'simulation';
    const info = traceInfo(values.trace, trace);
    if (values['walk-forward']) {
      const grid = axes ?? parseSweep([...DEFAULT_WALK_FORWARD_SWEEP]);
      const wf = await withProgress(out, 'replays', walkForwardReplays(grid), (counter) =>
        runWalkForward(trace, settings, { trainFraction, axes: grid, sloTarget, threads, counter }),
      );
      writeWalkForward(dir, info, wf, trainFraction);
      out.out(
        `${walkForwardTable(wf)}\n\nThe evaluated part, every policy:\n\n${reportTable(wf.report)}\n\nAt equal SLO attainment:\n\n${atSloTable(wf.report)}\n\nwrote ${dir}/report.json, ${dir}/report.md, the charts (${dir}/*.svg) and the training sweep (${dir}/sweep.md)\n`,
      );
      return 0;
    }
    if (axes) {
      const result = await withProgress(out, 'replays', sweepReplays(axes), (counter) =>
        runSweep(trace, settings, axes, { sloTarget, threads, counter }),
      );
      writeSweep(dir, info, result, settings.sloMs);
      out.out(`${sweepTable(result)}\n\n${cheapestLine(result)}\n\nwrote ${dir}/sweep.json, ${dir}/sweep.md and ${dir}/pareto.svg\n`);
      return 0;
    }
    const report = await withProgress(out, 'replays', POLICY_NAMES.length + AT_SLO_REPLAYS, async (counter) => {
      const comparison = compare(trace, settings, POLICY_NAMES, counter);
      // The baselines at the SLO target: three bisections sharing the cores (at-slo.ts).
      const pool = Math.min(threads ?? os.availableParallelism(), AT_SLO_BASELINES.length);
      const atSlo = await withReplayThreads(trace, pool, (replay) =>
        baselinesAtSlo(trace, settings, sloTarget, replay, AT_SLO_BASELINES, counter),
      );
      return { ...comparison, atSlo };
    });
    writeReport(dir, info, report);
    out.out(
      `${reportTable(report)}\n\nAt equal SLO attainment:\n\n${atSloTable(report)}\n\nwrote ${dir}/report.json, ${dir}/report.md and the charts (${dir}/*.svg)\n`,
    );
    return 0;
  } catch (err) {
    if (err instanceof InvalidInputError || isParseArgsError(err)) {
      out.err(`warmpool simulate: ${errorMessage(err)}\n`);
      return 2;
    }
    throw err;
  }
}

/**
 * `--sweep` takes every following word up to the next flag (`--sweep standby=0,1 headroom=0.2`),
 * which parseArgs cannot express; it is split off here.
 */
function splitSweep(args: string[]): { flags: string[]; sweep: string[] | undefined } {
  const at = args.indexOf('--sweep');
  if (at < 0) return { flags: args, sweep: undefined };
  let end = at + 1;
  while (end < args.length && !(args[end] as string).startsWith('--')) end++;
  return { flags: [...args.slice(0, at), ...args.slice(end)], sweep: args.slice(at + 1, end) };
}

type Values = { [K in Exclude<keyof typeof OPTIONS, 'sweep'>]?: string | boolean };

const MATRIX_ONLY = ['traces'] as const;
const SHARED_ONLY = [
  'model-col',
  'split-models',
  'generate-models',
  'rate',
  'model-load-s',
  'models-per-worker',
  'memory-mb',
  'model-memory-mb',
] as const;
const NOT_SHARED = ['matrix', 'bank', 'walk-forward', 'self-tuning', 'threads', 'batch-profile', 'cold-start-phases'] as const;
const MATRIX_OR_BANK = ['quick', 'cell-budget-s'] as const;

/** Flags that belong to one mode are refused in the others, rather than silently ignored. */
function checkModes(v: Values, sweep: string[] | undefined): void {
  const bank = v.bank !== undefined;
  if (!v['shared-pool']) {
    const stray = SHARED_ONLY.find((f) => v[f] !== undefined);
    if (stray) throw new InvalidInputError('invalid_flag', `--${stray} applies to --shared-pool only`);
  } else {
    const clash = NOT_SHARED.find((f) => v[f] !== undefined);
    if (clash || sweep !== undefined) throw new InvalidInputError('invalid_flag', `--shared-pool does not take --${clash ?? 'sweep'}`);
    if (v['split-models'] !== undefined && v['model-col'] !== undefined)
      throw new InvalidInputError('invalid_flag', '--split-models splits a single-model trace: drop --model-col (or --split-models)');
    if (v['generate-models'] !== undefined && (v.trace !== undefined || v['model-col'] !== undefined || v['split-models'] !== undefined))
      throw new InvalidInputError('invalid_flag', '--generate-models makes its own world: drop --trace, --model-col and --split-models');
    if (v.rate !== undefined && v['generate-models'] === undefined)
      throw new InvalidInputError('invalid_flag', '--rate applies to --generate-models only');
  }
  if (!v.matrix) {
    const stray = MATRIX_ONLY.find((f) => v[f] !== undefined);
    if (stray) throw new InvalidInputError('invalid_flag', `--${stray} applies to --matrix only`);
  }
  if (!v.matrix && !bank) {
    const stray = MATRIX_OR_BANK.find((f) => v[f] !== undefined);
    if (stray) throw new InvalidInputError('invalid_flag', `--${stray} applies to --matrix and --bank only`);
  }
  if (bank && (v.matrix || v.trace !== undefined || v['walk-forward'] || sweep !== undefined || v.policy !== undefined))
    throw new InvalidInputError(
      'invalid_flag',
      '--bank generates its worlds and replays the default policy walk-forward: drop --matrix, --trace, --walk-forward, --sweep and --policy',
    );
  if (v['train-fraction'] !== undefined && !v.matrix && !bank && !v['walk-forward'])
    throw new InvalidInputError('invalid_flag', '--train-fraction applies to --walk-forward, --matrix and --bank only');
  if (v.matrix && v['walk-forward']) throw new InvalidInputError('invalid_flag', '--matrix is walk-forward already: drop --walk-forward');
  if (v.matrix && (sweep !== undefined || v.policy !== undefined))
    throw new InvalidInputError('invalid_flag', '--matrix replays the default policy only: drop --sweep and --policy');
}

async function matrix(
  v: Values,
  o: { sloTarget: number; threads: number | undefined; trainFraction: number },
  out: SimulateOut,
): Promise<number> {
  const where = str(v, 'traces') ?? str(v, 'trace');
  if (!where) throw new InvalidInputError('invalid_flag', '--matrix needs --traces DIR (every .csv in it) or --trace FILE');
  const { matrixMain, traceFiles } = await import('./simulate-matrix.ts');
  const files = traceFiles(where);
  for (const file of files) checkSorted(file, str(v, 'time-col'));
  return matrixMain(
    {
      files,
      timeColumn: str(v, 'time-col'),
      countColumn: str(v, 'count-col'),
      scaler: SIMULATE_DEFAULTS,
      given: givenFrom(v),
      coldStartCv: num(v, 'cold-start-cv', { min: 0 }) ?? 0,
      trainFraction: o.trainFraction,
      sloTarget: o.sloTarget,
      threads: o.threads ?? os.availableParallelism(),
      cellCpuBudgetMs: (num(v, 'cell-budget-s', { min: 0, exclusive: true }) ?? DEFAULT_CELL_BUDGET_S) * 1000,
      quick: v.quick === true,
      dir: str(v, 'out') ?? 'simulation-matrix',
    },
    out,
  );
}

async function sharedPool(v: Values, sloTarget: number, out: SimulateOut): Promise<number> {
  const trace = str(v, 'trace');
  if (trace) checkSorted(trace, str(v, 'time-col'));
  const { sharedPoolMain } = await import('./simulate-shared.ts');
  const given = givenFrom(v);
  return sharedPoolMain(
    {
      ...(trace ? { trace } : {}),
      ...optional('timeColumn', str(v, 'time-col')),
      ...optional('countColumn', str(v, 'count-col')),
      ...optional('modelColumn', str(v, 'model-col')),
      ...optional('splitModels', num(v, 'split-models', { min: 1, max: 10_000, integer: true })),
      ...optional('generateModels', num(v, 'generate-models', { min: 1, max: 10_000, integer: true })),
      ...optional('rate', num(v, 'rate', { min: 0, exclusive: true })),
      ...optional('modelLoadS', num(v, 'model-load-s', { min: 0 })),
      ...optional('modelsPerWorker', num(v, 'models-per-worker', { min: 1, integer: true })),
      ...optional('memoryMb', num(v, 'memory-mb', { min: 0, exclusive: true })),
      ...optional('modelMemoryMb', num(v, 'model-memory-mb', { min: 0, exclusive: true })),
      given,
      sloTarget,
      dir: str(v, 'out') ?? 'simulation-shared',
    },
    out,
  );
}

function optional<K extends string, T>(key: K, value: T | undefined): Partial<Record<K, T>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, T>);
}

async function bank(
  v: Values,
  o: { sloTarget: number; threads: number | undefined; trainFraction: number },
  out: SimulateOut,
): Promise<number> {
  const worlds = num(v, 'bank', { min: 1, max: 10_000, integer: true }) as number;
  const days = v.quick === true ? 1 : (num(v, 'days', { min: 1, max: 60 }) ?? DEFAULT_BANK_DAYS);
  const { days: _length, ...given } = givenFrom(v);
  const { bankMain } = await import('./simulate-bank.ts');
  return bankMain(
    {
      worlds,
      seed: num(v, 'seed', { min: 0, integer: true }) ?? 1,
      days,
      scaler: SIMULATE_DEFAULTS,
      given,
      coldStartCv: num(v, 'cold-start-cv', { min: 0 }) ?? 0,
      trainFraction: o.trainFraction,
      sloTarget: o.sloTarget,
      threads: o.threads ?? os.availableParallelism(),
      cellCpuBudgetMs: (num(v, 'cell-budget-s', { min: 0, exclusive: true }) ?? DEFAULT_CELL_BUDGET_S) * 1000,
      dir: str(v, 'out') ?? 'simulation-bank',
    },
    out,
  );
}

/** A string flag's value (boolean flags are read as `v.flag === true`). */
function str(v: Values, flag: keyof Values): string | undefined {
  const x = v[flag];
  return typeof x === 'string' ? x : undefined;
}

function settingsFrom(v: Values): SimulationSettings {
  return defaultSettings(SIMULATE_DEFAULTS, givenFrom(v));
}

/** The settings the flags give; a flag not given is left out, so the defaults stand. */
function givenFrom(v: Values): Partial<SimulationSettings> {
  const sloMs = num(v, 'slo-ms', { min: 1 });
  const coldS = num(v, 'cold-start-s', { min: 0 });
  const tickS = num(v, 'tick-s', { min: 0.1 });
  const policyFile = str(v, 'policy');
  const profileFile = str(v, 'batch-profile');
  const phases = str(v, 'cold-start-phases');
  const policy = policyFile ? readPolicyFile(policyFile) : undefined;
  const profile = profileFile ? readBatchProfile(profileFile) : undefined;
  const cv = num(v, 'cold-start-cv', { min: 0 }) ?? 0;
  const base = coldStartModel(coldS === undefined ? SIMULATE_DEFAULTS.coldStartDefaultMs : coldS * 1000, cv);
  return {
    scale: num(v, 'scale', { min: 0, exclusive: true }),
    sloMs,
    coldStart: phases ? parsePhases(phases, base) : base,
    workerRps: num(v, 'worker-rps', { min: 0, exclusive: true }),
    batchProfile: profile?.points,
    jobOverheadMs: num(v, 'job-overhead-ms', { min: 0 }),
    maxBatch: num(v, 'max-batch', { min: 1, integer: true }) ?? profile?.chosenBatch,
    tickMs: tickS === undefined ? undefined : tickS * 1000,
    seed: num(v, 'seed', { min: 0, integer: true }),
    pattern: pattern(v),
    historyDays: num(v, 'history-days', { min: 0 }),
    days: num(v, 'days', { min: 0, exclusive: true }),
    standbyPrice: num(v, 'standby-price', { min: 0 }),
    policy: policy as PolicySettings | undefined,
    selfTuning:
      v['self-tuning'] === true
        ? {
            retuneIntervalMs: SIMULATE_DEFAULTS.retuneIntervalMs,
            sloTarget: num(v, 'slo-target', { min: 0, max: 1 }) ?? SIMULATE_DEFAULTS.sloTarget,
          }
        : undefined,
  };
}

/** Drops undefined values, so defaults stand where a flag was not given. */
function num(
  v: Values,
  flag: keyof Values,
  rule: { min: number; max?: number; exclusive?: boolean; integer?: boolean },
): number | undefined {
  const text = str(v, flag);
  if (text === undefined) return undefined;
  const x = Number(text);
  const low = rule.exclusive ? x <= rule.min : x < rule.min;
  const bad = !Number.isFinite(x) || low || (rule.max !== undefined && x > rule.max) || (rule.integer && !Number.isInteger(x));
  if (bad) {
    const range = `${rule.exclusive ? '>' : '≥'} ${rule.min}${rule.max === undefined ? '' : ` and ≤ ${rule.max}`}`;
    throw new InvalidInputError('invalid_flag', `--${flag} must be ${rule.integer ? 'an integer' : 'a number'} ${range}, got "${text}"`);
  }
  return x;
}

function readBatchProfile(file: string): { points: Array<{ batch: number; ms: number }>; chosenBatch?: number } {
  let json: unknown;
  try {
    json = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new InvalidInputError('invalid_flag', `--batch-profile ${file}: ${errorMessage(err)}`, { cause: err });
  }
  const profile = batchPointsFrom(json);
  if (!profile) {
    throw new InvalidInputError(
      'invalid_flag',
      `--batch-profile ${file}: expected a heartbeat, its batchProfile ({entries: [{batch, p50Ms}]}) or [{batch, ms}]`,
    );
  }
  return profile;
}

function pattern(v: Values): ArrivalPattern | undefined {
  const kind = str(v, 'arrivals');
  if (kind === undefined) return v.cv === undefined ? undefined : { kind: 'gamma', cv: num(v, 'cv', { min: 0, exclusive: true }) ?? 1 };
  if (kind === 'uniform' || kind === 'poisson') return { kind };
  if (kind === 'gamma') return { kind, cv: num(v, 'cv', { min: 0, exclusive: true }) ?? 2 };
  throw new InvalidInputError('invalid_flag', `--arrivals must be uniform, poisson or gamma, got "${kind}"`);
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
    throw new InvalidInputError('invalid_trace', `cannot read trace ${file}: ${errorMessage(err)}`, { cause: err });
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
