/**
 * Sweeps (issue 5 §5): the predictive policy over a grid of its settings, each point replayed
 * over the same realised arrivals, beside the baselines (which do not depend on the grid, so
 * they run once). Points run in parallel on worker threads, at most one per core.
 *
 * The result names the Pareto front on (cost, SLO attainment) — a point is on it when no other
 * point and no deployable baseline (reactive, static-peak) is at least as cheap and at least as
 * good, and strictly better in one: a setting the reactive scaler beats on both is no choice — and
 * the cheapest policy whose attainment meets the target. That choice compares every policy an operator could
 * run: the grid's points and the deployable baselines (reactive, static-peak), so a baseline that
 * meets the SLO for less is named rather than hidden behind a dearer point. The oracle is left out
 * of it — perfect foresight is a floor on cost, not a setting — and reported beside it.
 */
import os from 'node:os';
import { Worker } from 'node:worker_threads';
import type { TuningChoice, TuningRequest } from '../contracts/pool.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import type { AtSloReport } from './at-slo.ts';
import type { PolicyName, PolicyReport, SimulationSettings } from './compare.ts';
import { checkField, withSettings } from './policy-file.ts';
import { NO_COUNT, type ReplayCounter } from './replay-counter.ts';
import type { Trace } from './trace.ts';

export interface SweepAxis {
  name: string;
  values: number[];
}

/** One policy's figures, without the chart series. */
export type PolicySummary = Omit<PolicyReport, 'series'>;

export interface SweepPoint {
  /** The grid's values at this point, by axis name. */
  setting: Record<string, number>;
  result: PolicySummary;
  pareto: boolean;
}

/** The cheapest policy meeting the target: a point of the grid (its index) or a baseline (its index in baselines). */
export type Cheapest = { kind: 'point'; index: number } | { kind: 'baseline'; index: number };

export interface SweepResult {
  axes: SweepAxis[];
  sloTarget: number;
  baselines: PolicySummary[];
  points: SweepPoint[];
  /** The cheapest deployable policy meeting sloTarget, points and baselines alike; undefined when none does. */
  cheapest: Cheapest | undefined;
}

/** Baselines that only bound what is possible (they need knowledge no scaler has), never a choice. */
export const BOUND_BASELINES: readonly string[] = ['oracle'];

/** Task sent to a sweep thread: run `only` with these settings. */
export interface SweepTask {
  id: number;
  settings: SimulationSettings;
  only: PolicyName[];
  /** Send the chart series back too (default: they stay in the thread). */
  series?: boolean;
  /** Also search the baselines in `only` at this SLO target (at-slo.ts), in the thread. */
  atSloTarget?: number;
  /** The trace to replay, for a thread kept between calls (bounded-replay.ts); else the one it was started with. */
  trace?: Trace;
}

export interface SweepReply {
  id: number;
  policies?: PolicySummary[];
  /** Parallel to policies, when the task asked for them. */
  series?: Array<PolicyReport['series']>;
  /** When the task gave atSloTarget. */
  atSlo?: AtSloReport;
  error?: string;
}

/** Task sent to a sweep thread that tunes (tuner.ts): one retune of the portfolio for `key`. */
export interface TuneTask {
  id: number;
  key: string;
  tune: TuningRequest;
}

export interface TuneReply {
  id: number;
  /** Null: too little history for a retune. */
  choice?: TuningChoice | null;
  error?: string;
}

/** A sweep thread's first message: it runs, and this is its OS thread id (null where unknown). */
export interface ThreadReady {
  ready: true;
  osThreadId: number | null;
}

/** The sweep thread's entry: a plain .mjs that registers tsx before loading sweep-thread.ts. */
export const SWEEP_THREAD = new URL('./sweep-thread.mjs', import.meta.url);

/** Parses `name=v1,v2,…` specs, checking every name and value. */
export function parseSweep(specs: readonly string[]): SweepAxis[] {
  if (specs.length === 0) throw new InvalidInputError('invalid_flag', '--sweep needs at least one NAME=V1,V2,… (e.g. standby=0,1,2)');
  const seen = new Set<string>();
  return specs.map((spec) => {
    const m = /^([A-Za-z]+)=(.+)$/.exec(spec.trim());
    if (!m) throw new InvalidInputError('invalid_flag', `--sweep: cannot read "${spec}" (expected NAME=V1,V2,…)`);
    const [, name = '', list = ''] = m;
    if (seen.has(name)) throw new InvalidInputError('invalid_flag', `--sweep: "${name}" is given twice`);
    seen.add(name);
    const values = list.split(',').map((text) => {
      const value = text.trim() === '' ? Number.NaN : Number(text);
      const problem = checkField(name, value);
      if (problem) throw new InvalidInputError('invalid_flag', `--sweep: ${problem.replace(`got ${value}`, `got "${text}"`)}`);
      return value;
    });
    return { name, values: [...new Set(values)] };
  });
}

/** Every combination of the axes' values, the first axis varying slowest. */
export function sweepGrid(axes: readonly SweepAxis[]): Array<Record<string, number>> {
  return axes.reduce<Array<Record<string, number>>>(
    (grid, axis) => grid.flatMap((point) => axis.values.map((v) => ({ ...point, [axis.name]: v }))),
    [{}],
  );
}

type Figures = { cost: number; sloAttainment: number };

/** Whether `q` is at least as cheap and as good as `p`, and strictly better in one. */
const dominates = (q: Figures, p: Figures) =>
  q.cost <= p.cost && q.sloAttainment >= p.sloAttainment && (q.cost < p.cost || q.sloAttainment > p.sloAttainment);

