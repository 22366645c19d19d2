/**
 * The scaler's contracts (DESIGN §8): what the live controller and the simulator share. The
 * forecaster and the policy are pure functions of these inputs, so the simulator (issue 5)
 * replays traffic through exactly the code production runs. Providers are the scaler's narrow
 * view of where workers live (local processes, Kubernetes, an AWS Auto Scaling group).
 */
import type { WorkerState } from './worker-state.ts';

/** Arrivals per minute, oldest first; the last entry is the minute that contains `now`. */
export interface ArrivalSeries {
  /** Epoch ms of the start of the first minute. */
  startMs: number;
  perMinute: number[];
}

export interface Forecast {
  /** Expected arrivals per second over the horizon (rows or jobs, as the series counts). */
  ratePerSec: number;
  /** An upper rate for bursts (e.g. recent peak-to-mean), ≥ ratePerSec: the one lasting the horizon. */
  burstRatePerSec: number;
  /**
   * Burst rates by how long they last: for each span (seconds, shortest first, the longest the
   * horizon), the recent peak of the rate averaged over that span, scaled to the forecast. A short
   * burst is high and a long one lower; the policy sizes standby for the worst the queue cannot
   * absorb. Absent: burstRatePerSec over the horizon alone.
   */
  burstsBySpan?: ReadonlyArray<{ spanS: number; ratePerSec: number }>;
  /**
   * The forecast's upper quantile (`upperQuantile`) of the per-minute rate over the horizon,
   * ≥ ratePerSec: what the policy sizes active workers for. Absent: ratePerSec.
   */
  upperRatePerSec?: number;
  /** Which quantile upperRatePerSec is, e.g. 0.9. */
  upperQuantile?: number;
  /**
   * Variance over mean of arrivals at the minute scale once the level's drift is taken out (1 for
   * Poisson arrivals, more for bursty ones): the queueing model's noise. Absent: 1.
   */
  dispersion?: number;
  horizonS: number;
  /** 'seasonal' when history was long enough; 'reactive' when it fell back to the recent level. */
  method: 'seasonal' | 'reactive';
  /** What went into it, for the decision record and the dashboard. */
  components: Record<string, number>;
}

export interface Backlog {
  waiting: number;
  prioritized: number;
  delayed: number;
  active: number;
  /** Age of the oldest job not yet taken; 0 when none. */
  oldestAgeMs: number;
  /**
   * Rows a queued job carries on average (a request may hold many rows): the counts above are
   * jobs, capacity and arrivals are rows, so the policy multiplies. Absent: 1.
   */
  rowsPerJob?: number;
}

/** Workers of one deployment by the state their heartbeat reports. */
export interface WorkerCounts {
  /** launching, downloading, loading, warming: capacity on its way. */
  starting: number;
  standby: number;
  active: number;
  draining: number;
}

export interface PolicySettings {
  min: number;
  max: number;
  /** Warmed workers to hold beyond those active. */
  standby: number;
  /** Queue-wait SLO. */
  sloQueueWaitMs: number;
  /** Time from launch to a warmed worker (measured; a default until measured). */
  coldStartMs: number;
  /** How long lower demand must last before scale-in. */
  scaleDownStabilizationMs: number;
  /**
   * The most of a worker's full rate the policy may plan to use for the forecast's upper
   * quantile: a cap on top of the SLO sizing (1 = the SLO alone sizes the pool).
   */
  targetUtilization: number;
  /**
   * A launched worker is kept at least this many cold starts (the pool's total is held that long
   * after it last needed it), so no worker is launched and drained within minutes. Absent: the
   * default in infra/kernel/config.ts.
   */
  minLifetimeColdStarts?: number;
  /**
   * The share of jobs whose wait must stay within sloQueueWaitMs (0.99): the closed-loop
   * headroom steers the measured attainment to it (slo-control.ts). Absent: the config's default.
   */
  sloTarget?: number;
  /**
   * Extra capacity over the SLO sizing, as a fraction (0.2 = plan for 1.2× the rate), on top of
   * what the closed loop adds: a knob the self-tuning portfolio's predictive candidates vary.
   * Absent: 0.
   */
  capacityMargin?: number;
}

