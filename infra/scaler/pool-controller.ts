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
 *      resident memory, warm-up rows/s; remembered between ticks);
 *   2. plan: planPool with the planner's memory kept in Redis (a new leader continues it);
 *   3. apply unless in shadow mode, after checking the lock again: launch and drain through the
 *      provider, and each warm worker's holdings (infra/fleet/pool-holdings.ts: re-sent every
 *      tick, the key's TTL outlives a few missed ticks);
 *   4. record the decision with its inputs in the pool's decision log (pool-decisions.ts).
 *
 * Placement at once (`place`, on a ring of the demand doorbell, infra/fleet/pool-demand.ts): a
 * job for a model version no worker holds was just queued. Single-flight across rings, API
 * processes and controllers by a claim per (pool, model version), `SET NX PX` (poolClaimKey):
 * whoever wins it checks the heartbeats, and if nobody holds or loads the model picks a worker
 * (pool-placement.ts) and asks it to load the model now; the claim's value names that worker, so
 * the next ticks (this leader's or another's) see the load as on its way until the heartbeat
 * shows it. A ring that loses the claim does nothing. With no warm worker it launches one when
 * the pool may grow, and the tick places the model once the worker is warm.
 *
 * Lifecycle: `listen(subscriber)` subscribes to the doorbell (not in shadow mode); close() stops
 * it and waits for placements in flight; idempotent. Redis, the provider and the queue stats are
 * the caller's.
 */

import type { ArrivalSeries, Forecast, PoolProvider, SharedPoolTarget } from '../contracts/pool.ts';
import type { SharedPool } from '../contracts/shared-pool.ts';
import type { DeploymentStore } from '../deployments/deployment-store.ts';
import type { SharedPoolStore } from '../deployments/pool-store.ts';
import { type DemandRing, listenForDemand } from '../fleet/pool-demand.ts';
import { askLoad, type ModelRef, sendHoldings } from '../fleet/pool-holdings.ts';
import { listHeartbeats } from '../fleet/worker-states.ts';
import type { Clock } from '../kernel/clock.ts';
import { errorMessage } from '../kernel/errors.ts';
import { once } from '../kernel/lifecycle.ts';
import type { Log } from '../kernel/log.ts';
import type { QueueStats } from '../queue/index.ts';
import { getMany, type RedisClient } from '../redis/client.ts';
import { poolClaimKey, scalerPoolMemoryKey } from '../redis/keys.ts';
import { sinceFirstArrival, type PoolTickContext as TickContext } from './controller.ts';
import { createColdStartMeter } from './controller-observe.ts';
import { createPoolDecisionLog, type PoolAction, type PoolDecisionLog, type PoolDecisionRecord } from './pool-decisions.ts';
import { type MemberRef, measure, memberRefs, modelKey, type PoolMeasurements, poolWorkerViews, scaleForecast } from './pool-observe.ts';
import { chooseLanding, type Landing } from './pool-placement.ts';
import {
  emptyPoolPlanMemory,
  type PoolModelInput,
  type PoolPlan,
  type PoolPlanInput,
  type PoolPlanMemory,
  type PoolPlanSettings,
} from './pool-plan.ts';
import type { ScalerSettings } from './settings.ts';

/** What the controller needs of the holdings channel (infra/fleet/pool-holdings.ts sendHoldings / askLoad). */
export interface PoolHoldings {
  /** The worker's whole desired set. */
  set(workerId: string, models: readonly ModelRef[]): Promise<void>;
  /** Adds one model and asks the worker to load it first, evicting to make room. */
  askLoad(workerId: string, ref: ModelRef): Promise<void>;
}

/** The holdings channel over Redis (infra/fleet/pool-holdings.ts). */
export function redisHoldings(redis: Pick<RedisClient, 'eval'>, prefix: string, clock: Pick<Clock, 'now'>): PoolHoldings {
  return {
    set: async (workerId, models) => {
      await sendHoldings(redis, prefix, workerId, models, { now: clock.now() });
    },
    askLoad: async (workerId, ref) => {
      await askLoad(redis, prefix, workerId, ref, { now: clock.now() });
    },
  };
}

/** Until measured: a model's load onto a warm worker, and its share of a worker's memory budget. */
export const DEFAULT_MODEL_LOAD_MS = 5_000;
export const DEFAULT_MODELS_PER_BUDGET = 4;

export interface PoolControllerDeps {
  redis: RedisClient;
  prefix: string;
  pools: Pick<SharedPoolStore, 'list' | 'get'>;
  deployments: Pick<DeploymentStore, 'get'>;
  history: { series(model: string, fromMs: number, toMs: number): Promise<ArrivalSeries> };
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
  /** Defaults to a log over `redis`. */
  decisions?: PoolDecisionLog;
}

