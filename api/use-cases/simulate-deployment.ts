/**
 * The dashboard's simulator view: a deployment's own recorded arrivals replayed through the live
 * policy (infra/simulator compare, the same forecaster and policy code the scaler runs) with the
 * settings it has now and with the settings an operator chose, beside what actually happened over
 * the same window (api/insights/outcome.ts).
 *
 * The world model is the deployment's own measurements where there are any (api/insights/
 * world-model.ts): the cold start from the scaler's latest decision, the forward pass from a live
 * worker's batch profile, and the per-job overhead fitted so the simulated worker serves at the
 * per-worker rate the scaler measured under load. What was not measured is named in the view
 * (`world.missing`), never silently replaced by a default. The forecaster gets up to HISTORY_DAYS
 * of recorded history before the window.
 *
 * Both rows cover the same whole minutes: the replay's grain is the minute, so the minute in
 * progress is in neither; the view says what it holds so far (`inProgress`) and when it will be
 * replayed. The actual row's queue waits are the ones the dashboard sampled (its queue-wait chart);
 * where none were sampled in the window, `actual.note` says why instead of leaving it blank.
 *
 * Beside them, the baselines (static-peak, reactive, oracle: infra/simulator) on the same arrivals and
 * world, as-is and each at the cheapest setting that meets DEFAULT_SLO_TARGET of jobs within the
 * chosen SLO (infra/simulator/at-slo.ts), with both policy runs' cost ÷ each: costs compared at
 * equal attainment. That search is up to a few dozen replays of the baselines, on its own worker
 * thread with its own CPU-time budget (`deps.searchAtSlo`); past it, `atSlo.error` says so and the
 * rest of the view stands.
 *
 * Bounded, because it runs in the API process and any tenant may ask: at most
 * MAX_SIMULATION_MINUTES replayed, at most MAX_REPLAY_ROWS arrivals in them (422 beyond), workers
 * tried at most MAX_WORKERS_FACTOR times the deployment's own max (400 beyond: the replay's work
 * grows with the pool it simulates), and one simulation at a time per process (503 with
 * Retry-After while one runs). The replay itself is CPU work off the event loop (`deps.replay`: a
 * worker thread with a CPU-time budget, infra/simulator/bounded-replay.ts), so health checks and
 * other requests are answered meanwhile; a replay past its budget is a 422 too.
 */

import type { ArrivalSeries, PolicySettings } from '../../infra/contracts/pool.ts';
import type { Deployment } from '../../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import type { ScalerTuning } from '../../infra/kernel/config.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { DecisionRecord } from '../../infra/scaler/index.ts';
import { overridesOf, scalerSettingsFrom } from '../../infra/scaler/index.ts';
import {
  type AtSlo,
  type AtSloReport,
  DEFAULT_SLO_TARGET,
  defaultSettings,
  type PolicyReport,
  type PolicySummary,
  ReplayBudgetError,
  type ReplayTask,
  type SimulationSettings,
  type Trace,
} from '../../infra/simulator/index.ts';
import { actualOutcome, type Outcome, workerTimeline } from '../insights/outcome.ts';
import type { PoolSamples } from '../insights/samples.ts';
import { round } from '../insights/series.ts';
import { latestProfile, type WorldModel, worldModel } from '../insights/world-model.ts';
import { checkMinutes, deployedOrThrow } from './deployment-series.ts';
import { createSimulationSlot } from './simulation-slot.ts';

export const MAX_SIMULATION_MINUTES = 1440;
export const MAX_REPLAY_ROWS = 1_000_000;
export const HISTORY_DAYS = 7;
/**
 * Workers (min, max, standby) a replay may try, as a multiple of the deployment's own max: enough
 * to ask "what if max were doubled", while the replay's work (which grows with the simulated pool)
 * stays proportional to what an admin deployed.
 */
export const MAX_WORKERS_FACTOR = 2;
const MINUTE_MS = 60_000;

/** The settings an operator may try; the rest come from the deployment and the scaler. */
export type PolicyChoice = Partial<Pick<PolicySettings, 'min' | 'max' | 'standby' | 'targetUtilization' | 'sloQueueWaitMs'>>;

