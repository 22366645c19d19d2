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
  /** An upper rate for bursts (e.g. recent peak-to-mean), ≥ ratePerSec. */
  burstRatePerSec: number;
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
  /** Target utilisation of active workers (headroom), e.g. 0.8. */
  targetUtilization: number;
}

/** What the policy remembers between ticks (stabilisation windows); opaque to callers. */
export interface PolicyMemory {
  /** Recent desired-active values with their times, for scale-down stabilisation. */
  recentDesired: Array<{ at: number; active: number }>;
}

export interface PolicyInput {
  now: number;
  forecast: Forecast;
  backlog: Backlog;
  workers: WorkerCounts;
  /** Rows (or jobs) per second one active worker sustains (from its batch profile / heartbeat). */
  perWorkerRatePerSec: number;
  settings: PolicySettings;
  memory: PolicyMemory;
  /**
   * Rows/s that late bulk runs ask for on top of the forecast (infra/bulk/capacity-request.ts):
   * the policy plans active workers for it, within min/max like any other demand.
   */
  capacityRequest?: { rowsPerSecondNeeded: number };
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
  memory: PolicyMemory;
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

export interface PoolTarget {
  model: string;
  version: string;
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
