/**
 * The world matrix (issue 17 §3): each trace through a grid of worlds — cold start 30 / 90 / 300 s
 * × SLO 5 / 30 / 120 s × two kinds of job — with the DEFAULT policy only, walk-forward (scored on
 * the part after the split only, walk-forward.ts; nothing is tuned, so the part before is the
 * forecaster's history), and one row per world: the default's SLO attainment, its cost ÷ reactive
 * and ÷ oracle each at the SLO target (at-slo.ts), its cold starts per day and jobs delayed by a
 * cold start against the reactive baseline as-is (the KEDA-like scaler a user runs today), and
 * which of the issue's targets it misses.
 *
 * Jobs: `short-batched` is the simulator's default service model (or the one the flags give);
 * `long-unbatched` is one job at a time taking 20 s (batch 1), as on a GPU serving a large model.
 * The trace's amplitude is the trace's own (`scale`, per trace), the same for both kinds: the
 * short jobs then ask for few workers, the long ones for tens — both ends of a pool.
 *
 * CPU: every cell is two calls on a sweep thread of its own under a CPU-time budget
 * (bounded-replay.ts): the default policy's replay, and the baselines as-is with their searches
 * at the SLO target; at most `threads` calls run at once. A call past its budget is stopped and
 * its cell says so instead of a figure. `quick` cuts each trace to its first day first (tests).
 */
import type { ScalerTuning } from '../kernel/config.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import type { ArrivalPattern } from './arrivals.ts';
import type { AtSloReport } from './at-slo.ts';
import { type ReplayThreads, replayBounded, searchAtSloBounded, withKeptThreads } from './bounded-replay.ts';
import { coldStartModel } from './cold-start.ts';
import { defaultSettings, type SimulationSettings } from './compare.ts';
import { inParallel } from './in-parallel.ts';
import { writeReportFiles } from './report-files.ts';
import type { PolicySummary } from './sweep.ts';
import type { Trace } from './trace.ts';
import { evaluationSettings, splitMinutes, trainingTrace } from './walk-forward.ts';

export const MATRIX_COLD_STARTS_S = [30, 90, 300] as const;
export const MATRIX_SLOS_S = [5, 30, 120] as const;
export const JOB_KINDS = ['short-batched', 'long-unbatched'] as const;
export type JobKind = (typeof JOB_KINDS)[number];

/** Long unbatched jobs: batch 1, 20 s each (linear service at 0.05 rows/s: 2 s fixed + 18 s). */
const LONG_JOBS: Partial<SimulationSettings> = { workerRps: 0.05, maxBatch: 1, batchProfile: undefined, jobOverheadMs: 0 };

/** What the default policy must do in every cell (issue 17, "Must show"); the SLO target is the run's. */
export const MATRIX_TARGETS = { costVsReactiveAtSlo: 1.0, costVsOracleAtSlo: 1.3 } as const;

/** `quick`: each trace cut to its first day. */
export const QUICK_MINUTES = 1440;

/** One cell's world. */
export interface MatrixWorld {
  coldStartS: number;
  sloS: number;
  jobs: JobKind;
}

/** A trace as the matrix replays it: its amplitude and within-minute pattern, fixed for every world. */
export interface MatrixTrace {
  name: string;
  trace: Trace;
  scale: number;
  pattern: ArrivalPattern;
}

/**
 * The shared traces' amplitudes and within-minute patterns (docs/SIMULATOR.md): replays of a few
 * million jobs, and ServeGen's within-window CV of about 2. Other traces: scale 1, Poisson.
 */
const KNOWN_TRACES: Array<{ prefix: string; scale: number; pattern: ArrivalPattern }> = [
  { prefix: 'nasa_http', scale: 1, pattern: { kind: 'poisson' } },
  { prefix: 'servegen_language_m-large', scale: 0.01, pattern: { kind: 'gamma', cv: 2 } },
  { prefix: 'servegen_language_m-small', scale: 0.002, pattern: { kind: 'gamma', cv: 2 } },
  { prefix: 'azure_llm', scale: 1, pattern: { kind: 'poisson' } },
];

/** The amplitude and pattern a trace file is replayed with unless flags say otherwise. */
export function traceWorld(fileName: string): { scale: number; pattern: ArrivalPattern } {
  const known = KNOWN_TRACES.find((k) => fileName.startsWith(k.prefix));
  return known ? { scale: known.scale, pattern: known.pattern } : { scale: 1, pattern: { kind: 'poisson' } };
}