export interface SimulateDeploymentDeps {
  deployments: { get(model: string): Promise<Deployment | null> };
  arrivals: { series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries> };
  decisionsSince(model: string, fromMs: number): Promise<DecisionRecord[]>;
  samples: Pick<PoolSamples, 'read'>;
  heartbeats(): Promise<HeartbeatPayload[]>;
  /** The rows/s one busy worker sustained, as the scaler measured it under load; undefined before it has. */
  measuredWorkerRate(model: string): Promise<number | undefined>;
  clock: Clock;
  /** The live scaler's settings (the config's `scaler` section): its tick, and what it decides with before a decision is recorded. */
  scaler: ScalerTuning;
  /**
   * Runs the replays off the event loop (infra/simulator replayBounded on a worker thread): each
   * task's reports. Rejects with ReplayBudgetError past its CPU-time budget.
   */
  replay(trace: Trace, tasks: ReplayTask[], signal?: AbortSignal): Promise<PolicyReport[][]>;
  /**
   * The baselines as-is and at the SLO target, off the event loop (infra/simulator
   * searchAtSloBounded). Rejects with ReplayBudgetError past its CPU-time budget.
   */
  searchAtSlo(
    trace: Trace,
    settings: SimulationSettings,
    target: number,
    signal?: AbortSignal,
  ): Promise<{ asIs: PolicySummary[]; atSlo: AtSloReport }>;
}

/** Each baseline as-is and at the SLO target, and the policy runs' cost ÷ each (null where there is no cost to divide by). */
export interface BaselineAtSlo {
  name: string;
  setting: AtSlo['setting'];
  asIs: { value: number; sloAttainment: number; cost: number };
  atSlo: { met: boolean; value: number | null; sloAttainment: number; cost: number | null; reason: string | null };
  /** `current` / `chosen` run's cost ÷ this baseline's, as-is and at the SLO target. */
  ratio: Record<'current' | 'chosen', { asIs: number | null; atSlo: number | null }>;
}

export interface AtSloView {
  /** Share of jobs within the SLO each baseline was sized to reach. */
  target: number;
  baselines: BaselineAtSlo[];
  /** Why there are no baselines, when the search could not run to its end (its CPU-time budget). */
  error: string | null;
}

export interface SimulatedRun {
  name: 'current' | 'chosen';
  settings: PolicySettings;
  cost: number;
  workerSeconds: { active: number; standby: number; starting: number; total: number };
  jobs: number;
  sloAttainment: number;
  queueWaitMs: { p50: number; p95: number; p99: number; max: number };
  coldStarts: number;
}

export interface SimulationView {
  model: string;
  from: number;
  to: number;
  /** Replayed: the minutes asked for, or fewer when the deployment was observed for less of them. */
  minutes: number;
  requestedMinutes: number;
  sloMs: number;
  /** What the world model was built from, and what of it was not measured (`missing`, in words). */
  world: Omit<WorldModel, 'batchProfile' | 'maxBatch'> & {
    maxBatch: number;
    coldStartMs: number;
    coldStartMeasured: boolean;
    batchProfile: boolean;
    historyMinutes: number;
    replayedRows: number;
  };
  runs: SimulatedRun[];
  /** What happened over the same minutes; `note` says why waits are missing when they are. */
  actual: Outcome & { note: string | null };
  /** The minute in progress, in neither row: rows arrived and jobs sampled so far, and when it ends (epoch ms). */
  inProgress: { rows: number; jobs: number; endsAt: number };
  /** The baselines at equal SLO attainment, beside their as-is figures. */
  atSlo: AtSloView;
  /** Workers in the pool (starting + standby + active) per interval, x in epoch seconds. */
  pool: { t: number[]; actual: Array<number | null>; current: number[]; chosen: number[] };
}

/** A simulator for the deployments of one API process: one replay at a time, in turns between tenants (simulation-slot.ts). */
export function createDeploymentSimulator(deps: SimulateDeploymentDeps) {
  const slot = createSimulationSlot(deps.clock);
  return async (tenant: string, model: string, minutes: number, choice: PolicyChoice, signal?: AbortSignal): Promise<SimulationView> => {
    checkMinutes(minutes, MAX_SIMULATION_MINUTES);
    // What can be refused without a replay is, before the slot: a bad query never costs a turn.
    const deployment = await deployedOrThrow(deps, model);
    checkWorkers(choice, deployment.max);
    slot.take(tenant);
    try {
      return await simulateDeployment(deps, deployment, minutes, choice, signal);
    } finally {
      slot.release();
    }
  };
}