/**
 * The closed-loop headroom's state (infra/scaler/slo-control.ts), kept in PolicyMemory so a
 * restarted scaler continues where it was.
 */
export interface SloControlState {
  /** The integral term: log of the factor on sized capacity (0: as the model sizes it), bounded. */
  logHeadroom: number;
  /** When the current measuring window (the SLO's time scale) began. */
  windowStartMs: number;
  /** Ticks in the window whose oldest waiting job was past the SLO (a miss seen directly). */
  windowMissTicks: number;
  windowTicks: number;
  /** Rows served in the window, and those of them that had waited past the SLO (absent: not counted). */
  windowServed?: number;
  windowLate?: number;
  /** Rows served per window, an EWMA over windows that served any: what one window's share weighs. */
  servedPerWindow?: number;
  updatedAt: number;
}

/**
 * The measured hold's state (infra/scaler/relaunch-hold.ts): how long after a drain the pool
 * launched again, so the hold after a drain is chosen from that distribution (ski rental).
 */
export interface RelaunchHoldState {
  /** When the oldest open surplus began (the want fell below a unit still held). */
  lastDrainAt?: number;
  /** Per-unit gaps (ms) from the want falling below a unit to reaching it again, newest last, at most RELAUNCH_GAP_SAMPLES; censored ones as their age at the horizon. */
  gapsMs: number[];
  /** Units ever censored (open a whole horizon): a lifetime count, for the log. */
  censored: number;
  /** The last want, the last tick's time and the open spells by level, oldest and highest first. */
  open?: { want: number; at: number; levels: Array<{ level: number; since: number }> };
}

/** A policy the self-tuning portfolio may adopt (issue 28; infra/scaler/candidates.ts runs each). */
export type Candidate =
  | {
      kind: 'predictive';
      name: string;
      /** Settings over the deployment's own (standby, holds, capacity margin). */
      overrides: Partial<Pick<PolicySettings, 'standby' | 'scaleDownStabilizationMs' | 'minLifetimeColdStarts' | 'capacityMargin'>>;
    }
  /** A queue-length scaler (KEDA-like): ⌈waiting / backlogPerWorker⌉ and the served rate at 0.8, down over 300 s. */
  | { kind: 'reactive'; name: string; backlogPerWorker: number }
  /** A fixed fleet of `workers`, active all the time (within the deployment's min and max). */
  | { kind: 'fixed'; name: string; workers: number };

/** One candidate's replay over the tuning window. */
export interface CandidateScore {
  name: string;
  kind: Candidate['kind'];
  /** Worker-seconds (active + starting + standby). */
  cost: number;
  /** Share of the window's jobs whose wait stayed within the SLO. */
  attainment: number;
  coldStarts: number;
  jobs: number;
  /** attainment ≥ the target. */
  met: boolean;
  /** The replay stopped at the CPU budget before the window's end (scored on what it reached). */
  partial?: boolean;
}

/** What one retune chose and why (the decision log, GET /v1/pool, the dashboard). */
export interface TuningChoice {
  at: number;
  /** The replayed window: [fromMs, toMs). */
  fromMs: number;
  toMs: number;
  chosen: Candidate;
  /** The candidate in force before, if any. */
  previous?: string;
  why: string;
  table: CandidateScore[];
  /** CPU the retune spent (ms). */
  cpuMs: number;
}

/** What a retune is given: the deployment's history and the world it measured (plain data: it crosses to a worker thread). */
export interface TuningRequest {
  /** Arrivals per minute up to now (the last entry is the minute containing `now`, not replayed). */
  series: ArrivalSeries;
  missing?: readonly boolean[];
  now: number;
  settings: PolicySettings;
  sloTarget: number;
  /** Rows/s one worker sustains at a full batch (measured). */
  perWorkerRatePerSec: number;
  maxBatch: number;
  tickMs: number;
  /** The pool's recent cold starts, launch to warmed (ms); empty: settings.coldStartMs. */
  coldStartsMs: readonly number[];
  /** Within-minute burstiness from per-tick counts: variance over mean of a tick's arrivals (1: Poisson). */
  dispersion?: number;
  /** The candidate in force (its name), if any. */
  current?: string;
  cpuBudgetMs: number;
  seed?: number;
}

