/**
 * Walk-forward evaluation (issue 17 §3): a report that cannot flatter itself. The replayable
 * minutes of a trace (after `historyDays`, up to `days`) are split in time at `trainFraction`:
 *
 *   [0, from)       forecaster history only, as in every run;
 *   [from, split)   training: the sweep (sweep.ts) tunes the predictive policy here, and only here;
 *   [split, to)     evaluation: the tuned policy, the default policy and the baselines (as-is and
 *                   at the SLO target, at-slo.ts) are replayed and scored here, and only here.
 *
 * The sweep is handed a trace cut at `split` (trainingTrace), so nothing after the split exists
 * for it — not for the forecaster, not for the oracle's foresight, not for static-peak's peak.
 * Per-minute arrivals are realised from (seed, minute), so a minute realises the same jobs in the
 * cut trace as in the whole one.
 *
 * Warm-up: the evaluated replay starts at the split with the forecaster's history = every minute
 * before it (what a live scaler would have recorded), and each policy's pool as the world starts
 * every replay: warm, sized for the split minute's rate (world.ts `initial()`), with an empty
 * decision memory. No minute of the evaluated part is excluded from scoring. Pool state is not
 * carried over from the training replay: the sweep replays many settings, and which one's state
 * to carry would be a choice that leaks the tuning into the yardsticks.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { InvalidInputError } from '../kernel/errors.ts';
import { AT_SLO_BASELINES, AT_SLO_REPLAYS, type AtSloBaseline, baselinesAtSlo } from './at-slo.ts';
import { writeCharts } from './charts.ts';
import { compare, POLICY_NAMES, type PolicyReport, type SimulationSettings } from './compare.ts';
import { withSettings } from './policy-file.ts';
import { NO_COUNT, type ReplayCounter } from './replay-counter.ts';
import { withReplayThreads } from './replay-pool.ts';
import { type Report, reportJson, reportMarkdown, type TraceInfo } from './report.ts';
import { cheapestMeeting, runSweep, type SweepAxis, type SweepResult, sweepReplays } from './sweep.ts';
import { writeSweep } from './sweep-report.ts';
import type { Trace } from './trace.ts';

const DAY_MIN = 1440;

/** The sweep a walk-forward run tunes over when none is given (`--sweep`). */
export const DEFAULT_WALK_FORWARD_SWEEP = ['standby=0,1,2', 'scaleDownStabilizationMs=60000,300000'] as const;

export const DEFAULT_TRAIN_FRACTION = 0.5;

/** Minute indices of the three parts: history [0, from), training [from, split), evaluation [split, to). */
export interface WalkForwardSplit {
  from: number;
  split: number;
  to: number;
}

/** Splits the replayable minutes at `trainFraction`; both parts must hold at least one minute. */
export function splitMinutes(trace: Trace, s: SimulationSettings, trainFraction: number): WalkForwardSplit {
  const length = trace.series.perMinute.length;
  const from = Math.min(length, Math.round(s.historyDays * DAY_MIN));
  const to = s.days === undefined ? length : Math.min(length, from + Math.round(s.days * DAY_MIN));
  const split = from + Math.round((to - from) * trainFraction);
  if (!(trainFraction > 0 && trainFraction < 1) || split <= from || split >= to) {
    throw new InvalidInputError(
      'invalid_flag',
      `--train-fraction ${trainFraction} leaves no minute to ${split <= from ? 'train on' : 'evaluate'}: the replay covers minutes ${from}–${to} of the trace`,
    );
  }
  return { from, split, to };
}

/** The trace as the sweep sees it: every minute from the split on is cut away. */
export function trainingTrace(trace: Trace, split: number): Trace {
  return {
    series: { startMs: trace.series.startMs, perMinute: trace.series.perMinute.slice(0, split) },
    missing: trace.missing.slice(0, split),
    rows: trace.rows,
  };
}

/** Settings replaying the training part [from, split). */
export function trainingSettings(s: SimulationSettings, p: WalkForwardSplit): SimulationSettings {
  return { ...s, days: (p.split - p.from) / DAY_MIN };
}

/** Settings replaying the evaluated part [split, to), everything before it history. */
export function evaluationSettings(s: SimulationSettings, p: WalkForwardSplit): SimulationSettings {
  return { ...s, historyDays: p.split / DAY_MIN, days: (p.to - p.split) / DAY_MIN };
}

/** The setting the training sweep chose, and whether it met the target there. */
export interface Tuned {
  /** Index of the chosen point in the sweep's points. */
  index: number;
  setting: Record<string, number>;
  /** false: no point met the target in training; the one with the best attainment was taken. */
  metInTraining: boolean;
}