export interface MatrixOptions {
  /** The scaler's tuning the default policy runs with (infra/kernel/config.ts SIMULATE_DEFAULTS). */
  scaler: ScalerTuning;
  /** World settings from flags (tick, seed, history, standby price, …); the grid's own override them. */
  given: Partial<SimulationSettings>;
  coldStartCv: number;
  trainFraction: number;
  sloTarget: number;
  /** Calls running at once, each on its own thread. */
  threads: number;
  /** CPU time one call (a replay, or the baselines' searches) may use. */
  cellCpuBudgetMs: number;
  quick?: boolean;
  /** The grid (default: the issue's). */
  worlds?: MatrixWorld[];
  /** Told of each cell as it finishes (progress). */
  onCell?: (cell: MatrixCell, done: number, total: number) => void;
}

export interface MatrixCell extends MatrixWorld {
  trace: string;
  /** Minutes scored: [split, to). */
  evaluated: { from: number; to: number; days: number };
  predictive: PolicySummary | null;
  /** Reactive, static-peak and oracle as-is. */
  baselines: PolicySummary[];
  atSlo: AtSloReport | null;
  /** The default's cost ÷ each baseline's cost at the SLO; null where the baseline cannot meet it. */
  costVsReactiveAtSlo: number | null;
  costVsOracleAtSlo: number | null;
  coldStartsPerDay: { predictive: number; reactive: number } | null;
  delayedByColdStart: { predictive: number; reactive: number } | null;
  /** The targets the default misses here, each with its figures; empty when it meets them all. */
  misses: string[];
  /** Why a figure is missing (a call over its budget). */
  errors: string[];
}

export interface MatrixResult {
  sloTarget: number;
  targets: typeof MATRIX_TARGETS;
  trainFraction: number;
  quick: boolean;
  traces: Array<{ name: string; scale: number; pattern: ArrivalPattern; minutes: number }>;
  cells: MatrixCell[];
}

/** The issue's grid: every cold start × SLO × kind of job. */
export function matrixWorlds(): MatrixWorld[] {
  return MATRIX_COLD_STARTS_S.flatMap((coldStartS) =>
    MATRIX_SLOS_S.flatMap((sloS) => JOB_KINDS.map((jobs) => ({ coldStartS, sloS, jobs }))),
  );
}

/** A cell's settings: the world's cold start, SLO and jobs over the trace's amplitude and the flags. */
export function cellSettings(
  t: MatrixTrace,
  w: MatrixWorld,
  o: Pick<MatrixOptions, 'scaler' | 'given' | 'coldStartCv'>,
): SimulationSettings {
  return defaultSettings(o.scaler, {
    ...o.given,
    scale: t.scale,
    pattern: t.pattern,
    sloMs: w.sloS * 1000,
    coldStart: coldStartModel(w.coldStartS * 1000, o.coldStartCv),
    ...(w.jobs === 'long-unbatched' ? LONG_JOBS : {}),
  });
}

export async function runMatrix(traces: readonly MatrixTrace[], o: MatrixOptions): Promise<MatrixResult> {
  if (o.given.policy !== undefined)
    throw new InvalidInputError('invalid_flag', 'the matrix replays the default policy only: drop --policy');
  const worlds = o.worlds ?? matrixWorlds();
  const cut = traces.map((t) =>
    o.quick && t.trace.series.perMinute.length > QUICK_MINUTES ? { ...t, trace: trainingTrace(t.trace, QUICK_MINUTES) } : t,
  );
  const jobs = cut.flatMap((t) => worlds.map((w) => ({ t, w })));
  const cells = await withKeptThreads((threads) => inParallel(jobs, o.threads, ({ t, w }) => runCell(t, w, o, threads), o.onCell));
  return {
    sloTarget: o.sloTarget,
    targets: MATRIX_TARGETS,
    trainFraction: o.trainFraction,
    quick: o.quick === true,
    traces: cut.map((t) => ({ name: t.name, scale: t.scale, pattern: t.pattern, minutes: t.trace.series.perMinute.length })),
    cells,
  };
}

