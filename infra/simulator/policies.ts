/**
 * The policies every run compares (issue 5 §3), each a Scaler the world ticks. All of them act
 * through the live controller's planner (controller-plan.ts planVersion): targets in, worker
 * actions out, in the controller's own order.
 *
 * - predictive: the live forecaster and policy, unchanged: forecastArrivals over a cold start
 *   plus a tick (what the controller asks for), then decide() with the settings given, fed as
 *   the controller feeds it: the per-worker rate measured from busy ticks with a queue behind
 *   them (jobs served over busy time, folded as the live meter folds heartbeats), the warm-up's
 *   forward-pass rate until then; the cold start learnt from the pool's own launches
 *   (coldStartEstimateMs), the settings' value until the first is warm; a full batch's time.
 * - reactive: a queue-length scaler like KEDA/HPA, with two triggers and the larger answer
 *   winning, as HPA does with several metrics: the waiting list (waiting + prioritized +
 *   delayed, as KEDA's list-length trigger reads it) at `backlogPerWorker` jobs per replica, and
 *   throughput (jobs served per second, averaged over the last minute like a Prometheus
 *   `rate(…[1m])` trigger) at the full-batch rate × targetUtilization per replica. Up at once,
 *   down only to the most desired over the last 300 s; no forecast, no standby; launches as
 *   active. Jobs in service are not queue (a worker holding a full batch is busy, not behind),
 *   and the second trigger counts work done, not busy time: with greedy micro-batching, busy
 *   time grows with the replica count (more workers, smaller batches, more per-batch overhead),
 *   so a CPU-style trigger feeds on itself — measured, it held twice the needed pool on quiet
 *   traffic, a baseline too weak to be worth beating.
 * - static-peak: ⌈peak minute's rate / worker rate⌉ workers, active all the time (or a fleet
 *   given: the smallest meeting the SLO target, at-slo.ts).
 * - oracle: perfect foresight of the per-minute counts. need(m) = ⌈rate(m) / (worker rate ×
 *   oracleUtilization)⌉; at time t it holds max need over [t, t + cold start + tick]: a worker is
 *   launched exactly a cold start before the minute that needs it, and one is kept while it will
 *   be needed again within a cold start (relaunching would cost more). It ignores the backlog,
 *   except that jobs still waiting keep one worker (else a gap in the trace strands them).
 *   A lower bound on cost at the SLO in practice, not a proof: with utilisation 0.9 and Poisson
 *   placement within a minute a little queueing remains; its SLO attainment is reported.
 */
import type { ArrivalSeries, Candidate, Forecast, PolicyMemory, PolicySettings } from '../contracts/pool.ts';
import { emptyPolicyMemory } from '../contracts/pool.ts';
import type { ScalerAction } from '../scaler/index.ts';
import { coldStartEstimateMs, decideCandidate, forecastArrivals, planVersion, RATE_EWMA_ALPHA } from '../scaler/index.ts';
import { MINUTE_MS, type Observation, type Scaler, VERSION } from './world.ts';

export interface PolicyContext {
  /** Realised arrivals per minute (the history the live scaler would have recorded). */
  series: ArrivalSeries;
  missing: boolean[];
  /** Rows per second one worker sustains at a full batch. */
  workerRate: number;
  /** What a worker's warm-up reports before any is measured busy (the forward pass alone); default workerRate. */
  profileRate?: number;
  /** One full batch's time, ms; default 0. */
  batchMs?: number;
  /** Rows in a full batch: a busy tick is a sample of the full rate once a full batch waits (default 1). */
  maxBatch?: number;
  tickMs: number;
  /** The first replayed minute: initial pools are sized for it. */
  fromMinute: number;
}

function plan(active: number, standby: number, obs: Observation): ScalerAction[] {
  const pool = obs.workers.active + obs.workers.standby + obs.workers.starting;
  const target = active + standby;
  return planVersion(
    { version: VERSION, active, standby, launch: Math.max(0, target - pool), drain: Math.max(0, pool - target) },
    obs.list,
  );
}

const perSec = (ctx: PolicyContext, minute: number) => (ctx.series.perMinute[minute] ?? 0) / 60;

export function predictivePolicy(ctx: PolicyContext, settings: PolicySettings): Scaler {
  return candidatePolicy(ctx, settings, BASE_CANDIDATE, { name: 'predictive' });
}

/** The predictive policy as configured: the candidate every portfolio holds and starts from. */
export const BASE_CANDIDATE: Candidate = { kind: 'predictive', name: 'predictive', overrides: {} };