/**
 * Where the live controller's retunes run (issue 28 §1): the simulator's portfolio replayed off
 * the controller's event loop (infra/simulator/tuner.ts, a worker thread). Undefined: too little
 * history or no measured rate yet.
 */
export interface Tuner {
  /** `key` names whose forecasts may be reused between retunes (a deployment's model). */
  retune(key: string, request: TuningRequest): Promise<TuningChoice | undefined>;
  close(): Promise<void>;
}

/** What the policy remembers between ticks (stabilisation windows); opaque to callers. */
export interface PolicyMemory {
  /** Recent desired-active values with their times, for scale-down stabilisation. */
  recentDesired: Array<{ at: number; active: number }>;
  /** Recent desired pool totals (active + standby), held for the minimum lifetime; absent in memories from before it. */
  recentPool?: Array<{ at: number; active: number }>;
  /** The closed-loop headroom (absent before it first ran). */
  sloControl?: SloControlState;
  /** Drain-to-relaunch gaps for the measured hold (absent before the first drain). */
  relaunchHold?: RelaunchHoldState;
  /** The reactive candidate's served-rate window: rows served per tick (absent unless it ran). */
  recentServed?: Array<{ at: number; rows: number; ms: number }>;
}

export interface PolicyInput {
  now: number;
  forecast: Forecast;
  backlog: Backlog;
  workers: WorkerCounts;
  /** Rows (or jobs) per second one active worker sustains (measured busy; its batch profile until then). */
  perWorkerRatePerSec: number;
  /**
   * How long one full batch takes on a worker: a job that arrives while every worker is busy
   * waits up to this long for one to free, so the SLO sizing plans for the SLO less this. Absent: 0.
   */
  batchServiceMs?: number;
  settings: PolicySettings;
  memory: PolicyMemory;
  /**
   * Rows/s that late bulk runs ask for on top of the forecast (infra/deployments/capacity-request.ts):
   * the policy plans active workers for it, within min/max like any other demand.
   */
  capacityRequest?: { rowsPerSecondNeeded: number };
  /**
   * What happened since the previous tick, counted by the caller: rows that arrived (the
   * controller sees every enqueue) and rows workers finished. The closed-loop headroom and the
   * reactive candidate read them; absent, both hold still.
   */
  /** lateRows: of servedRows, those that had waited past the SLO (absent where not counted). */
  observed?: { arrivedRows: number; servedRows: number; lateRows?: number; sinceMs: number };
}

export interface PolicyDecision {
  /** Workers that should be taking jobs. */
  active: number;
  /** Warmed workers that should be held ready, taking no jobs. */
  standby: number;
  /** New workers to launch now (cold starts), beyond those already starting. */
  launch: number;
  /** Workers to drain now (scale-in only by draining). */
  drain: number;
  /** Human-readable reasons, e.g. "backlog 340 jobs needs 3 workers to clear within SLO". */
  reasons: string[];
  /**
   * Which term set each number, and the terms' values (the decision log, GET /v1/pool, the
   * dashboard). decide() always gives them; a hand-written policy may not.
   */
  terms?: DecisionTerms;
  memory: PolicyMemory;
}

/**
 * What set `active`: the SLO sizing of the forecast's upper quantile, the backlog, the scale-down
 * window (stabilisation), the pool held for its minimum lifetime, or a bound.
 */
export type ActiveSource = 'slo-sizing' | 'backlog' | 'stabilisation' | 'min-lifetime' | 'min' | 'max';
/** What set `standby`: the setting, the burst a cold start cannot absorb, or max. */
export type StandbySource = 'setting' | 'burst' | 'max';

