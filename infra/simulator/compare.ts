/**
 * One comparison run (issue 5 §3): the same realised arrivals replayed through predictive,
 * reactive, static-peak and oracle, with one world model. Pure apart from the CPU it burns.
 */

import type { PolicySettings } from '../contracts/pool.ts';
import type { ScalerTuning } from '../kernel/config.ts';
import { scalerSettingsFrom } from '../scaler/index.ts';
import { type ArrivalPattern, realiseCounts } from './arrivals.ts';
import { type ColdStartModel, coldStartModel, drawColdStart, meanColdStartMs } from './cold-start.ts';
import { oraclePolicy, type PolicyContext, predictivePolicy, reactivePolicy, staticPolicy } from './policies.ts';
import type { PolicyRun } from './recorder.ts';
import { NO_COUNT, type ReplayCounter } from './replay-counter.ts';
import { type SelfTuningOptions, selfTuningPolicy } from './self-tuning.ts';
import { type BatchPoint, fullBatchRate, linearService, profileService } from './service.ts';
import type { Trace } from './trace.ts';
import { type Scaler, simulate } from './world.ts';

export interface SimulationSettings {
  /** Multiplies the trace's rate (never its time). */
  scale: number;
  sloMs: number;
  /** Mean launch-to-warmed time (the policy's assumption unless its file says otherwise). */
  coldStartMs: number;
  /** The world's cold starts: phases and their spread (default: coldStartMs, fixed). */
  coldStart: ColdStartModel;
  /** Rows/s one worker serves at a full batch (ignored when batchProfile is given). */
  workerRps: number;
  /** Measured (batch, ms) points, e.g. from a worker's warm-up: the service time model. */
  batchProfile?: BatchPoint[];
  /** Per-job time a worker spends outside the forward pass (queue fetch, result write), e.g. as calibrated. */
  jobOverheadMs: number;
  maxBatch: number;
  tickMs: number;
  /** Standby→active delay (a control message). */
  activateMs: number;
  seed: number;
  pattern: ArrivalPattern;
  /** Days at the start of the trace used only as the forecaster's history. */
  historyDays: number;
  /** Replay at most this many days after the history (default: to the end). */
  days?: number;
  /** Price of a standby worker-second relative to an active one. */
  standbyPrice: number;
  /** The predictive policy's settings (a policy file overrides these). */
  policy: PolicySettings;
  /** Waiting jobs per replica the reactive baseline targets (default: what one clears in half the SLO). */
  reactiveBacklogPerWorker?: number;
  reactiveTargetUtilization: number;
  oracleUtilization: number;
  /** The static baseline's fixed fleet (default: sized for the replay's peak minute). */
  staticWorkers?: number;
  staleMetrics: boolean;
  /**
   * Options for the predictive policy to tune itself from replays of its recent window, as the
   * live scaler does with SCALER_SELF_TUNING (self-tuning.ts; `warmpool simulate --self-tuning`);
   * false: the predictive policy with its settings as given.
   */
  selfTuning: SelfTuningOptions | false;
}

export interface PolicyReport extends PolicyRun {
  /** Worker-seconds weighted by price: active + starting + standby × standbyPrice. */
  cost: number;
}

export interface Comparison {
  settings: SimulationSettings;
  /** Epoch ms of the trace's minute 0 (replayed minutes count from it). */
  startMs: number;
  minutes: { from: number; to: number };
  policies: PolicyReport[];
}

/**
 * A replay's settings: `given` over the scaler being replayed (`scaler`: its tick, SLO, cold start
 * until measured, stabilisation and utilisation, passed in from infra/kernel/config.ts by the
 * caller) over the world model's own defaults.
 */
export function defaultSettings(scaler: ScalerTuning, given: Partial<SimulationSettings> = {}): SimulationSettings {
  // A flag not given arrives as undefined and must not hide the default.
  const over = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as Partial<SimulationSettings>;
  const sloMs = over.sloMs ?? scaler.sloQueueWaitMs;
  const coldStart = over.coldStart ?? coldStartModel(over.coldStartMs ?? scaler.coldStartDefaultMs);
  const coldStartMs = meanColdStartMs(coldStart);
  return {
    scale: 1,
    sloMs,
    workerRps: 100,
    jobOverheadMs: 0,
    maxBatch: 32,
    tickMs: scaler.tickMs,
    activateMs: 1_000,
    seed: 1,
    pattern: { kind: 'poisson' },
    historyDays: 0,
    standbyPrice: 1,
    reactiveTargetUtilization: 0.8,
    oracleUtilization: 0.9,
    staleMetrics: true,
    selfTuning: scaler.selfTuning ? { retuneIntervalMs: scaler.retuneIntervalMs, sloTarget: scaler.sloTarget } : false,
    ...over,
    coldStartMs,
    coldStart,
    policy: {
      min: 1,
      max: 1000,
      // No standby floor: the policy sizes standby for the burst a cold start cannot absorb.
      standby: 0,
      // The live controller's settings from the same tuning, under this replay's SLO and cold start.
      ...scalerSettingsFrom(scaler),
      sloQueueWaitMs: sloMs,
      coldStartMs,
      ...over.policy,
    },
  };
}

