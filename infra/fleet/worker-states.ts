/** Workers' heartbeats in Redis (DESIGN §6): written by each worker, read by the pool view, the scaler and tools. */

import type { WorkerState } from '../contracts/worker-state.ts';
import { getMany, type RedisClient, scanKeys } from '../redis/client.ts';
import { workerKey } from '../redis/keys.ts';

/** What a worker publishes with each heartbeat (DESIGN §6), read by the pool view and tools. */
export interface HeartbeatPayload {
  id: string;
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