async function simulateDeployment(
  deps: SimulateDeploymentDeps,
  deployment: Deployment,
  requestedMinutes: number,
  choice: PolicyChoice,
  signal: AbortSignal | undefined,
) {
  const { model } = deployment;
  // Whole minutes only, the arrivals' grain: the minute in progress is neither replayed nor judged.
  const now = deps.clock.now();
  const to = Math.floor(now / MINUTE_MS) * MINUTE_MS;
  const requestedFrom = to - requestedMinutes * MINUTE_MS;
  const [read, decisions, allSamples, beats, measuredRate] = await Promise.all([
    deps.arrivals.series(model, requestedFrom - HISTORY_DAYS * 1440 * MINUTE_MS, now),
    deps.decisionsSince(model, requestedFrom - MINUTE_MS),
    deps.samples.read(model, requestedFrom, now),
    deps.heartbeats(),
    deps.measuredWorkerRate(model),
  ]);
  // The minute in progress is read with the rest, then set aside (see the header).
  const whole = Math.max(0, Math.round((to - read.startMs) / MINUTE_MS));
  const series: ArrivalSeries = { startMs: read.startMs, perMinute: read.perMinute.slice(0, whole) };
  const samples = allSamples.filter((s) => s.at < to);
  const inProgress = {
    rows: read.perMinute.slice(whole).reduce((a, b) => a + b, 0),
    jobs: allSamples.filter((s) => s.at >= to).reduce((n, s) => n + (s.queueSeconds?.count ?? 0), 0),
    endsAt: to + MINUTE_MS,
  };
  // Cost is only comparable over what was observed: when the record starts inside the window,
  // replay from there (the arrivals before it still feed the forecaster as history).
  const firstSeen = workerTimeline(decisions, samples).find((p) => p.at >= requestedFrom && p.at < to)?.at;
  const minutes =
    firstSeen === undefined ? requestedMinutes : Math.max(1, Math.min(requestedMinutes, Math.ceil((to - firstSeen) / MINUTE_MS)));
  const from = to - minutes * MINUTE_MS;
  const trace = trimLeadingZeros(series, minutes);
  const replayedRows = trace.series.perMinute.slice(-minutes).reduce((a, b) => a + b, 0);
  if (replayedRows > MAX_REPLAY_ROWS) {
    const message = `${replayedRows} arrivals in ${minutes} minutes; at most ${MAX_REPLAY_ROWS}: choose fewer minutes`;
    throw new InvalidInputError('simulation_too_large', message, { status: 422 });
  }
  const latest = [...decisions].reverse().find((d) => !d.shadow) ?? decisions.at(-1);
  const current = currentSettings(deployment, latest, deps.scaler);
  const chosen = chooseSettings(current, choice);
  const world = worldModel(latestProfile(beats, model, deployment.version), measuredRate);
  const coldStartMeasured = current.coldStartMs !== unmeasuredColdStartMs(deployment, deps.scaler);
  const historyMinutes = trace.series.perMinute.length - minutes;
  const task = (policy: PolicySettings): ReplayTask => ({
    settings: defaultSettings(deps.scaler, {
      sloMs: chosen.sloQueueWaitMs,
      coldStartMs: current.coldStartMs,
      workerRps: world.workerRowsPerSec,
      maxBatch: world.maxBatch,
      jobOverheadMs: world.jobOverheadMs,
      ...(world.batchProfile ? { batchProfile: world.batchProfile } : {}),
      historyDays: historyMinutes / 1440,
      policy,
    }),
    only: ['predictive'],
  });
  const [currentRun, chosenRun] = await replay(deps, trace, [task(current), task(chosen)], signal);
  const runs = [summary('current', current, currentRun as PolicyReport), summary('chosen', chosen, chosenRun as PolicyReport)];
  const atSlo = await baselinesAtSloView(deps, trace, task(chosen).settings, runs, signal);
  const outcome = actualOutcome({ decisions, samples, fromMs: from, toMs: to, sloMs: chosen.sloQueueWaitMs });
  const { batchProfile: points, missing, ...worker } = world;
  return {
    model,
    from,
    to,
    minutes,
    requestedMinutes,
    sloMs: chosen.sloQueueWaitMs,
    world: {
      ...worker,
      missing: coldStartMeasured ? missing : [...missing, coldStartNote(current.coldStartMs)],
      coldStartMs: current.coldStartMs,
      coldStartMeasured,
      batchProfile: !!points,
      historyMinutes,
      replayedRows,
    },
    runs: runs.map((r) => r.run),
    actual: { ...outcome, note: actualNote(outcome, replayedRows) },
    inProgress,
    atSlo,
    pool: poolColumns(trace.series.startMs + historyMinutes * MINUTE_MS, runs, workerTimeline(decisions, samples)),
  } satisfies SimulationView;
}