/**
 * true where a point is on the Pareto front (lower cost, higher attainment are better): no other
 * point dominates it, and none of `rivals` (policies on the same front that are not points of
 * this grid, e.g. the deployable baselines) does.
 */
export function paretoFront(points: ReadonlyArray<Figures>, rivals: ReadonlyArray<Figures> = []): boolean[] {
  return points.map((p) => !points.some((q) => dominates(q, p)) && !rivals.some((q) => dominates(q, p)));
}

/**
 * The sweep's front: the grid's points that neither another point nor a deployable baseline
 * dominates. A bound (the oracle) is left out: perfect foresight beats every setting, and no
 * operator can run it.
 */
export function sweepFront(points: ReadonlyArray<Figures>, baselines: ReadonlyArray<Figures & { name: string }>): boolean[] {
  return paretoFront(
    points,
    baselines.filter((b) => !BOUND_BASELINES.includes(b.name)),
  );
}

/** Index of the cheapest point meeting `target` (on equal cost, the better attainment, then the first); undefined when none does. */
export function cheapestMeeting(points: ReadonlyArray<Figures>, target: number): number | undefined {
  let best: number | undefined;
  points.forEach((p, i) => {
    const b = best === undefined ? undefined : points[best];
    if (p.sloAttainment < target) return;
    if (!b || p.cost < b.cost || (p.cost === b.cost && p.sloAttainment > b.sloAttainment)) best = i;
  });
  return best;
}

/**
 * The cheapest deployable policy meeting `target`, the grid's points and the baselines compared
 * alike (bounds such as the oracle left out); a point wins a tie with a baseline.
 */
export function cheapestPolicy(
  points: ReadonlyArray<Figures>,
  baselines: ReadonlyArray<Figures & { name: string }>,
  target: number,
): Cheapest | undefined {
  const candidates: Array<Figures & { choice: Cheapest }> = [
    ...points.map((p, index) => ({ ...p, choice: { kind: 'point', index } as const })),
    ...baselines.flatMap((b, index) => (BOUND_BASELINES.includes(b.name) ? [] : [{ ...b, choice: { kind: 'baseline', index } as const }])),
  ];
  const i = cheapestMeeting(candidates, target);
  return i === undefined ? undefined : candidates[i]?.choice;
}

export interface SweepOptions {
  sloTarget: number;
  /** Worker threads; default: the cores, at most one per task. */
  threads?: number;
  /** Hears each policy's replay as its task comes back (replay-counter.ts). */
  counter?: ReplayCounter;
}

/** The baselines a sweep replays once, beside the grid. */
const SWEEP_BASELINES: PolicyName[] = ['reactive', 'static-peak', 'oracle'];

/** Replays runSweep() makes over these axes: the baselines once, then one per point of the grid. */
export function sweepReplays(axes: readonly SweepAxis[]): number {
  return SWEEP_BASELINES.length + sweepGrid(axes).length;
}

export async function runSweep(trace: Trace, settings: SimulationSettings, axes: SweepAxis[], o: SweepOptions): Promise<SweepResult> {
  const grid = sweepGrid(axes);
  const tasks: SweepTask[] = [
    { id: 0, settings, only: SWEEP_BASELINES },
    ...grid.map((point, i) => ({
      id: i + 1,
      settings: { ...settings, policy: withSettings(settings.policy, point) },
      only: ['predictive'] as PolicyName[],
    })),
  ];
  const threads = Math.max(1, Math.min(o.threads ?? os.availableParallelism(), tasks.length));
  const results = await runTasks(trace, tasks, threads, o.counter ?? NO_COUNT);
  const results0 = results[0] ?? [];
  const predictive = grid.map((_, i) => (results[i + 1] ?? [])[0] as PolicySummary);
  const front = sweepFront(predictive, results0);
  return {
    axes,
    sloTarget: o.sloTarget,
    baselines: results0,
    points: grid.map((setting, i) => ({ setting, result: predictive[i] as PolicySummary, pareto: front[i] === true })),
    cheapest: cheapestPolicy(predictive, results0, o.sloTarget),
  };
}

/** A pool of `threads` worker threads draining the task list; results by task id. */
async function runTasks(trace: Trace, tasks: SweepTask[], threads: number, counter: ReplayCounter): Promise<PolicySummary[][]> {
  const results: PolicySummary[][] = [];
  const queue = [...tasks];
  const workers: Worker[] = [];
  try {
    await Promise.all(
      Array.from({ length: threads }, async () => {
        const worker = new Worker(SWEEP_THREAD, { workerData: { trace } });
        workers.push(worker);
        for (let task = queue.shift(); task; task = queue.shift()) {
          results[task.id] = (await runTask(worker, task)).policies;
          counter.done(task.only.length);
        }
      }),
    );
  } finally {
    await Promise.all(workers.map((w) => w.terminate()));
  }
  return results;
}

/** Sends one task to a sweep thread and waits for its answer (other messages are left alone). */
export function runTask(
  worker: Worker,
  task: SweepTask,
): Promise<Required<Pick<SweepReply, 'policies'>> & Pick<SweepReply, 'series' | 'atSlo'>> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      worker.off('message', onMessage);
      worker.off('error', onError);
    };
    const onMessage = (reply: SweepReply) => {
      if (reply.id !== task.id) return;
      cleanup();
      if (reply.error !== undefined || !reply.policies) reject(new Error(`sweep task ${task.id} failed: ${reply.error}`));
      else resolve({ policies: reply.policies, series: reply.series, atSlo: reply.atSlo });
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    worker.on('message', onMessage);
    worker.on('error', onError);
    worker.postMessage(task);
  });
}
