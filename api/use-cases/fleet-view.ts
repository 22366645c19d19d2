/**
 * The workers of a model version as their heartbeats show them (infra/fleet, the source
 * `GET /v1/pool` reads): asked by submit only for a version no deployment serves (is a
 * hand-started `warmpool worker` serving it?) and by sync inference only once it has timed out
 * (why did nothing answer?). A request to a deployed version that answers in time never reads it.
 *
 * Reading the heartbeats is a SCAN; one read serves every caller of the process for `ttlMs`, so
 * a stream of requests to an unserved version costs one SCAN a second, not one each.
 */
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { scalerColdStartKey } from '../../infra/redis/keys.ts';
import { coldStartEstimateMs } from '../../infra/scaler/index.ts';
import type { Clock } from '../ports.ts';

/** A worker as these use cases need it. */
export interface WorkerSighting {
  id: string;
  state: WorkerState;
  jobsInFlight: number;
  /** Epoch ms it entered `state` (a starting worker's phase began then); absent from older workers. */
  stateSince?: number;
  /** Epoch ms the worker process started. */
  startedAt?: number;
}

export interface FleetView {
  /** The live workers of `model` version `version`, in any state but draining, stopped or failed. */
  workers(model: string, version: string): Promise<WorkerSighting[]>;
  /** The cold start the scaler plans `model` with, learnt from its pool's own starts; undefined before the first. */
  coldStartMs?(model: string): Promise<number | undefined>;
}

/** States of a worker that is serving, or on its way to serving. */
const GONE: ReadonlySet<WorkerState> = new Set(['draining', 'stopped', 'failed']);

export function createFleetView(
  read: () => Promise<HeartbeatPayload[]>,
  options: { clock: Pick<Clock, 'now'>; ttlMs?: number; coldStarts?: (model: string) => Promise<number[]> },
): FleetView {
  const ttlMs = options.ttlMs ?? 1000;
  const coldStarts = options.coldStarts;
  let last: { at: number; beats: Promise<HeartbeatPayload[]> } | undefined;
  const beats = () => {
    const now = options.clock.now();
    if (last && now >= last.at && now - last.at < ttlMs) return last.beats;
    const pending = read();
    last = { at: now, beats: pending };
    // A failed read is not kept: the next caller reads again.
    pending.catch(() => {
      if (last?.beats === pending) last = undefined;
    });
    return pending;
  };
  return {
    async workers(model, version) {
      return (await beats())
        .filter((b) => b.model === model && b.version === version && !GONE.has(b.state))
        .map((b) => ({
          id: b.id,
          state: b.state,
          jobsInFlight: b.jobsInFlight,
          ...(Number.isFinite(b.stateSince) ? { stateSince: b.stateSince } : {}),
          ...(Number.isFinite(b.startedAt) ? { startedAt: b.startedAt } : {}),
        }));
    },
    ...(coldStarts ? { coldStartMs: async (model: string) => coldStartEstimateMs(await coldStarts(model)) } : {}),
  };
}

/** The fleet on the API's Redis, with the live scaler's measured cold starts (not a shadow's). */
export function redisFleetView(redis: RedisClient, prefix: string, clock: Pick<Clock, 'now'>): FleetView {
  const coldStarts = async (model: string) =>
    // Newest first in the list; the estimate wants them newest last.
    (await redis.lrange(scalerColdStartKey(prefix, false, model), 0, -1)).map(Number).reverse();
  return createFleetView(() => listHeartbeats(redis, prefix), { clock, coldStarts });
}
