/**
 * A shared pool worker's heartbeat written straight into Redis, as a pool worker would publish
 * it (DESIGN §6): standby while it holds no model, active while it holds some; `model` and
 * `version` empty, as a pool worker's are. For tests of what reads heartbeats (the pool
 * controller, GET /v1/pool) without starting a worker process.
 */
import type { HeartbeatPayload, PoolModelView } from '../../infra/fleet/worker-states.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { workerKey } from '../../infra/redis/keys.ts';

export interface PoolBeatOptions extends Partial<HeartbeatPayload> {
  id: string;
  pool: string;
  /** Its updatedAt; started 10 minutes before unless `startedAt` says. */
  now: number;
  models?: PoolModelView[];
}

export async function writePoolBeat(redis: RedisClient, prefix: string, o: PoolBeatOptions): Promise<void> {
  const { now, models = [], ...rest } = o;
  const beat: HeartbeatPayload = {
    model: '',
    version: '',
    state: models.length > 0 ? 'active' : 'standby',
    pid: 1,
    host: 'test-host',
    startedAt: now - 600_000,
    updatedAt: now,
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    models,
    ...rest,
  };
  await redis.set(workerKey(prefix, o.id), JSON.stringify(beat), 'PX', 60_000);
}