/**
 * Forecasts by minute and horizon, shared by the replays of one retune: they read the same
 * series, and the forecaster is most of a predictive replay's time.
 */
export type ForecastCache = Map<number, Forecast>;

/** A cache key: the epoch minute (not the series' index: a live tuner's series starts later at each retune) and the horizon. */
export function forecastKey(now: number, horizonS: number): number {
  return Math.floor(now / MINUTE_MS) * HORIZON_SLOTS + horizonS;
}

export function forecastMinute(key: number): number {
  return Math.floor(key / HORIZON_SLOTS);
}

/** Horizons are whole seconds below a day; an epoch minute times this stays an exact integer for millennia. */
const HORIZON_SLOTS = 100_000;

export interface CandidateRun {
  name?: string;
  forecasts?: ForecastCache;
}

/**
 * One candidate (infra/scaler/candidates.ts) as a Scaler, fed as the live controller feeds it:
 * the forecast over a cold start plus a tick, the meters' per-worker rate and cold start, and the
 * rows that arrived and were served since the last tick.
 */
export function candidatePolicy(ctx: PolicyContext, settings: PolicySettings, candidate: Candidate, run: CandidateRun = {}): Scaler {
  const state = { memory: emptyPolicyMemory(), candidate };
  const driver = candidateDriver(ctx, settings, state, run.forecasts);
  return {
    name: run.name ?? candidate.name,
    initial: () => initialPool(ctx, settings, candidate),
    tick: (obs) => driver.tick(obs),
    plannedRatePerSec: () => driver.planned(),
  };
}

/** The first replayed minute's pool for a candidate, warm (a replay does not begin by paying for a cold start). */
export function initialPool(ctx: PolicyContext, settings: PolicySettings, candidate: Candidate): { active: number; standby: number } {
  if (candidate.kind === 'fixed') return { active: Math.max(settings.min, candidate.workers), standby: 0 };
  const need = Math.ceil(perSec(ctx, ctx.fromMinute) / (ctx.workerRate * settings.targetUtilization));
  const standby = candidate.kind === 'predictive' ? (candidate.overrides.standby ?? settings.standby) : 0;
  return { active: Math.max(settings.min, need), standby };
}

/**
 * The tick loop of a candidate over mutable state: the self-tuning policy swaps `state.candidate`
 * between ticks and keeps the memory, as the live controller does when a retune adopts another.
 */
export function candidateDriver(
  ctx: PolicyContext,
  settings: PolicySettings,
  state: { memory: PolicyMemory; candidate: Candidate },
  forecasts: ForecastCache = new Map(),
) {
  let planned: number | undefined;
  let rate = ctx.profileRate ?? ctx.workerRate;
  const meter = measurements(ctx);
  const forecastAt = (now: number, horizonS: number) => {
    // The forecaster reads only complete minutes, so within a minute its answer cannot change.
    const key = forecastKey(now, horizonS);
    let forecast = forecasts.get(key);
    if (!forecast) {
      forecast = forecastArrivals({ series: ctx.series, now, horizonS, options: { missing: ctx.missing } });
      forecasts.set(key, forecast);
    }
    return forecast;
  };
  return {
    meter,
    planned: () => planned,
    /** The per-worker rate the meter gave on the last tick. */
    lastRate: () => rate,
    tick(obs: Observation): ScalerAction[] {
      const m = meter.observe(obs);
      rate = m.ratePerSec;
      const s = m.coldStartMs === undefined ? settings : { ...settings, coldStartMs: m.coldStartMs };
      // As the live controller asks (controller.ts): a cold start plus a tick, in whole seconds.
      const forecast = forecastAt(obs.now, Math.ceil((s.coldStartMs + ctx.tickMs) / 1000));
      planned = forecast.ratePerSec;
      const d = decideCandidate(state.candidate, {
        now: obs.now,
        forecast,
        backlog: obs.backlog,
        workers: obs.workers,
        perWorkerRatePerSec: m.ratePerSec,
        batchServiceMs: ctx.batchMs ?? 0,
        settings: s,
        memory: state.memory,
        observed: { arrivedRows: obs.arrivedJobs, servedRows: obs.servedJobs, lateRows: obs.lateJobs, sinceMs: ctx.tickMs },
      });
      state.memory = d.memory;
      // Most ticks change nothing; planVersion would say so, only slower (it is the replay's hot spot).
      const w = obs.workers;
      if (d.launch === 0 && d.drain === 0 && d.active === w.active && d.standby === w.standby) return [];
      return planVersion({ version: VERSION, active: d.active, standby: d.standby, launch: d.launch, drain: d.drain }, obs.list);
    },
  };
}

