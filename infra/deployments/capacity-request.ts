/**
 * A late bulk run's request for capacity, from its driver to the scaler: `rowsPerSecondNeeded`
 * (rows left / time left to the deadline) per model, one entry per run. The scaler reads the sum
 * for a deployment each tick and plans at least that many rows/s of active workers, within the
 * deployment's min and max (the request goes through the deployment's settings, never around
 * them). Entries carry their own expiry: a driver that died stops asking within `ttlMs`.
 *
 * Key: `<prefix>:bulk:capacity:<model>`, a hash run ref (`<tenant>/<id>`, run-store.ts) → JSON entry.
 */
import type { RedisClient } from '../redis/client.ts';
import { bulkCapacityKey } from '../redis/keys.ts';

export const CAPACITY_REQUEST_TTL_MS = 60_000;

export interface CapacityEntry {
  /** The run's ref (`<tenant>/<id>`): ids alone are only unique per tenant. */
  runId: string;
  version: string;
  rowsPerSecondNeeded: number;
  deadline: number;
  /** Epoch ms after which the entry no longer counts. */
  expiresAt: number;
}

export interface CapacityRequest {
  rowsPerSecondNeeded: number;
  runs: string[];
}

export async function publishCapacityRequest(
  redis: Pick<RedisClient, 'hset' | 'pexpire'>,
  prefix: string,
  model: string,
  entry: Omit<CapacityEntry, 'expiresAt'>,
  now: number,
  ttlMs = CAPACITY_REQUEST_TTL_MS,
): Promise<void> {
  await redis.hset(bulkCapacityKey(prefix, model), entry.runId, JSON.stringify({ ...entry, expiresAt: now + ttlMs }));
  await redis.pexpire(bulkCapacityKey(prefix, model), ttlMs);
}

export async function clearCapacityRequest(redis: Pick<RedisClient, 'hdel'>, prefix: string, model: string, runId: string): Promise<void> {
  await redis.hdel(bulkCapacityKey(prefix, model), runId);
}

/** The live requests for a model, summed; undefined when there are none. Expired entries are dropped. */
export async function readCapacityRequest(
  redis: Pick<RedisClient, 'hgetall' | 'hdel'>,
  prefix: string,
  model: string,
  now: number,
): Promise<CapacityRequest | undefined> {
  const all = await redis.hgetall(bulkCapacityKey(prefix, model));
  const live: CapacityEntry[] = [];
  const stale: string[] = [];
  for (const [runId, json] of Object.entries(all)) {
    const entry = parseEntry(json);
    if (entry && entry.expiresAt > now && Number.isFinite(entry.rowsPerSecondNeeded)) live.push(entry);
    else stale.push(runId);
  }
  if (stale.length > 0) await redis.hdel(bulkCapacityKey(prefix, model), ...stale);
  if (live.length === 0) return undefined;
  return { rowsPerSecondNeeded: live.reduce((sum, e) => sum + Math.max(0, e.rowsPerSecondNeeded), 0), runs: live.map((e) => e.runId) };
}

function parseEntry(json: string): CapacityEntry | undefined {
  try {
    return JSON.parse(json) as CapacityEntry;
  } catch {
    return undefined;
  }
}