export const POLICY_NAMES = ['predictive', 'reactive', 'static-peak', 'oracle'] as const;
export type PolicyName = (typeof POLICY_NAMES)[number];

export interface ServiceModel {
  serviceMs: (batch: number) => number;
  maxBatch: number;
  /** Rows/s one worker serves at a full batch, per-job overhead included: what the baselines are told. */
  workerRate: number;
  /** The same from the forward pass alone, as a worker's warm-up measures it (no per-job overhead). */
  profileRate: number;
}

/** The service-time model, the full-batch rate the baselines are told and the one warm-up would report. */
export function serviceModel(s: SimulationSettings): ServiceModel {
  const pass = s.batchProfile ? profileService(s.batchProfile) : linearService(s.workerRps, s.maxBatch);
  const serviceMs = s.jobOverheadMs > 0 ? (batch: number) => pass(batch) + batch * s.jobOverheadMs : pass;
  return {
    serviceMs,
    maxBatch: s.maxBatch,
    workerRate: fullBatchRate(serviceMs, s.maxBatch),
    profileRate: fullBatchRate(pass, s.maxBatch),
  };
}

/** The reactive baseline's waiting jobs per replica: as given, else what one worker clears in half the SLO. */
export function reactiveBacklogPerWorker(s: SimulationSettings): number {
  return s.reactiveBacklogPerWorker ?? Math.max(1, (serviceModel(s).workerRate * s.sloMs) / 2000);
}

/** The realised arrivals per minute and the replayed minutes [from, to). */
function replayed(trace: Trace, s: SimulationSettings): { counts: number[]; from: number; to: number } {
  const counts = realiseCounts(trace.series.perMinute, trace.missing, s.scale, s.seed);
  const from = Math.min(counts.length, Math.round(s.historyDays * 1440));
  const to = s.days === undefined ? counts.length : Math.min(counts.length, from + Math.round(s.days * 1440));
  return { counts, from, to };
}

/** Workers static-peak holds: ⌈the replay's peak minute's rate / the full-batch rate⌉, at least one. */
export function staticPeakWorkers(trace: Trace, s: SimulationSettings): number {
  const { counts, from, to } = replayed(trace, s);
  return peakWorkers(counts.slice(from, to), serviceModel(s).workerRate);
}

function peakWorkers(counts: readonly number[], workerRate: number): number {
  const peak = counts.reduce((m, n) => Math.max(m, n), 0);
  return Math.max(1, Math.ceil(peak / 60 / workerRate - 1e-9));
}

/** Runs the policies named in `only` (default: all four) over the same realised arrivals, each counted as it ends. */
export function compare(
  trace: Trace,
  s: SimulationSettings,
  only: readonly PolicyName[] = POLICY_NAMES,
  counter: ReplayCounter = NO_COUNT,
): Comparison {
  const { counts, from, to } = replayed(trace, s);
  const service = serviceModel(s);
  const ctx: PolicyContext = {
    series: { startMs: trace.series.startMs, perMinute: counts },
    missing: trace.missing,
    workerRate: service.workerRate,
    profileRate: service.profileRate,
    batchMs: service.serviceMs(s.maxBatch),
    maxBatch: s.maxBatch,
    tickMs: s.tickMs,
    fromMinute: from,
  };
  const staticWorkers = s.staticWorkers ?? peakWorkers(counts.slice(from, to), service.workerRate);
  const make: Record<PolicyName, () => Scaler> = {
    predictive: () => (s.selfTuning ? selfTuningPolicy(ctx, s.policy, { ...s.selfTuning, seed: s.seed }) : predictivePolicy(ctx, s.policy)),
    reactive: () =>
      reactivePolicy(ctx, {
        min: 1,
        max: s.policy.max,
        backlogPerWorker: reactiveBacklogPerWorker(s),
        targetUtilization: s.reactiveTargetUtilization,
        scaleDownStabilizationMs: 300_000,
      }),
    'static-peak': () => staticPolicy(staticWorkers),
    oracle: () => oraclePolicy(ctx, s.coldStartMs, s.oracleUtilization),
  };
  const world = {
    counts,
    startMs: trace.series.startMs,
    fromMinute: from,
    toMinute: to,
    pattern: s.pattern,
    seed: s.seed,
    coldStartMs: (n: number) => drawColdStart(s.coldStart, s.seed, n),
    activateMs: s.activateMs,
    maxBatch: s.maxBatch,
    serviceMs: service.serviceMs,
    tickMs: s.tickMs,
    sloMs: s.sloMs,
    staleMetrics: s.staleMetrics,
  };
  const policies = only.map((name) => {
    const run = simulate(make[name](), world);
    counter.done();
    const ws = run.workerSeconds;
    return { ...run, cost: ws.active + ws.starting + ws.standby * s.standbyPrice };
  });
  return { settings: s, startMs: trace.series.startMs, minutes: { from, to }, policies };
}