/** What a tick of the deployment controller hands over. */
export type PoolTickContext = TickContext;

export type PlaceOutcome = 'follower' | 'not-member' | 'claimed' | 'held' | 'placed' | 'launched' | 'no-room';

export interface PoolController {
  tick(ctx: PoolTickContext): Promise<void>;
  /** Places a model version a job was just queued for, at once and once (see the header). */
  place(ring: Pick<DemandRing, 'pool' | 'model' | 'version'>): Promise<PlaceOutcome>;
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
  const inFlight = new Set<Promise<unknown>>();
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

  /** Open claims: worker id → model keys placed on it and not yet in a heartbeat. */
  async function readClaims(pool: string, refs: readonly MemberRef[]): Promise<Map<string, string[]>> {
    const out = new Map<string, string[]>();
    if (refs.length === 0) return out;
    const values = await getMany(
      deps.redis,
      refs.map((r) => poolClaimKey(deps.prefix, pool, r.model, r.version)),
    );
    refs.forEach((r, i) => {
      const workerId = claimWorker(values[i]);
      if (workerId) out.set(workerId, [...(out.get(workerId) ?? []), r.key]);
    });
    return out;
  }

  function planSettings(pool: SharedPool, coldStartMs: number | undefined): PoolPlanSettings {
    const s = deps.settings;
    return {
      min: pool.min,
      max: pool.max,
      standby: pool.standby,
      memoryMb: pool.memoryMb,
      sloQueueWaitMs: s.sloQueueWaitMs,
      coldStartMs: coldStartMs ?? s.coldStartMs,
      scaleDownStabilizationMs: s.scaleDownStabilizationMs,
      targetUtilization: s.targetUtilization,
      ...(s.minLifetimeColdStarts !== undefined ? { minLifetimeColdStarts: s.minLifetimeColdStarts } : {}),
      ...(s.sloTarget !== undefined ? { sloTarget: s.sloTarget } : {}),
    };
  }