/** The cold start the scaler decides with before it has timed a launch: the deployment's policy, else the config's default. */
function unmeasuredColdStartMs(d: Deployment, scaler: ScalerTuning): number {
  return overridesOf(d.policy).coldStartMs ?? scaler.coldStartDefaultMs;
}

function coldStartNote(ms: number): string {
  return `cold start: no launch timed yet, ${round(ms / 1000, 1)} s assumed (the deployment's policy or COLD_START_DEFAULT_MS)`;
}

/** Why the actual row has no queue waits, when it has none. */
export function actualNote(outcome: Outcome, replayedRows: number): string | null {
  if (outcome.jobs > 0) return null;
  if (outcome.waitSamples === 0) {
    return 'no queue waits were recorded in these minutes: the dashboard samples them while it is open (its queue-wait chart)';
  }
  return replayedRows > 0 ? 'no job was taken by a worker in the sampled intervals' : 'no jobs in these minutes';
}

/** The replays' predictive reports; a replay past its CPU-time budget is the caller's to shrink (422). */
async function replay(deps: SimulateDeploymentDeps, trace: Trace, tasks: ReplayTask[], signal: AbortSignal | undefined) {
  try {
    return (await deps.replay(trace, tasks, signal)).map((reports) => reports[0]);
  } catch (err) {
    if (!(err instanceof ReplayBudgetError)) throw err;
    const message = `this replay needs more CPU time than one simulation may use (${err.message}): choose fewer minutes or fewer workers`;
    throw new InvalidInputError('simulation_too_large', message, { status: 422, cause: err });
  }
}

/** The baselines searched at the SLO target; past the search's CPU-time budget, a view that says so. */
async function baselinesAtSloView(
  deps: SimulateDeploymentDeps,
  trace: Trace,
  settings: SimulationSettings,
  runs: Array<{ run: SimulatedRun }>,
  signal: AbortSignal | undefined,
): Promise<AtSloView> {
  const target = DEFAULT_SLO_TARGET;
  let found: Awaited<ReturnType<SimulateDeploymentDeps['searchAtSlo']>>;
  try {
    found = await deps.searchAtSlo(trace, settings, target, signal);
  } catch (err) {
    if (!(err instanceof ReplayBudgetError)) throw err;
    const error = `the baselines at the SLO target need more CPU time than one search may use (${err.message}): choose fewer minutes`;
    return { target, baselines: [], error };
  }
  const costOf = (name: 'current' | 'chosen') => runs.find((r) => r.run.name === name)?.run.cost ?? 0;
  const per = (cost: number, of: number | null) => (of === null || of <= 0 ? null : round(cost / of, 3));
  const baselines = found.asIs.flatMap((p): BaselineAtSlo[] => {
    const a = found.atSlo.baselines[p.name as keyof AtSloReport['baselines']];
    if (!a) return [];
    const ratio = (name: 'current' | 'chosen') => ({ asIs: per(costOf(name), p.cost), atSlo: per(costOf(name), a.cost) });
    return [
      {
        name: p.name,
        setting: a.setting,
        asIs: { value: round(a.asIs, 3), sloAttainment: round(p.sloAttainment, 4), cost: round(p.cost, 1) },
        atSlo: {
          met: a.met,
          value: a.value === null ? null : round(a.value, 3),
          sloAttainment: round(a.sloAttainment, 4),
          cost: a.cost === null ? null : round(a.cost, 1),
          reason: a.reason ?? null,
        },
        ratio: { current: ratio('current'), chosen: ratio('chosen') },
      },
    ];
  });
  return { target, baselines, error: null };
}

