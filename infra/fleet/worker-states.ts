/** Workers' heartbeats in Redis (DESIGN §6): written by each worker, read by the pool view, the scaler and tools. */

import type { WorkerState } from '../contracts/worker-state.ts';
import { getMany, type RedisClient, scanKeys } from '../redis/client.ts';
import { workerKey } from '../redis/keys.ts';

/**
 * A model's state in a shared pool's worker (worker/resident-model.ts): the load phases, serving,
 * leaving; and, for a model the holdings list that is not resident, why: `evicted` (made room for
 * another; stays out until asked again: infra/fleet/pool-holdings.ts), `no-room` (would not fit
 * the memory budget and nothing could be evicted; tried again each heartbeat), `failed` (its load
 * failed: `error` says why; tried again after a pause).
 */
export type PoolModelState = 'downloading' | 'loading' | 'warming' | 'active' | 'draining' | 'evicted' | 'no-room' | 'failed';

/** A shared pool worker's totals since it began (its heartbeat's `poolCounts`). */
export interface PoolWorkerCounts {
  loads: number;
  evictions: number;
  jobsHit: number;
  jobsMiss: number;
}

/** One entry of a pool worker's `models`. */
export interface PoolModelView {
  model: string;
  version: string;
  state: PoolModelState;
  /** Measured: the RSS its load and warm-up added (never below the file's size); 0 when not resident. */
  residentBytes: number;
  /** Epoch ms of its last job's end here (or of becoming resident); 0 when not resident. */
  lastUsedAt: number;
  jobsInFlight: number;
  /** From the start of its download to its intake fetching. */
  loadMs?: number;
  /** Its weights were already in the disk cache. */
  cacheHit?: boolean;
  /** Warm-up: `reused` a profile kept beside the cached model (then `runs` is 1), the passes it ran, the sizes it measured. */
  warmup?: { reused: boolean; runs: number; batchesMeasured: number };
  /**
   * Its warm-up's profile at the chosen thread count: the batch it chose and that batch's rows/s;
   * `batchOneMs`, the median ms of a batch of one row (absent when warm-up did not measure one).
   */
  profile?: { threads: number; chosenBatch: number; rowsPerS: number; batchOneMs?: number };
  error?: string;
}

/**
 * What a worker publishes with each heartbeat (DESIGN §6), read by the pool view and tools.
 *
 * A shared pool's worker (`warmpool worker --pool NAME`) sets `pool`, and `models` lists what it
 * holds and what it was asked to hold but does not. Its `model` and `version` are then both `''`,
 * which no deployment's model can be (MODEL_NAME_PATTERN), so a reader that matches workers to a
 * deployment by model never takes it for one of a deployment's own; `state` is `standby` while it
 * serves no model and `active` while it serves at least one, `jobsInFlight` and `rowsPerS` are
 * totals over its models, and it has no `batchProfile` (each model's is in `models[].profile`).
 * It also reports `busyFraction`: how much of the last heartbeat interval its inference thread had
 * work (worker/busy-meter.ts), which the pool's planner reads as how loaded the worker is.
 */
export interface HeartbeatPayload {
  id: string;
  /** A deployment's worker: its model and version. A pool worker: `''` (see above). */
  model: string;
  version: string;
  state: WorkerState;
  pid: number;
  host: string;
  startedAt: number;
  /** Epoch ms the worker entered `state` (e.g. launching → standby is its cold start). */
  stateSince?: number;
  updatedAt: number;
  /** Rows per second over the last heartbeat interval. */
  rowsPerS: number;
  jobsInFlight: number;
  /** Measured by warm-up (worker/warmup.ts BatchProfile): latency per batch size. */
  batchProfile?: {
    threads: number;
    chosenBatch: number;
    rowsPerS: number;
    entries: Array<{ batch: number; p50Ms: number; p95Ms: number; rowsPerS: number }>;
  };
  /** Sessions the worker runs passes on at once (worker/engine/engine-pool.ts); absent: one. */
  sessions?: number;
  memory: { rssBytes: number; heapUsedBytes: number };
  error?: string;
  /** A shared pool's worker: its pool's name. */
  pool?: string;
  /** A pool worker's models (see PoolModelView). */
  models?: PoolModelView[];
  /** A pool worker's budget for its models' resident memory (--memory-mb), bytes. */
  memoryBudgetBytes?: number;
  /**
   * A pool worker: the share of the last heartbeat interval, in [0, 1], its inference thread had
   * at least one call out (a model's batches, and its loads: session creation and warm-up).
   */
  busyFraction?: number;
  /** A pool worker's loads, models let go and jobs finished (hit: its model was resident when queued) since it began. */
  poolCounts?: PoolWorkerCounts;
}

/** True for a shared pool's worker: its heartbeat names no deployment's model. */
export function isPoolWorker(beat: Pick<HeartbeatPayload, 'pool'>): boolean {
  return typeof beat.pool === 'string';
}

/** Live workers' heartbeats (expired ones are gone with their TTL). SCAN, never KEYS. */
/** On a Redis Cluster every master is scanned, and the values are read per key (they lie in many slots). */
export async function listHeartbeats(redis: Pick<RedisClient, 'scan' | 'mget' | 'get'>, prefix: string): Promise<HeartbeatPayload[]> {
  const keys = new Set<string>();
  for await (const batch of scanKeys(redis, workerKey(prefix, '*'))) for (const key of batch) keys.add(key);
  if (keys.size === 0) return [];
  const beats: HeartbeatPayload[] = [];
  for (const raw of await getMany(redis, [...keys])) {
    if (!raw) continue;
    try {
      beats.push(JSON.parse(raw) as HeartbeatPayload);
    } catch {
      // A foreign or truncated value under our prefix: not a worker.
    }
  }
  return beats;
}