  async function modelInputs(refs: readonly MemberRef[], measured: PoolMeasurements, settings: PoolPlanSettings, now: number) {
    const horizonS = Math.ceil((settings.coldStartMs + deps.tickMs) / 1000);
    const forecasts = new Map<string, Forecast>();
    const inputs: PoolModelInput[] = [];
    for (const r of refs) {
      let forecast = forecasts.get(r.model);
      if (!forecast) {
        const series = sinceFirstArrival(await deps.history.series(r.model, now - deps.historyWindowMs, now));
        forecast = deps.forecast({ series, now, horizonS });
        forecasts.set(r.model, forecast);
      }
      const m = measured[r.key] ?? {};
      inputs.push({
        model: r.key,
        forecast: scaleForecast(forecast, r.share),
        backlog: await deps.queueStats.backlog({ model: r.model, versions: [r.version] }),
        perWorkerRatePerSec: m.rowsPerSec ?? 0,
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
    const workers = poolWorkerViews(beats, listed, await readClaims(pool.name, refs), now);
    const plan = deps.plan({ now, settings, models, workers, memory: state.plan });
    const stored: StoredPoolState = { plan: plan.memory, measured };
    await deps.redis.set(memoryKey(pool.name), JSON.stringify(stored), 'PX', Math.max(86_400_000, 2 * settings.scaleDownStabilizationMs));

    const planned = actionsOf(plan, refs, workers);
    const applied = provider && holdings && (await ctx.stillLeader()) ? await apply(target, planned, refs) : [];
    const { memory: _memory, ...rest } = plan;
    await decisions.record({
      at: now,
      pool: pool.name,
      shadow,
      leader: deps.identity,
      trigger: 'tick',
      settings,
      models: models.map(({ forecast, ...m }) => ({ ...m, forecast: summary(forecast) })),
      workers,
      plan: rest,
      applied,
    });
  }

  async function apply(target: SharedPoolTarget, actions: PoolAction[], refs: readonly MemberRef[]): Promise<PoolAction[]> {
    const p = provider as PoolProvider;
    const h = holdings as PoolHoldings;
    const byKey = new Map(refs.map((r) => [r.key, r]));
    const done: PoolAction[] = [];
    for (const a of actions) {
      try {
        if (a.action === 'launch') await p.launch(target, a.count, { startAs: 'standby' });
        else if (a.action === 'drain') await p.drain(target, a.workerId);
        else if (a.action === 'hold') await h.set(a.workerId, refsOf(a.models, byKey));
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

  async function place(ring: Pick<DemandRing, 'pool' | 'model' | 'version'>): Promise<PlaceOutcome> {
    if (closed || shadow || !deps.isLeader()) return 'follower';
    const d = await deps.deployments.get(ring.model);
    if (!d || d.pool !== ring.pool || !d.versions.some((v) => v.version === ring.version)) return 'not-member';
    const key = poolClaimKey(deps.prefix, ring.pool, ring.model, ring.version);
    const now = deps.clock.now();
    // First the claim, then the look: the steady case (a held model rung once a second) costs one SET.
    if ((await deps.redis.set(key, JSON.stringify({ workerId: '', by: deps.identity, at: now }), 'PX', claimTtlMs, 'NX')) !== 'OK')
      return 'claimed';
    const pool = await deps.pools.get(ring.pool);
    if (!pool) return 'not-member';
    const target = targetOf(pool);
    const beats = (await listHeartbeats(deps.redis, deps.prefix)).filter((b) => b.pool === pool.name);
    const listed = await (provider as PoolProvider).list(target);
    const views = poolWorkerViews(beats, listed, new Map(), now);
    const state = await loadState(pool.name);
    const measured = measure(state.measured, beats);
    const fallbackMb = pool.memoryMb / DEFAULT_MODELS_PER_BUDGET;
    const mk = modelKey(ring.model, ring.version);
    const landing: Landing = chooseLanding(views, mk, (m) => measured[m]?.memoryMb ?? fallbackMb, pool.memoryMb);
    let applied: PoolAction[] = [];
    let outcome: PlaceOutcome;
    if (landing.kind === 'held') {
      outcome = 'held';
    } else if (landing.kind === 'load') {
      await deps.redis.set(key, JSON.stringify({ workerId: landing.workerId, by: deps.identity, at: now }), 'PX', claimTtlMs, 'XX');
      const action: PoolAction = { action: 'load-now', workerId: landing.workerId, model: mk, why: landing.why };
      try {
        await (holdings as PoolHoldings).askLoad(landing.workerId, { model: ring.model, version: ring.version });
        applied = [action];
      } catch (err) {
        applied = [{ ...action, error: errorMessage(err) }];
        // Let the next ring (or the tick) try again rather than wait out the claim.
        await deps.redis.del(key);
      }
      outcome = 'placed';
    } else if (views.some((w) => w.state === 'starting')) {
      outcome = 'no-room'; // a worker is on its way; the tick places the model on it
    } else if (views.filter((w) => w.state !== 'draining').length < pool.max) {
      const action: PoolAction = { action: 'launch', count: 1 };
      try {
        await (provider as PoolProvider).launch(target, 1, { startAs: 'standby' });
        applied = [action];
      } catch (err) {
        applied = [{ ...action, error: errorMessage(err) }];
      }
      outcome = 'launched';
    } else {
      outcome = 'no-room';
    }
    if (applied.length > 0) deps.log.info({ pool: pool.name, model: mk, actions: applied }, 'pool scaler placed a first request');
    return outcome;
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
      for (const pool of await deps.pools.list()) {
        try {
          await scalePool(pool, ctx);
        } catch (err) {
          // One pool's trouble must not starve the others; the next tick redoes it all.
          deps.log.warn({ pool: pool.name, err: errorMessage(err) }, 'pool scaler: tick failed for a pool');
        }
      }
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

/** The plan as actions, in the order to apply: launches, then holdings, then drains. */
export function actionsOf(plan: PoolPlan, refs: readonly MemberRef[], workers: ReadonlyArray<{ id: string; state: string }>): PoolAction[] {
  const known = new Set(refs.map((r) => r.key));
  const warm = new Set(workers.filter((w) => w.state === 'warm').map((w) => w.id));
  const actions: PoolAction[] = [];
  if (plan.launch > 0) actions.push({ action: 'launch', count: plan.launch });
  for (const p of plan.placement) {
    if (!warm.has(p.workerId)) continue;
    actions.push({ action: 'hold', workerId: p.workerId, models: p.models.filter((m) => known.has(m)) });
  }
  for (const id of plan.drain) actions.push({ action: 'drain', workerId: id });
  return actions;
}

function refsOf(keys: readonly string[], byKey: ReadonlyMap<string, MemberRef>): ModelRef[] {
  return keys.flatMap((k) => {
    const r = byKey.get(k);
    return r ? [{ model: r.model, version: r.version }] : [];
  });
}

function claimWorker(raw: string | null | undefined): string | undefined {
  if (!raw) return undefined;
  try {
    const v = JSON.parse(raw) as { workerId?: unknown };
    return typeof v.workerId === 'string' && v.workerId !== '' ? v.workerId : undefined;
  } catch {
    return undefined;
  }
}

function summary(f: Forecast): PoolDecisionRecord['models'][number]['forecast'] {
  return { ratePerSec: f.ratePerSec, ...(f.upperRatePerSec !== undefined ? { upperRatePerSec: f.upperRatePerSec } : {}), method: f.method };
}
