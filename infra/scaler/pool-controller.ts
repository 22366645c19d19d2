/**
 * The pool controller (DESIGN §8, issue 31 §3–4): the live scaler of the named shared pools, over
 * the pure planner (pool-plan.ts). It runs inside the deployment controller's tick, under its
 * leader lock (controller.ts calls `tick` only while it leads, and the deployment controller
 * leaves every deployment with a `pool` to this one).
 *
 * Tick, per pool, as steps:
 *   1. observe: the pool's workers (the provider's list of `{pool}` joined with the heartbeats
 *      that name the pool, and what each holds: pool-observe.ts), the placement claims still
 *      open, and per member model version what the deployment controller measures for a model —
 *      the arrival history and its forecast over the pool's lead (a worker cold start plus a
 *      tick), the backlog of its queue — plus what the pool's workers measured of it (load time,
 *      resident memory, warm-up rows/s and batch times; remembered between ticks) and each
 *      worker's busy share, its heartbeats' over the last SLO (busy-window.ts);
 *   2. plan: planPool with the planner's memory kept in Redis (a new leader continues it);
 *   3. apply unless in shadow mode, after checking the lock again: launch and drain through the
 *      provider, and each warm worker's holdings (infra/fleet/pool-holdings.ts: re-sent every
 *      tick, the key's TTL outlives a few missed ticks);
 *   4. record the decision with its inputs in the pool's decision log (pool-decisions.ts).
 *
 * Placement at once (`place`, pool-place-now.ts, on a ring of the demand doorbell,
 * infra/fleet/pool-demand.ts): a job for a model version no worker holds was just queued. It is
 * single-flight across rings, API processes and controllers by a claim per (pool, model
 * version), `SET NX PX` (pool-claims.ts), whose value names the worker the model went to. A
 * tick's own load of a model no worker held takes the same claim, and every load asked is shown
 * as on its way (pending-loads.ts) until the worker's heartbeat lists it, so neither path places
 * a model twice; in one process a placement and a tick never interleave (`exclusive`).
 *
 * Lifecycle: `listen(subscriber)` subscribes to the doorbell (not in shadow mode); close() stops
 * it and waits for placements in flight; idempotent. Redis, the provider and the queue stats are
 * the caller's.
 */

import type { Registry } from 'prom-client';
import type { ArrivalSeries, Forecast, PoolProvider, SharedPoolTarget } from '../contracts/pool.ts';
import type { SharedPool } from '../contracts/shared-pool.ts';
import type { DeploymentStore } from '../deployments/deployment-store.ts';
import type { SharedPoolStore } from '../deployments/pool-store.ts';
import { type DemandRing, listenForDemand } from '../fleet/pool-demand.ts';
import type { Clock } from '../kernel/clock.ts';
import { errorMessage } from '../kernel/errors.ts';
import { once } from '../kernel/lifecycle.ts';
import type { Log } from '../kernel/log.ts';
import type { QueueStats } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { scalerPoolMemoryKey } from '../redis/keys.ts';
import { type BusyWindow, createBusyWindow } from './busy-window.ts';
import { sinceFirstArrival, type PoolTickContext as TickContext } from './controller.ts';
import { createColdStartMeter } from './controller-observe.ts';
import { createPendingLoads, mergeLoads } from './pending-loads.ts';
import { actionsOf, type PoolHoldings, refsOf } from './pool-actions.ts';
import { createPlacementClaims } from './pool-claims.ts';
import { createPoolDecisionLog, forecastSummary, type PoolAction, type PoolDecisionLog } from './pool-decisions.ts';
import { createPoolMetrics, observePool, resetPoolGauges } from './pool-metrics.ts';
import {
  batchTimes,
  evictedHere,
  type MemberRef,
  measure,
  memberRefs,
  type PoolMeasurements,
  poolPlanSettings,
  poolWorkerViews,
  scaleForecast,
  scaleObserved,
  standInRate,
} from './pool-observe.ts';
import { createPlaceNow, type PlaceOutcome, type PlaceRing } from './pool-place-now.ts';
import {
  emptyPoolPlanMemory,
  type PoolModelInput,
  type PoolPlan,
  type PoolPlanInput,
  type PoolPlanMemory,
  type PoolPlanSettings,
  type PoolWorkerView,
} from './pool-plan.ts';
import type { ScalerSettings } from './settings.ts';
import { type CountedHistory, createTickCounts } from './tick-counts.ts';

export { type PoolHoldings, redisHoldings } from './pool-actions.ts';

/** Until measured: a model's load onto a warm worker, and its share of a worker's memory budget. */
export const DEFAULT_MODEL_LOAD_MS = 5_000;
export const DEFAULT_MODELS_PER_BUDGET = 4;