/** The numbers behind a decision, named as the policy's header names its rules. */
export interface DecisionTerms {
  /** The rate the SLO sizing planned for (the forecast's upper quantile, plus late bulk runs). */
  upperRatePerSec: number;
  /** Which quantile of the forecast that is (absent from the forecast: the mean, 0.5). */
  quantile: number;
  perWorkerRatePerSec: number;
  /** Whether perWorkerRatePerSec was measured (false: a guess, scale-down held). */
  measuredRate: boolean;
  /** The cold start the lead time, the standby and the lifetime were sized with. */
  coldStartMs: number;
  /** Active workers the SLO sizing asks for: the fewest whose queue wait stays within the SLO at upperRatePerSec. */
  sloActive: number;
  /** Active workers the backlog asks for (0 without one). */
  backlogActive: number;
  /** Standby for the burst a cold start cannot absorb (before the setting's floor). */
  burstStandby: number;
  /** Active held by the scale-down window (the most needed in it). */
  stabilisedActive: number;
  /** The pool total held for the minimum lifetime. */
  heldPool: number;
  /** How long the pool holds a surplus: the minimum lifetime, or the measured hold when longer. */
  minLifetimeMs: number;
  activeSetBy: ActiveSource;
  standbySetBy: StandbySource;
  /** The closed-loop factor on sized capacity (slo-control.ts) times 1 + capacityMargin. */
  sloFactor: number;
  /** Why the pool holds a surplus for minLifetimeMs: the lifetime, or the measured hold when longer. */
  holdWhy: string;
}

export function emptyPolicyMemory(): PolicyMemory {
  return { recentDesired: [] };
}

/** One worker as a pool provider sees it. */
export interface PoolWorker {
  id: string;
  state: WorkerState;
  /** Provider-specific handle (pid, pod name, instance id). */
  handle: string;
}

/** A deployment's own pool: the workers of one model version. */
export interface ModelPoolTarget {
  model: string;
  version: string;
}

/** A named shared pool (issue 31): workers bound to no model, each holding several. */
export interface SharedPoolTarget {
  pool: string;
  /** Each worker's budget for its models' resident memory (the pool's `memoryMb`); absent: the worker's default. Not part of the identity. */
  memoryMb?: number;
}

/** What a provider's call is about: one model version's workers, or one shared pool's. */
export type PoolTarget = ModelPoolTarget | SharedPoolTarget;

export function isSharedPoolTarget(target: PoolTarget): target is SharedPoolTarget {
  return 'pool' in target;
}

/** `model@version`, or `pool:<name>`: a map key and a log field for a target. */
export function poolTargetKey(target: PoolTarget): string {
  return isSharedPoolTarget(target) ? `pool:${target.pool}` : `${target.model}@${target.version}`;
}

/** The provider-side name of a target's group of workers, before each provider's own spelling rules. */
export function poolTargetName(target: PoolTarget): string {
  return isSharedPoolTarget(target) ? `warmpool-pool-${target.pool}` : `warmpool-${target.model}-${target.version}`;
}

/**
 * Whether a heartbeat belongs to the target: a shared pool's worker names its pool (and no model);
 * a deployment's worker its model and version, and no pool.
 */
export function beatBelongsTo(beat: { model: string; version: string; pool?: string | undefined }, target: PoolTarget): boolean {
  if (isSharedPoolTarget(target)) return beat.pool === target.pool;
  return beat.pool === undefined && beat.model === target.model && beat.version === target.version;
}

/**
 * Where workers live. Every method is idempotent for the same arguments, so a controller that
 * crashes mid-tick can repeat it. `launch` starts workers that warm up and go to `standby` or
 * `active` as told; `setState` moves a warmed worker between standby and active (within a
 * second: a Redis control message for local workers); `drain` asks a worker to finish what it
 * holds and stop (never a kill: scale-in loses no job).
 */
export interface PoolProvider {
  readonly name: string;
  list(target: PoolTarget): Promise<PoolWorker[]>;
  launch(target: PoolTarget, count: number, options: { startAs: 'active' | 'standby' }): Promise<void>;
  setState(target: PoolTarget, workerId: string, state: 'active' | 'standby'): Promise<void>;
  drain(target: PoolTarget, workerId: string): Promise<void>;
  close(): Promise<void>;
}