/**
 * The cheapest point of the grid meeting the target in training; when none does, the one with
 * the best attainment (the cheaper on a tie). Baselines are not candidates: the tuned policy is
 * the predictive policy, evaluated beside them.
 */
export function chooseSetting(sweep: SweepResult): Tuned {
  const results = sweep.points.map((p) => p.result);
  const meeting = cheapestMeeting(results, sweep.sloTarget);
  let index = meeting ?? 0;
  if (meeting === undefined) {
    results.forEach((r, i) => {
      const best = results[index] as (typeof results)[number];
      if (r.sloAttainment > best.sloAttainment || (r.sloAttainment === best.sloAttainment && r.cost < best.cost)) index = i;
    });
  }
  const point = sweep.points[index];
  if (!point) throw new Error('the training sweep has no points');
  return { index, setting: point.setting, metInTraining: meeting !== undefined };
}

/** The tuned policy's settings: the chosen point over the policy the run was given. */
export function tunedSettings(s: SimulationSettings, tuned: Tuned): SimulationSettings {
  return { ...s, policy: withSettings(s.policy, tuned.setting) };
}

/** The tuned policy's name in the evaluated report (the default policy keeps `predictive`). */
export const TUNED_POLICY = 'predictive-tuned';

export interface WalkForwardOptions {
  trainFraction: number;
  /** The grid the training sweep tunes over. */
  axes: SweepAxis[];
  sloTarget: number;
  /** Worker threads for the sweep and the baselines' searches; default: the cores. */
  threads?: number;
  /** Hears every replay, the training sweep's included (replay-counter.ts). */
  counter?: ReplayCounter;
}

/** Replays runWalkForward() makes at most: the training sweep, the evaluated policies and the tuned one, the searches. */
export function walkForwardReplays(axes: readonly SweepAxis[]): number {
  return sweepReplays(axes) + POLICY_NAMES.length + 1 + AT_SLO_REPLAYS;
}

export interface WalkForward {
  split: WalkForwardSplit;
  /** The training sweep, as it saw the training part. */
  sweep: SweepResult;
  tuned: Tuned;
  /** The evaluated part: the default policy, the tuned one and the baselines, as-is and at the SLO. */
  report: Report;
}

/** Tunes on the training part, then replays and scores the evaluated part only. */
export async function runWalkForward(trace: Trace, s: SimulationSettings, o: WalkForwardOptions): Promise<WalkForward> {
  const split = splitMinutes(trace, s, o.trainFraction);
  const counter = o.counter ?? NO_COUNT;
  const sweep = await runSweep(trainingTrace(trace, split.split), trainingSettings(s, split), o.axes, {
    sloTarget: o.sloTarget,
    threads: o.threads,
    counter,
  });
  const tuned = chooseSetting(sweep);
  const evaluated = evaluationSettings(s, split);
  const comparison = compare(trace, evaluated, POLICY_NAMES, counter);
  const tunedRun = compare(trace, tunedSettings(evaluated, tuned), ['predictive'], counter).policies[0] as PolicyReport;
  const [predictive, ...baselines] = comparison.policies;
  const policies = [predictive as PolicyReport, { ...tunedRun, name: TUNED_POLICY }, ...baselines];
  const pool = Math.min(o.threads ?? os.availableParallelism(), AT_SLO_BASELINES.length);
  const atSlo = await withReplayThreads(trace, pool, (replay) =>
    baselinesAtSlo(trace, evaluated, o.sloTarget, replay, AT_SLO_BASELINES, counter),
  );
  return { split, sweep, tuned, report: { ...comparison, policies, atSlo } };
}

const MINUTE_MS = 60_000;
const pct = (x: number) => `${(x * 100).toFixed(3)} %`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');
const iso = (startMs: number, minute: number) => new Date(startMs + minute * MINUTE_MS).toISOString();
const settingText = (setting: Record<string, number>) =>
  Object.entries(setting)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

/** The parts as minutes and times, for report.json and the notes. */
function parts(wf: WalkForward) {
  const { from, split, to } = wf.split;
  const at = (m: number) => iso(wf.report.startMs, m);
  return {
    history: { minutes: [0, from], start: at(0), end: at(from) },
    training: { minutes: [from, split], start: at(from), end: at(split) },
    evaluated: { minutes: [split, to], start: at(split), end: at(to) },
  };
}