export interface PoolControllerDeps {
  redis: RedisClient;
  prefix: string;
  pools: Pick<SharedPoolStore, 'list' | 'get'>;
  deployments: Pick<DeploymentStore, 'get'>;
  /** Arrivals per minute; with completions (and late rows), the planner sees each tick's arrived, served and late rows per model. */
  history: CountedHistory & { series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries> };
  /** The SLO the workers count late rows against (SLO_QUEUE_WAIT_MS). */
  lateSloMs?: number;
  queueStats: Pick<QueueStats, 'backlog'>;
  /** Both required unless `shadow`; never called in shadow mode. */
  provider?: PoolProvider;
  holdings?: PoolHoldings;
  forecast: (input: { series: ArrivalSeries; now: number; horizonS: number }) => Forecast;
  plan: (input: PoolPlanInput) => PoolPlan;
  clock: Clock;
  log: Log;
  settings: ScalerSettings;
  shadow?: boolean;
  tickMs: number;
  historyWindowMs: number;
  identity: string;
  /** Whether this process leads (the deployment controller's lock, as of its last tick). */
  isLeader: () => boolean;
  /** How long a placement claim holds; default 3 ticks, at least 15 s. */
  claimTtlMs?: number;
  /** The scaler's registry (the leader publishes it): pool-metrics.ts. */
  metrics?: Registry;
  /** Defaults to a log over `redis`. */
  decisions?: PoolDecisionLog;
}

/** What a tick of the deployment controller hands over. */
export type PoolTickContext = TickContext;

export type { PlaceOutcome } from './pool-place-now.ts';

export interface PoolController {
  tick(ctx: PoolTickContext): Promise<void>;
  /** Places a model version a job was just queued for, at once and once (see the header). */
  place(ring: PlaceRing): Promise<PlaceOutcome>;
  /** Subscribes to the demand doorbell on `subscriber` (its own connection). */
  listen(subscriber: RedisClient): Promise<void>;
  close(): Promise<void>;
}

/** The planner's memory and the models' measurements, kept together under one key per pool. */
interface StoredPoolState {
  plan: PoolPlanMemory;
  measured: PoolMeasurements;
}