/** One world on one trace, scored (scoreWorld) and judged. */
async function runCell(t: MatrixTrace, w: MatrixWorld, o: MatrixOptions, threads: ReplayThreads): Promise<MatrixCell> {
  const scored = await scoreWorld(t.trace, cellSettings(t, w, o), o, threads);
  return judge({ ...w, trace: t.name, ...scored, sloTarget: o.sloTarget });
}

export type WorldScore = Pick<MatrixCell, 'evaluated' | 'predictive' | 'baselines' | 'atSlo' | 'errors'>;

/**
 * A world scored walk-forward: the default policy's replay of the part after the split, then the
 * baselines as-is and their searches at the SLO target, each call on a thread of its own under
 * the CPU budget (a call past it leaves its figure null and says why in `errors`), on `threads`
 * where given (a run of many worlds shares them).
 */
export async function scoreWorld(
  trace: Trace,
  base: SimulationSettings,
  o: Pick<MatrixOptions, 'trainFraction' | 'sloTarget' | 'cellCpuBudgetMs'>,
  threads?: ReplayThreads,
): Promise<WorldScore> {
  const part = splitMinutes(trace, base, o.trainFraction);
  const s = evaluationSettings(base, part);
  const budget = { cpuBudgetMs: o.cellCpuBudgetMs, threads };
  const errors: string[] = [];
  const stopped = (what: string) => (err: unknown) => {
    errors.push(`${what}: ${err instanceof Error ? err.message : String(err)}`);
    return null;
  };
  const predictive = await replayBounded(trace, [{ settings: s, only: ['predictive'] }], budget).then(
    (r) => summary(r[0]?.[0]),
    stopped('the default policy'),
  );
  const searched = await searchAtSloBounded(trace, s, o.sloTarget, budget).catch(stopped('the baselines'));
  const days = (part.to - part.split) / 1440;
  return {
    evaluated: { from: part.split, to: part.to, days },
    predictive,
    baselines: searched?.asIs ?? [],
    atSlo: searched?.atSlo ?? null,
    errors,
  };
}

function summary(p: (PolicySummary & { series?: unknown }) | undefined): PolicySummary | null {
  if (!p) return null;
  const { series: _series, ...rest } = p;
  return rest;
}

type Measured = Pick<MatrixCell, 'trace' | 'evaluated' | 'predictive' | 'baselines' | 'atSlo' | 'errors'> &
  MatrixWorld & { sloTarget: number };