/** Workers tried beyond MAX_WORKERS_FACTOR × the deployment's max are refused before any replay. */
export function checkWorkers(choice: PolicyChoice, deploymentMax: number): void {
  const ceiling = Math.max(1, MAX_WORKERS_FACTOR * deploymentMax);
  for (const key of ['min', 'max', 'standby'] as const) {
    const value = choice[key];
    if (value !== undefined && value > ceiling) {
      const message = `${key} (${value}) is above ${ceiling}: a simulation tries at most ${MAX_WORKERS_FACTOR} × the deployment's max (${deploymentMax}) workers`;
      throw new InvalidInputError('invalid_query', message);
    }
  }
}

/** History before the first recorded minute is not "no traffic", it is "not recorded": leave it out. */
function trimLeadingZeros(series: ArrivalSeries, minutes: number) {
  const first = series.perMinute.findIndex((n) => n > 0);
  const keepFrom = Math.min(first < 0 ? series.perMinute.length : first, Math.max(0, series.perMinute.length - minutes));
  const perMinute = series.perMinute.slice(keepFrom);
  return {
    series: { startMs: series.startMs + keepFrom * MINUTE_MS, perMinute },
    missing: perMinute.map(() => false),
    rows: perMinute.reduce((a, b) => a + b, 0),
  };
}

/** The settings the scaler decided with last (they merge the deployment's policy overrides), else the deployment's over the scaler's, merged as the controller merges them. */
export function currentSettings(d: Deployment, latest: DecisionRecord | undefined, scaler: ScalerTuning): PolicySettings {
  const base = latest?.settings ?? { ...scalerSettingsFrom(scaler), ...overridesOf(d.policy) };
  return { ...base, min: d.min, max: d.max, standby: d.standby };
}

export function chooseSettings(current: PolicySettings, choice: PolicyChoice): PolicySettings {
  const chosen = { ...current, ...Object.fromEntries(Object.entries(choice).filter(([, v]) => v !== undefined)) };
  if (chosen.max < chosen.min) throw new InvalidInputError('invalid_query', `max (${chosen.max}) is below min (${chosen.min})`);
  if (chosen.max < 1) throw new InvalidInputError('invalid_query', 'max must be at least 1');
  return chosen;
}

function summary(name: SimulatedRun['name'], settings: PolicySettings, r: PolicyReport) {
  const run: SimulatedRun = {
    name,
    settings,
    cost: round(r.cost, 1),
    workerSeconds: {
      active: round(r.workerSeconds.active, 1),
      standby: round(r.workerSeconds.standby, 1),
      starting: round(r.workerSeconds.starting, 1),
      total: round(r.workerSeconds.total, 1),
    },
    jobs: r.jobs,
    sloAttainment: round(r.sloAttainment, 4),
    queueWaitMs: r.queueWaitMs,
    coldStarts: r.coldStarts,
  };
  return { run, series: r.series };
}

/** Pool size per interval of the simulated runs, and the observed one averaged over the same intervals. */
function poolColumns(
  startMs: number,
  runs: Array<ReturnType<typeof summary>>,
  timeline: Array<{ at: number; workers: { starting: number; standby: number; active: number } }>,
): SimulationView['pool'] {
  const size = (s: (typeof runs)[number]['series'], i: number) => round((s.starting[i] ?? 0) + (s.standby[i] ?? 0) + (s.active[i] ?? 0), 2);
  const [current, chosen] = runs as [ReturnType<typeof summary>, ReturnType<typeof summary>];
  const stepMs = current.series.intervalMin * MINUTE_MS;
  const t = current.series.active.map((_, i) => (startMs + i * stepMs) / 1000);
  const actual = t.map((x) => {
    const inside = timeline.filter((p) => p.at >= x * 1000 && p.at < x * 1000 + stepMs);
    if (inside.length === 0) return null;
    return round(inside.reduce((sum, p) => sum + p.workers.starting + p.workers.standby + p.workers.active, 0) / inside.length, 2);
  });
  return {
    t,
    actual,
    current: t.map((_, i) => size(current.series, i)),
    chosen: t.map((_, i) => size(chosen.series, i)),
  };
}