export function createPoolController(deps: PoolControllerDeps): PoolController {
  const shadow = deps.shadow ?? false;
  if (!shadow && (!deps.provider || !deps.holdings))
    throw new Error('the pool controller needs a provider and the holdings channel unless in shadow mode');
  const provider = shadow ? undefined : deps.provider;
  const holdings = shadow ? undefined : deps.holdings;
  const claimTtlMs = deps.claimTtlMs ?? Math.max(15_000, 3 * deps.tickMs);
  const decisions = deps.decisions ?? createPoolDecisionLog(deps.redis, deps.prefix);
  const coldStarts = createColdStartMeter(deps.redis, deps.prefix, shadow);
  const metrics = deps.metrics ? createPoolMetrics(deps.metrics) : undefined;
  const claims = createPlacementClaims(deps.redis, deps.prefix, deps.identity, claimTtlMs);
  const inFlight = new Set<Promise<unknown>>();
  // Loads asked and not yet in a heartbeat (pending-loads.ts), so neither path places one twice.
  const pending = createPendingLoads(claimTtlMs);
  // A placement and a tick never interleave in this process: each sees what the other asked.
  let serial: Promise<unknown> = Promise.resolve();
  const exclusive = <T>(fn: () => Promise<T>): Promise<T> => {
    const run = serial.then(fn, fn);
    serial = run.catch(() => undefined);
    return run;
  };
  let stopListening: (() => Promise<void>) | undefined;
  let closed = false;

  const targetOf = (pool: SharedPool): SharedPoolTarget => ({ pool: pool.name, memoryMb: pool.memoryMb });
  const memoryKey = (pool: string) => scalerPoolMemoryKey(deps.prefix, shadow, pool);

  async function loadState(pool: string): Promise<StoredPoolState> {
    const raw = await deps.redis.get(memoryKey(pool));
    try {
      const parsed = raw ? (JSON.parse(raw) as Partial<StoredPoolState>) : {};
      const plan = parsed.plan && typeof parsed.plan === 'object' && parsed.plan.pool ? parsed.plan : emptyPoolPlanMemory();
      return { plan, measured: parsed.measured ?? {} };
    } catch {
      return { plan: emptyPoolPlanMemory(), measured: {} };
    }
  }

  const place = (ring: PlaceRing): Promise<PlaceOutcome> => (provider && holdings ? placeNow(ring) : Promise.resolve('follower'));
  const placeNow = createPlaceNow({
    redis: deps.redis,
    prefix: deps.prefix,
    pools: deps.pools,
    deployments: deps.deployments,
    clock: deps.clock,
    log: deps.log,
    identity: deps.identity,
    provider: provider as PoolProvider,
    holdings: holdings as PoolHoldings,
    claims,
    pending,
    decisions,
    metrics,
    acting: () => !closed && !shadow && deps.isLeader(),
    exclusive,
    measured: async (pool, beats) => measure((await loadState(pool)).measured, beats),
    settings: (pool) => planSettings(pool, undefined),
    defaultMemoryMb: (memoryMb) => memoryMb / DEFAULT_MODELS_PER_BUDGET,
  });

  // Counted per model (the history is): a version's share of them goes to its planner model.
  const observeTick = createTickCounts(deps.history);
  // Per pool, each worker's busy share over the SLO (busy-window.ts): one heartbeat's interval is noise.
  const busyWindows = new Map<string, BusyWindow>();
  const planSettings = (pool: SharedPool, coldStartMs: number | undefined) => poolPlanSettings(pool, deps.settings, coldStartMs);

  async function modelInputs(refs: readonly MemberRef[], measured: PoolMeasurements, settings: PoolPlanSettings, now: number) {
    const horizonS = Math.ceil((settings.coldStartMs + deps.tickMs) / 1000);
    const unmeasuredRate = standInRate(measured);
    const countsLate = deps.lateSloMs !== undefined && settings.sloQueueWaitMs === deps.lateSloMs;
    const perModel = new Map<string, { forecast: Forecast; observed: PoolModelInput['observed'] }>();
    const inputs: PoolModelInput[] = [];
    for (const r of refs) {
      let seen = perModel.get(r.model);
      if (!seen) {
        const raw = await deps.history.series(r.model, now - deps.historyWindowMs, now);
        const forecast = deps.forecast({ series: sinceFirstArrival(raw), now, horizonS });
        seen = { forecast, observed: await observeTick(r.model, raw, now, countsLate) };
        perModel.set(r.model, seen);
      }
      const { forecast, observed } = seen;
      const m = measured[r.key] ?? {};
      inputs.push({
        ...(observed ? { observed: scaleObserved(observed, r.share) } : {}),
        model: r.key,
        forecast: scaleForecast(forecast, r.share),
        backlog: await deps.queueStats.backlog({ model: r.model, versions: [r.version] }),
        perWorkerRatePerSec: m.rowsPerSec ?? unmeasuredRate,
        ...batchTimes(m),
        loadMs: m.loadMs ?? DEFAULT_MODEL_LOAD_MS,
        memoryMb: m.memoryMb ?? settings.memoryMb / DEFAULT_MODELS_PER_BUDGET,
      });
    }
    return inputs;
  }

  async function scalePool(pool: SharedPool, ctx: PoolTickContext): Promise<void> {
    const { now } = ctx;
    const target = targetOf(pool);
    const refs = memberRefs(pool.name, ctx.deployments);
    const beats = ctx.beats.filter((b) => b.pool === pool.name);
    const listed = provider ? await provider.list(target) : undefined;
    const state = await loadState(pool.name);
    const measured = measure(state.measured, beats);
    // The cold-start meter keys by model: the pool's workers are timed under `pool:<name>`.
    const coldKey = `pool:${pool.name}`;
    await coldStarts.observe(
      coldKey,
      beats.map((b) => ({ ...b, model: coldKey })),
    );
    const settings = planSettings(pool, (await coldStarts.estimate(coldKey)).ms);
    const models = await modelInputs(refs, measured, settings, now);
    const asked = mergeLoads(await claims.open(pool.name, refs), pending.active(now));
    const busy = busyWindows.get(pool.name) ?? createBusyWindow();
    busyWindows.set(pool.name, busy);
    busy.note(
      now,
      settings.sloQueueWaitMs,
      beats.flatMap((b) => (b.busyFraction !== undefined ? [[b.id, b.busyFraction] as const] : [])),
    );
    const workers = poolWorkerViews(beats, listed, asked, now, busy.share);
    const plan = deps.plan({ now, settings, models, workers, memory: state.plan });
    const stored: StoredPoolState = { plan: plan.memory, measured };
    await deps.redis.set(memoryKey(pool.name), JSON.stringify(stored), 'PX', Math.max(86_400_000, 2 * settings.scaleDownStabilizationMs));

    const planned = actionsOf(plan, refs, workers);
    const applied = provider && holdings && (await ctx.stillLeader()) ? await apply(target, planned, refs) : [];
    if (applied.length > 0) applied.push(...(await noteLoads(pool.name, plan, workers, evictedHere(beats), applied, refs, now)));
    if (metrics) observePool(metrics, pool.name, workers, plan, applied.length > 0);
    const { memory: _memory, ...rest } = plan;
    await decisions.record({
      at: now,
      pool: pool.name,
      shadow,
      leader: deps.identity,
      trigger: 'tick',
      settings,
      models: models.map(({ forecast, ...m }) => ({ ...m, forecast: forecastSummary(forecast) })),
      workers,
      plan: rest,
      applied,
    });
  }

  async function apply(target: SharedPoolTarget, actions: PoolAction[], refs: readonly MemberRef[]): Promise<PoolAction[]> {
    const p = provider as PoolProvider;
    const h = holdings as PoolHoldings;
    const done: PoolAction[] = [];
    for (const a of actions) {
      try {
        if (a.action === 'launch') await p.launch(target, a.count, { startAs: 'standby' });
        else if (a.action === 'drain') await p.drain(target, a.workerId);
        else if (a.action === 'hold') await h.set(a.workerId, refsOf(a.models, refs));
        done.push(a);
      } catch (err) {
        const error = errorMessage(err);
        deps.log.warn({ pool: target.pool, ...a, err: error }, 'pool scaler: action failed');
        done.push({ ...a, error });
      }
    }
    const changed = done.filter((a) => a.action !== 'hold');
    if (changed.length > 0) deps.log.info({ pool: target.pool, actions: changed }, 'pool scaler applied');
    return done;
  }

  /**
   * Remembers the loads a tick's holdings asked for (pending-loads.ts), and claims each load of a
   * model no worker held, so a ring before the heartbeat shows it finds the claim and loads nothing.
   */
  async function noteLoads(
    pool: string,
    plan: PoolPlan,
    workers: PoolWorkerView[],
    evicted: ReadonlySet<string>,
    applied: PoolAction[],
    refs: readonly MemberRef[],
    now: number,
  ): Promise<PoolAction[]> {
    const told = new Set(
      applied.filter((a) => a.action === 'hold' && a.error === undefined).map((a) => (a as { workerId: string }).workerId),
    );
    const byKey = new Map(refs.map((r) => [r.key, r]));
    const more: PoolAction[] = [];
    for (const load of plan.loads) {
      if (!told.has(load.workerId)) continue;
      pending.remember(load.workerId, load.model, now);
      const ref = byKey.get(load.model);
      if (!ref) continue;
      const cold = !workers.some((w) => w.models.some((h) => h.model === load.model));
      if (cold) await claims.take(pool, ref, load.workerId, now);
      // A model this worker evicted stays out while still listed (pool-holdings.ts): only an ask brings it back.
      if (evicted.has(`${load.workerId}\u0000${load.model}`)) {
        const action: PoolAction = { action: 'load-now', workerId: load.workerId, model: load.model, why: 'evicted there before' };
        try {
          await (holdings as PoolHoldings).askLoad(load.workerId, ref);
          more.push(action);
        } catch (err) {
          more.push({ ...action, error: errorMessage(err) });
        }
      }
    }
    return more;
  }

  /** Workers of a pool that no longer exists (deleted once no deployment named it) drain. */
  async function retireOrphans(pools: ReadonlySet<string>, ctx: PoolTickContext): Promise<void> {
    if (!provider) return;
    const orphans = ctx.beats.filter((b) => b.pool !== undefined && !pools.has(b.pool) && b.state !== 'draining' && b.state !== 'stopped');
    if (orphans.length === 0 || !(await ctx.stillLeader())) return;
    for (const b of orphans) {
      try {
        await provider.drain({ pool: b.pool as string }, b.id);
      } catch (err) {
        deps.log.warn({ pool: b.pool, workerId: b.id, err: errorMessage(err) }, 'pool scaler: could not drain a worker of a deleted pool');
      }
    }
  }

  /** Runs a placement, tracked so close() waits for it; errors are logged (the tick places the model anyway). */
  function onRing(ring: DemandRing): void {
    const run = place(ring)
      .catch((err) => deps.log.warn({ ...ring, err: errorMessage(err) }, 'pool scaler: placement failed; the tick will place it'))
      .finally(() => inFlight.delete(run));
    inFlight.add(run);
  }

  return {
    async tick(ctx) {
      if (closed) return;
      await exclusive(async () => {
        const pools = await deps.pools.list();
        if (metrics) resetPoolGauges(metrics);
        for (const pool of pools) {
          try {
            await scalePool(pool, ctx);
          } catch (err) {
            // One pool's trouble must not starve the others; the next tick redoes it all.
            deps.log.warn({ pool: pool.name, err: errorMessage(err) }, 'pool scaler: tick failed for a pool');
          }
        }
        await retireOrphans(new Set(pools.map((p) => p.name)), ctx);
      });
    },
    place,
    async listen(subscriber) {
      if (shadow || closed || stopListening) return;
      stopListening = await listenForDemand(subscriber, deps.prefix, onRing);
    },
    close: once(async () => {
      closed = true;
      await stopListening?.();
      await Promise.allSettled([...inFlight]);
    }),
  };
}