/** The ratios and the misses, from a cell's replays. */
export function judge(m: Measured): MatrixCell {
  const { sloTarget, ...cell } = m;
  const p = m.predictive;
  const reactive = m.baselines.find((b) => b.name === 'reactive');
  const atCost = (name: 'reactive' | 'oracle') => m.atSlo?.baselines[name]?.cost ?? null;
  const ratio = (yardstick: number | null) => (p && yardstick !== null && yardstick > 0 ? p.cost / yardstick : null);
  const perDay = (n: number) => n / m.evaluated.days;
  const out: MatrixCell = {
    ...cell,
    costVsReactiveAtSlo: ratio(atCost('reactive')),
    costVsOracleAtSlo: ratio(atCost('oracle')),
    coldStartsPerDay: p && reactive ? { predictive: perDay(p.coldStarts), reactive: perDay(reactive.coldStarts) } : null,
    delayedByColdStart: p && reactive ? { predictive: p.jobsDelayedByColdStart, reactive: reactive.jobsDelayedByColdStart } : null,
    misses: [],
  };
  out.misses = missesOf(out, sloTarget);
  return out;
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
const times = (x: number) => `${x.toFixed(2)}×`;
/** Three significant digits: one cold start in a month is 0.0333/day, not 0.0. */
const perDay = (x: number) => String(Number(x.toPrecision(3)));

function missesOf(c: MatrixCell, sloTarget: number): string[] {
  const p = c.predictive;
  if (!p) return ['no figures (see errors)'];
  const misses: string[] = [];
  if (p.sloAttainment < sloTarget) misses.push(`SLO ${pct(p.sloAttainment)} < ${pct(sloTarget)}`);
  const r = c.costVsReactiveAtSlo;
  if (r !== null && r > MATRIX_TARGETS.costVsReactiveAtSlo)
    misses.push(`cost ${times(r)} reactive at SLO > ${times(MATRIX_TARGETS.costVsReactiveAtSlo)}`);
  const o = c.costVsOracleAtSlo;
  if (o !== null && o > MATRIX_TARGETS.costVsOracleAtSlo)
    misses.push(`cost ${times(o)} oracle at SLO > ${times(MATRIX_TARGETS.costVsOracleAtSlo)}`);
  const d = c.delayedByColdStart;
  if (d && d.predictive > 0 && d.predictive >= d.reactive) misses.push(`delayed by cold start ${d.predictive} ≥ reactive's ${d.reactive}`);
  const k = c.coldStartsPerDay;
  if (k && k.predictive > k.reactive) misses.push(`cold starts ${perDay(k.predictive)}/day > reactive's ${perDay(k.reactive)}/day`);
  return misses;
}

const TRACE_LABEL = (name: string) => name.replace(/\.csv$/, '');

/** One markdown table, a row per cell; `—` where a baseline cannot meet the target (no yardstick) or a figure is missing. */
export function matrixTable(r: MatrixResult): string {
  const header =
    '| trace | cold start | SLO | jobs | SLO met (default) | cost ÷ reactive at SLO | cost ÷ oracle at SLO | cold starts/day: default / reactive | delayed by cold start: default / reactive | misses |';
  const ratio = (x: number | null) => (x === null ? '—' : times(x));
  const rows = r.cells.map((c) => {
    const k = c.coldStartsPerDay;
    const d = c.delayedByColdStart;
    return `| ${TRACE_LABEL(c.trace)} | ${c.coldStartS} s | ${c.sloS} s | ${c.jobs} | ${c.predictive ? pct(c.predictive.sloAttainment) : '—'} | ${ratio(c.costVsReactiveAtSlo)} | ${ratio(c.costVsOracleAtSlo)} | ${k ? `${perDay(k.predictive)} / ${perDay(k.reactive)}` : '—'} | ${d ? `${int(d.predictive)} / ${int(d.reactive)}` : '—'} | ${c.misses.length === 0 ? 'none' : c.misses.join('; ')} |`;
  });
  return [header, `|${'---|'.repeat(10)}`, ...rows].join('\n');
}

const int = (x: number) => Math.round(x).toLocaleString('en-US');

/** What a reader needs beside the table: the cells with no yardstick, any oracle that missed, calls stopped. */
export function matrixNotes(r: MatrixResult): string[] {
  const where = (c: MatrixCell) => `${TRACE_LABEL(c.trace)}, ${c.coldStartS} s / ${c.sloS} s / ${c.jobs}`;
  const notes: string[] = [];
  for (const c of r.cells) {
    for (const name of ['reactive', 'oracle'] as const) {
      const a = c.atSlo?.baselines[name];
      if (a && !a.met) notes.push(`${where(c)}: ${a.reason}.`);
    }
    for (const e of c.errors) notes.push(`${where(c)}: ${e}.`);
  }
  const met = r.cells.filter((c) => c.predictive && c.misses.length === 0).length;
  return [`The default meets every target in ${met} of ${r.cells.length} cells.`, ...notes].map((n) => `- ${n}`);
}

export function matrixMarkdown(r: MatrixResult): string {
  const traces = r.traces
    .map(
      (t) =>
        `${TRACE_LABEL(t.name)} (scale ${t.scale}, ${t.pattern.kind}${t.pattern.kind === 'gamma' ? ` CV ${t.pattern.cv}` : ''}, ${t.minutes} minutes)`,
    )
    .join('; ');
  return [
    '# World matrix: the default policy, walk-forward',
    '',
    `Traces: ${traces}${r.quick ? ' — quick: each cut to its first day' : ''}. Each is split at ${r.trainFraction} of its replay: the part before is forecaster history, only the part after is scored. The default policy, no policy file. Targets: SLO attainment ≥ ${pct(r.sloTarget)}; cost ≤ ${times(r.targets.costVsReactiveAtSlo)} reactive and ≤ ${times(r.targets.costVsOracleAtSlo)} oracle, each at its cheapest setting meeting ${pct(r.sloTarget)}; fewer jobs delayed by cold starts and no more cold starts a day than the reactive baseline as-is.`,
    '',
    matrixTable(r),
    '',
    ...matrixNotes(r),
    '',
  ].join('\n');
}

/** matrix.md and matrix.json in `dir`. */
export function writeMatrix(dir: string, r: MatrixResult): void {
  writeReportFiles(dir, 'matrix', r, matrixMarkdown(r));
}
