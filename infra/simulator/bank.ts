/**
 * The bank of random worlds (issue 28 §4): N worlds from world-bank.ts, each scored like a matrix
 * cell (matrix.ts scoreWorld: the DEFAULT policy walk-forward, the baselines as-is and at the SLO
 * target) and judged against the issue's targets:
 * - SLO attainment ≥ the target, or, where even the oracle cannot reach it, within ORACLE_SLACK
 *   of what the oracle reached;
 * - cost ≤ 1.0× the cheaper of reactive and static-peak, each at its cheapest setting that meets
 *   the target (the simple scalers an infra team would size by hand), and ≤ 1.3× the oracle's;
 * - no more cold starts than the reactive baseline as-is (the KEDA-like scaler run today).
 * No constant is fitted to a bank: its worlds are drawn, so a seed not tuned on is a fresh test.
 */
import { withKeptThreads } from './bounded-replay.ts';
import { coldStartModel } from './cold-start.ts';
import { defaultSettings, type SimulationSettings } from './compare.ts';
import { inParallel } from './in-parallel.ts';
import { type MatrixOptions, scoreWorld, type WorldScore } from './matrix.ts';
import { writeReportFiles } from './report-files.ts';
import type { BankFamily, BankWorld } from './world-bank.ts';

export const BANK_TARGETS = { costVsSimpleAtSlo: 1.0, costVsOracleAtSlo: 1.3, oracleSlack: 0.005 } as const;

/** The matrix's options (each world's own settings override `given`), told of each world as it finishes. */
export interface BankOptions
  extends Pick<MatrixOptions, 'scaler' | 'given' | 'coldStartCv' | 'trainFraction' | 'sloTarget' | 'threads' | 'cellCpuBudgetMs'> {
  onWorld?: (cell: BankCell, done: number, total: number) => void;
}

export interface BankCell extends WorldScore {
  world: string;
  family: BankFamily;
  params: Record<string, number>;
  coldStartS: number;
  sloS: number;
  workerRps: number;
  maxBatch: number;
  /** The cheaper of reactive and static-peak at the SLO target, and the default's cost over it. */
  simple: { name: 'reactive' | 'static-peak'; cost: number } | null;
  costVsSimpleAtSlo: number | null;
  costVsOracleAtSlo: number | null;
  coldStarts: { predictive: number; reactive: number } | null;
  misses: string[];
}

export interface BankResult {
  seed: number;
  sloTarget: number;
  targets: typeof BANK_TARGETS;
  trainFraction: number;
  cells: BankCell[];
}

/** A world's settings: its cold start, SLO, jobs and within-minute pattern over the defaults and the flags. */
export function bankSettings(w: BankWorld, o: Pick<BankOptions, 'scaler' | 'given' | 'coldStartCv'>): SimulationSettings {
  return defaultSettings(o.scaler, {
    ...o.given,
    scale: 1,
    pattern: w.pattern,
    sloMs: w.sloS * 1000,
    coldStart: coldStartModel(w.coldStartS * 1000, o.coldStartCv),
    workerRps: w.workerRps,
    maxBatch: w.maxBatch,
    jobOverheadMs: w.jobOverheadMs,
    batchProfile: undefined,
  });
}

export async function runBank(worlds: readonly BankWorld[], seed: number, o: BankOptions): Promise<BankResult> {
  const cells = await withKeptThreads((threads) =>
    inParallel(
      worlds,
      o.threads,
      async (w) => judgeWorld(w, await scoreWorld(w.trace, bankSettings(w, o), o, threads), o.sloTarget),
      o.onWorld,
    ),
  );
  return { seed, sloTarget: o.sloTarget, targets: BANK_TARGETS, trainFraction: o.trainFraction, cells };
}

/** The ratios and the misses of one scored world. */
export function judgeWorld(w: BankWorld, score: WorldScore, sloTarget: number): BankCell {
  const p = score.predictive;
  const at = score.atSlo?.baselines;
  const simple = (['reactive', 'static-peak'] as const)
    .map((name) => ({ name, cost: at?.[name]?.met ? (at[name]?.cost ?? null) : null }))
    .filter((b): b is { name: 'reactive' | 'static-peak'; cost: number } => b.cost !== null && b.cost > 0)
    .sort((a, b) => a.cost - b.cost)[0];
  const oracle = at?.oracle;
  const oracleCost = oracle?.met && oracle.cost !== null && oracle.cost > 0 ? oracle.cost : null;
  const reactive = score.baselines.find((b) => b.name === 'reactive');
  const cell: BankCell = {
    world: w.name,
    family: w.family,
    params: w.params,
    coldStartS: w.coldStartS,
    sloS: w.sloS,
    workerRps: w.workerRps,
    maxBatch: w.maxBatch,
    ...score,
    simple: simple ?? null,
    costVsSimpleAtSlo: p && simple ? p.cost / simple.cost : null,
    costVsOracleAtSlo: p && oracleCost ? p.cost / oracleCost : null,
    coldStarts: p && reactive ? { predictive: p.coldStarts, reactive: reactive.coldStarts } : null,
    misses: [],
  };
  cell.misses = missesOf(cell, sloTarget);
  return cell;
}

