/**
 * Placement at once (issue 31 §3): a job for a pool member was just queued and its API rang the
 * pool's doorbell (infra/fleet/pool-demand.ts). Single-flight by the (pool, model version) claim
 * (pool-claims.ts), taken first: a ring that loses it does nothing. The winner looks at the pool
 * as the heartbeats, the provider and the loads already asked (pending-loads.ts) show it, and
 *
 *   a worker holds or loads the model              → nothing (`held`)
 *   a warm worker can take it (pool-placement.ts)  → the claim names it, the worker is asked to
 *                                                    load it now (`placed`)
 *   a worker is starting                           → nothing: the tick places it there (`no-room`)
 *   the pool may grow                              → one worker is launched (`launched`)
 *   else                                           → nothing: the tick evicts or waits (`no-room`)
 *
 * What it did goes to the pool's decision log (trigger `demand`) and the placements counter.
 * The pool controller runs it only as leader, never beside its own tick (`exclusive`).
 */

import type { PoolProvider, SharedPoolTarget } from '../contracts/pool.ts';
import type { SharedPool } from '../contracts/shared-pool.ts';
import type { Deployment } from '../deployments/deployment-store.ts';
import type { DemandRing } from '../fleet/pool-demand.ts';
import { listHeartbeats } from '../fleet/worker-states.ts';
import type { Clock } from '../kernel/clock.ts';
import { errorMessage } from '../kernel/errors.ts';
import type { Log } from '../kernel/log.ts';
import type { RedisClient } from '../redis/client.ts';
import type { PendingLoads } from './pending-loads.ts';
import type { PoolHoldings } from './pool-actions.ts';
import type { PlacementClaims } from './pool-claims.ts';
import { demandRecord, type PoolAction, type PoolDecisionLog } from './pool-decisions.ts';
import type { PoolMetrics } from './pool-metrics.ts';
import { modelKey, type PoolMeasurements, poolWorkerViews } from './pool-observe.ts';
import { chooseLanding } from './pool-placement.ts';
import type { PoolPlanSettings } from './pool-plan.ts';

export type PlaceOutcome = 'follower' | 'not-member' | 'claimed' | 'held' | 'placed' | 'launched' | 'no-room';

export type PlaceRing = Pick<DemandRing, 'pool' | 'model' | 'version'>;

export interface PlaceNowDeps {
  redis: RedisClient;
  prefix: string;
  pools: { get(name: string): Promise<SharedPool | null> };
  deployments: { get(model: string): Promise<Pick<Deployment, 'pool' | 'versions'> | null> };
  provider: PoolProvider;
  holdings: PoolHoldings;
  claims: PlacementClaims;
  pending: PendingLoads;
  decisions: PoolDecisionLog;
  metrics?: PoolMetrics;
  clock: Clock;
  log: Log;
  identity: string;
  /** Whether to act at all (leading, not shadow, not closed). */
  acting: () => boolean;
  /** Runs `fn` never beside the controller's tick. */
  exclusive: <T>(fn: () => Promise<T>) => Promise<T>;
  /** What the pool's workers measured of its models (resident memory decides "room"). */
  measured: (pool: string, beats: Awaited<ReturnType<typeof listHeartbeats>>) => Promise<PoolMeasurements>;
  /** The planner's settings for the pool, as a record keeps them. */
  settings: (pool: SharedPool) => PoolPlanSettings;
  /** A model's resident memory before any worker measured it, for a budget of `memoryMb`. */
  defaultMemoryMb: (memoryMb: number) => number;
}

export function createPlaceNow(deps: PlaceNowDeps): (ring: PlaceRing) => Promise<PlaceOutcome> {
  return async (ring) => {
    if (!deps.acting()) return 'follower';
    const d = await deps.deployments.get(ring.model);
    if (!d || d.pool !== ring.pool || !d.versions.some((v) => v.version === ring.version)) return 'not-member';
    // First the claim, then the look: the steady case (a held model rung once a second) costs one SET.
    if (!(await deps.claims.take(ring.pool, ring, '', deps.clock.now()))) return 'claimed';
    return deps.exclusive(() => placeClaimed(deps, ring));
  };
}

/** The rest of a placement, under its claim (see the header's table). */
async function placeClaimed(deps: PlaceNowDeps, ring: PlaceRing): Promise<PlaceOutcome> {
  const now = deps.clock.now();
  const pool = await deps.pools.get(ring.pool);
  if (!pool) return 'not-member';
  const target: SharedPoolTarget = { pool: pool.name, memoryMb: pool.memoryMb };
  const beats = (await listHeartbeats(deps.redis, deps.prefix)).filter((b) => b.pool === pool.name);
  const views = poolWorkerViews(beats, await deps.provider.list(target), deps.pending.active(now), now);
  const measured = await deps.measured(pool.name, beats);
  const fallbackMb = deps.defaultMemoryMb(pool.memoryMb);
  const mk = modelKey(ring.model, ring.version);
  const landing = chooseLanding(views, mk, (m) => measured[m]?.memoryMb ?? fallbackMb, pool.memoryMb);
  let applied: PoolAction[] = [];
  let outcome: PlaceOutcome = 'no-room';
  if (landing.kind === 'held') {
    outcome = 'held';
  } else if (landing.kind === 'load') {
    await deps.claims.name(ring.pool, ring, landing.workerId, now);
    const action: PoolAction = { action: 'load-now', workerId: landing.workerId, model: mk, why: landing.why };
    try {
      await deps.holdings.askLoad(landing.workerId, { model: ring.model, version: ring.version });
      deps.pending.remember(landing.workerId, mk, now);
      deps.metrics?.placements.inc({ pool: pool.name, trigger: 'demand' });
      applied = [action];
    } catch (err) {
      applied = [{ ...action, error: errorMessage(err) }];
      // Let the next ring (or the tick) try again rather than wait out the claim.
      await deps.claims.release(ring.pool, ring);
    }
    outcome = 'placed';
  } else if (!views.some((w) => w.state === 'starting') && views.filter((w) => w.state !== 'draining').length < pool.max) {
    const action: PoolAction = { action: 'launch', count: 1 };
    try {
      await deps.provider.launch(target, 1, { startAs: 'standby' });
      applied = [action];
    } catch (err) {
      applied = [{ ...action, error: errorMessage(err) }];
    }
    outcome = 'launched';
  }
  if (applied.length > 0) {
    deps.log.info({ pool: pool.name, model: mk, actions: applied }, 'pool scaler placed a first request');
    const base = { at: now, pool: pool.name, shadow: false, leader: deps.identity, settings: deps.settings(pool), workers: views, applied };
    await deps.decisions.record(demandRecord(base, mk, landing.kind === 'load' ? landing : undefined, outcome === 'launched'));
  }
  return outcome;
}
