/**
 * One comparison run (issue 5 §3): the same realised arrivals replayed through predictive,
 * reactive, static-peak and oracle, with one world model. Pure apart from the CPU it burns.
 */
import type { PolicySettings } from '../scaler/contracts.ts';
import type { Trace } from '../scaler/trace.ts';
import { type ArrivalPattern, realiseCounts } from './arrivals.ts';
import { oraclePolicy, type PolicyContext, predictivePolicy, reactivePolicy, staticPeakPolicy } from './policies.ts';
import type { PolicyRun } from './recorder.ts';
import { fullBatchRate, linearService } from './service.ts';
import { simulate } from './world.ts';

export interface SimulationSettings {
  /** Multiplies the trace's rate (never its time). */
  scale: number;
  sloMs: number;
  coldStartMs: number;
  /** Rows/s one worker serves at a full batch. */
  workerRps: number;
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
  reactiveBacklogPerWorker: number;
  oracleUtilization: number;
  staleMetrics: boolean;
}

export interface PolicyReport extends PolicyRun {
  /** Worker-seconds weighted by price: active + starting + standby × standbyPrice. */
  cost: number;
}

export interface Comparison {
  settings: SimulationSettings;
  minutes: { from: number; to: number };
  policies: PolicyReport[];
}

export function defaultSettings(given: Partial<SimulationSettings> = {}): SimulationSettings {
  // A flag not given arrives as undefined and must not hide the default.
  const over = Object.fromEntries(Object.entries(given).filter(([, v]) => v !== undefined)) as Partial<SimulationSettings>;
  const sloMs = over.sloMs ?? 30_000;
  const coldStartMs = over.coldStartMs ?? 60_000;
  const workerRps = over.workerRps ?? 100;
  return {
    scale: 1,
    sloMs,
    coldStartMs,
    workerRps,
    maxBatch: 32,
    tickMs: 5_000,
    activateMs: 1_000,
    seed: 1,
    pattern: { kind: 'poisson' },
    historyDays: 0,
    standbyPrice: 1,
    reactiveBacklogPerWorker: Math.max(1, (workerRps * sloMs) / 4000),
    oracleUtilization: 0.9,
    staleMetrics: true,
    ...over,
    policy: {
      min: 1,
      max: 1000,
      standby: 1,
      sloQueueWaitMs: sloMs,
      coldStartMs,
      scaleDownStabilizationMs: 300_000,
      targetUtilization: 0.8,
      ...over.policy,
    },
  };
}

export function compare(trace: Trace, s: SimulationSettings): Comparison {
  const counts = realiseCounts(trace.series.perMinute, trace.missing, s.scale, s.seed);
  const from = Math.min(counts.length, Math.round(s.historyDays * 1440));
  const to = s.days === undefined ? counts.length : Math.min(counts.length, from + Math.round(s.days * 1440));
  const service = linearService(s.workerRps, s.maxBatch);
  const ctx: PolicyContext = {
    series: { startMs: trace.series.startMs, perMinute: counts },
    missing: trace.missing,
    workerRate: fullBatchRate(service, s.maxBatch),
    tickMs: s.tickMs,
    fromMinute: from,
  };
  const peak = counts.slice(from, to).reduce((m, n) => Math.max(m, n), 0);
  const scalers = [
    predictivePolicy(ctx, s.policy),
    reactivePolicy(ctx, {
      min: s.policy.min,
      max: s.policy.max,
      backlogPerWorker: s.reactiveBacklogPerWorker,
      targetUtilization: s.policy.targetUtilization,
      scaleDownStabilizationMs: 300_000,
    }),
    staticPeakPolicy(ctx, peak),
    oraclePolicy(ctx, s.coldStartMs, s.oracleUtilization),
  ];
  const world = {
    counts,
    startMs: trace.series.startMs,
    fromMinute: from,
    toMinute: to,
    pattern: s.pattern,
    seed: s.seed,
    coldStartMs: s.coldStartMs,
    activateMs: s.activateMs,
    maxBatch: s.maxBatch,
    serviceMs: service,
    tickMs: s.tickMs,
    sloMs: s.sloMs,
    staleMetrics: s.staleMetrics,
  };
  const policies = scalers.map((scaler) => {
    const run = simulate(scaler, world);
    const ws = run.workerSeconds;
    return { ...run, cost: ws.active + ws.starting + ws.standby * s.standbyPrice };
  });
  return { settings: s, minutes: { from, to }, policies };
}