/** report.json's `walkForward`: the parts, the grid, the chosen setting and how it did in training. */
export function walkForwardJson(wf: WalkForward, trainFraction: number): object {
  const chosen = wf.sweep.points[wf.tuned.index];
  return {
    trainFraction,
    parts: parts(wf),
    warmUp:
      'the evaluated replay starts at the split: forecaster history = every earlier minute, pools warm and sized for the split minute, nothing excluded from scoring',
    sweep: { axes: wf.sweep.axes, points: wf.sweep.points.length, sloTarget: wf.sweep.sloTarget },
    tuned: {
      setting: wf.tuned.setting,
      metInTraining: wf.tuned.metInTraining,
      training: chosen && { sloAttainment: chosen.result.sloAttainment, cost: chosen.result.cost },
      policy: withSettings(wf.report.settings.policy, wf.tuned.setting),
    },
    defaultPolicy: wf.report.settings.policy,
  };
}

/** The evaluated part's headline: the default and the tuned policy, costs ÷ each baseline at the SLO. */
export function walkForwardTable(wf: WalkForward): string {
  const at = wf.report.atSlo;
  const names = AT_SLO_BASELINES.filter((b) => at?.baselines[b] !== undefined);
  const ratio = (cost: number, b: AtSloBaseline) => {
    const yardstick = at?.baselines[b]?.cost ?? null;
    return yardstick === null || yardstick <= 0 ? '— (cannot meet)' : `${(cost / yardstick).toFixed(2)}×`;
  };
  const header = `| policy | SLO attainment | cost | ${names.map((b) => `÷ ${b} at SLO`).join(' | ')} | cold starts | delayed by cold start |`;
  const rows = wf.report.policies
    .filter((p) => p.name === 'predictive' || p.name === TUNED_POLICY)
    .map(
      (p) =>
        `| ${p.name === 'predictive' ? 'predictive (default)' : `predictive (tuned: ${settingText(wf.tuned.setting)})`} | ${pct(p.sloAttainment)} | ${int(p.cost)} | ${names.map((b) => ratio(p.cost, b)).join(' | ')} | ${int(p.coldStarts)} | ${int(p.jobsDelayedByColdStart)} |`,
    );
  return [header, `|${'---|'.repeat(names.length + 5)}`, ...rows].join('\n');
}

function walkForwardMarkdown(trace: TraceInfo, wf: WalkForward, trainFraction: number): string {
  const p = parts(wf);
  const chosen = wf.sweep.points[wf.tuned.index];
  const grid = wf.sweep.axes.map((a) => `${a.name} ∈ {${a.values.join(', ')}}`).join(', ');
  return [
    `# Walk-forward evaluation: ${path.basename(trace.file)}`,
    '',
    `- Training (the sweep saw only this): minutes ${p.training.minutes.join('–')}, ${p.training.start} → ${p.training.end} (${trainFraction} of the replay); the trace was cut at its end before the sweep got it.`,
    `- Evaluated (everything below): minutes ${p.evaluated.minutes.join('–')}, ${p.evaluated.start} → ${p.evaluated.end}. The forecaster's history is every minute before; each pool starts warm, sized for the first evaluated minute; no minute is left out of the scores.`,
    `- Grid: ${grid} (${wf.sweep.points.length} settings; [sweep.md](sweep.md) is the training sweep). Chosen: ${settingText(wf.tuned.setting)}${chosen ? `, ${pct(chosen.result.sloAttainment)} at cost ${int(chosen.result.cost)} in training` : ''}${wf.tuned.metInTraining ? `, the cheapest setting meeting ${pct(wf.sweep.sloTarget)} there.` : ` — no setting met ${pct(wf.sweep.sloTarget)} in training; this one came closest.`}`,
    '',
    walkForwardTable(wf),
    '',
  ].join('\n');
}

/** report.json, report.md and the charts for the evaluated part; sweep.json, sweep.md and pareto.svg for the training sweep. */
export function writeWalkForward(dir: string, trace: TraceInfo, wf: WalkForward, trainFraction: number): void {
  mkdirSync(dir, { recursive: true });
  const p = parts(wf);
  const training: TraceInfo = { ...trace, minutes: wf.split.split, start: p.training.start, end: p.training.end };
  writeSweep(dir, training, wf.sweep, wf.report.settings.sloMs);
  const json = { ...reportJson(trace, wf.report), walkForward: walkForwardJson(wf, trainFraction) };
  writeFileSync(path.join(dir, 'report.json'), `${JSON.stringify(json, null, 2)}\n`);
  const full = reportMarkdown(trace, wf.report, writeCharts(dir, wf.report)).replace(/^# .*/, '## The evaluated part in full');
  writeFileSync(path.join(dir, 'report.md'), `${walkForwardMarkdown(trace, wf, trainFraction)}\n${full}`);
}