/**
 * What the controller's meters would say (controller-observe.ts): the per-worker rate from busy
 * ticks with a full batch waiting for every active worker (each would have taken more, and took
 * full batches),
 * the profile's until the first;
 * the learnt cold start once a launch has warmed.
 */
function measurements(ctx: PolicyContext) {
  let rate: number | undefined;
  const coldStarts: number[] = [];
  return {
    observe(obs: Observation): { ratePerSec: number; coldStartMs: number | undefined } {
      const saturated = obs.backlog.waiting >= (ctx.maxBatch ?? 1) * Math.max(1, obs.workers.active);
      if (saturated && obs.busyWorkers > 0 && obs.servedJobs > 0) {
        const sample = obs.servedJobs / ((obs.busyWorkers * ctx.tickMs) / 1000);
        rate = rate === undefined ? sample : rate + RATE_EWMA_ALPHA * (sample - rate);
      }
      coldStarts.push(...obs.coldStartsMs);
      if (coldStarts.length > 100) coldStarts.splice(0, coldStarts.length - 100);
      return { ratePerSec: rate ?? ctx.profileRate ?? ctx.workerRate, coldStartMs: coldStartEstimateMs(coldStarts) };
    },
    /** The last 100 cold starts measured, launch to warmed. */
    coldStarts: (): readonly number[] => coldStarts,
  };
}

export interface ReactiveOptions {
  min: number;
  max: number;
  backlogPerWorker: number;
  targetUtilization: number;
  scaleDownStabilizationMs: number;
}

/** The window the reactive baseline's throughput trigger averages over (a `rate(…[1m])`). */
const RATE_WINDOW_MS = 60_000;

export function reactivePolicy(ctx: PolicyContext, o: ReactiveOptions): Scaler {
  const recent: Array<{ at: number; desired: number }> = [];
  const served: Array<{ at: number; jobs: number }> = [];
  return {
    name: 'reactive',
    initial: () => ({
      active: Math.max(o.min, Math.ceil(perSec(ctx, ctx.fromMinute) / (ctx.workerRate * o.targetUtilization))),
      standby: 0,
    }),
    tick(obs) {
      const b = obs.backlog;
      const queued = b.waiting + b.prioritized + b.delayed;
      served.push({ at: obs.now, jobs: obs.servedJobs });
      while ((served[0]?.at ?? obs.now) <= obs.now - RATE_WINDOW_MS) served.shift();
      const perSec = served.reduce((t, e) => t + e.jobs, 0) / ((served.length * ctx.tickMs) / 1000);
      const forRate = Math.ceil(perSec / (ctx.workerRate * o.targetUtilization) - 1e-9);
      const raw = Math.max(Math.ceil(queued / o.backlogPerWorker - 1e-9), forRate);
      recent.push({ at: obs.now, desired: Math.min(o.max, Math.max(o.min, raw)) });
      while ((recent[0]?.at ?? obs.now) < obs.now - o.scaleDownStabilizationMs) recent.shift();
      const desired = recent.reduce((m, e) => Math.max(m, e.desired), 0);
      return plan(desired, 0, obs);
    },
  };
}

/** A fixed fleet of `workers`, active all the time (static-peak: sized for the peak minute, compare.ts). */
export function staticPolicy(workers: number): Scaler {
  return { name: 'static-peak', initial: () => ({ active: workers, standby: 0 }), tick: () => [] };
}

export function oraclePolicy(ctx: PolicyContext, coldStartMs: number, utilization: number): Scaler {
  const need = (m: number) => Math.ceil(perSec(ctx, m) / (ctx.workerRate * utilization) - 1e-9);
  const aheadMin = Math.ceil((coldStartMs + ctx.tickMs) / MINUTE_MS);
  let planned = 0;
  return {
    name: 'oracle',
    initial: () => ({ active: need(ctx.fromMinute), standby: 0 }),
    tick(obs) {
      const minute = Math.floor((obs.now - ctx.series.startMs) / MINUTE_MS);
      let want = 0;
      for (let m = minute; m <= minute + aheadMin; m++) want = Math.max(want, need(m));
      planned = perSec(ctx, minute);
      // Foresight of arrivals, not of its own leftovers: jobs still queued (at the edge of a gap
      // in the trace) keep one worker.
      if (obs.backlog.waiting > 0) want = Math.max(want, 1);
      return plan(want, 0, obs);
    },
    plannedRatePerSec: () => planned,
  };
}