function missesOf(c: BankCell, sloTarget: number): string[] {
  const p = c.predictive;
  if (!p) return ['no figures (see errors)'];
  const misses: string[] = [];
  const oracle = c.atSlo?.baselines.oracle;
  // Where the oracle cannot meet the target, the bar is what it reached, less the slack.
  const bar = oracle && !oracle.met ? Math.min(sloTarget, oracle.sloAttainment - BANK_TARGETS.oracleSlack) : sloTarget;
  if (p.sloAttainment < bar)
    misses.push(`SLO ${pct(p.sloAttainment)} < ${pct(bar)}${bar < sloTarget ? " (the oracle's, less 0.5 point)" : ''}`);
  const s = c.costVsSimpleAtSlo;
  if (s !== null && s > BANK_TARGETS.costVsSimpleAtSlo)
    misses.push(`cost ${times(s)} ${c.simple?.name} at SLO > ${times(BANK_TARGETS.costVsSimpleAtSlo)}`);
  const o = c.costVsOracleAtSlo;
  if (o !== null && o > BANK_TARGETS.costVsOracleAtSlo)
    misses.push(`cost ${times(o)} oracle at SLO > ${times(BANK_TARGETS.costVsOracleAtSlo)}`);
  const k = c.coldStarts;
  if (k && k.predictive > k.reactive) misses.push(`cold starts ${k.predictive} > reactive's ${k.reactive}`);
  return misses;
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
const times = (x: number) => `${x.toFixed(2)}×`;
const ratio = (x: number | null) => (x === null ? '—' : times(x));

/** Worlds and worlds meeting every target, per family and in all. */
export function bankSummary(r: BankResult): Array<{ family: string; worlds: number; met: number }> {
  const families = [...new Set(r.cells.map((c) => c.family))];
  const row = (family: string, cells: BankCell[]) => ({
    family,
    worlds: cells.length,
    met: cells.filter((c) => c.predictive && c.misses.length === 0).length,
  });
  return [
    ...families.map((f) =>
      row(
        f,
        r.cells.filter((c) => c.family === f),
      ),
    ),
    row('all', r.cells),
  ];
}

export function bankMarkdown(r: BankResult): string {
  const summary = bankSummary(r).map((s) => `| ${s.family} | ${s.worlds} | ${s.met} | ${pct(s.worlds ? s.met / s.worlds : 0)} |`);
  const rows = r.cells.map((c) => {
    const p = c.predictive;
    const k = c.coldStarts;
    return `| ${c.world} | ${c.coldStartS.toFixed(0)} s | ${c.sloS.toFixed(1)} s | ${c.maxBatch} × ${c.workerRps.toPrecision(3)}/s | ${p ? pct(p.sloAttainment) : '—'} | ${ratio(c.costVsSimpleAtSlo)}${c.simple ? ` ${c.simple.name}` : ''} | ${ratio(c.costVsOracleAtSlo)} | ${k ? `${k.predictive} / ${k.reactive}` : '—'} | ${c.misses.length === 0 ? 'none' : c.misses.join('; ')} |`;
  });
  return [
    `# Bank of random worlds (seed ${r.seed}): the default policy, walk-forward`,
    '',
    `Each world is split at ${r.trainFraction} of its replay: the part before is forecaster history, only the part after is scored. Targets: SLO attainment ≥ ${pct(r.sloTarget)} (or within 0.5 point of the oracle where it cannot); cost ≤ ${times(BANK_TARGETS.costVsSimpleAtSlo)} the cheaper of reactive and static-peak at the SLO target and ≤ ${times(BANK_TARGETS.costVsOracleAtSlo)} the oracle's; no more cold starts than reactive as-is.`,
    '',
    '| family | worlds | met every target | share |',
    '|---|---|---|---|',
    ...summary,
    '',
    '| world | cold start | SLO | jobs (batch × rows/s) | SLO met | cost ÷ simple at SLO | cost ÷ oracle at SLO | cold starts: default / reactive | misses |',
    `|${'---|'.repeat(9)}`,
    ...rows,
    '',
  ].join('\n');
}

/** bank.md and bank.json in `dir`. */
export function writeBank(dir: string, r: BankResult): void {
  writeReportFiles(dir, 'bank', r, bankMarkdown(r));
}
