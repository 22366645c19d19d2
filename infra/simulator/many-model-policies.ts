/**
 * The shared-pool policies (issue 31 §5), each a PoolScaler the many-model world ticks:
 *
 * - shared: the live planner (infra/scaler pool-plan.ts) fed as the controller feeds it: per model
 *   the live forecaster over a worker cold start plus a tick, its backlog, the full-batch rate,
 *   its load time as measured by the pool's own loads (the assumed one until then), its resident
 *   memory; the worker cold start as measured (the settings' until the first is warm).
 * - keep-alive: what serverless platforms do: a shared LRU pool where a model stays loaded
 *   KEEP_ALIVE_MS after its last request and is then unloaded; workers scaled reactively like the
 *   single-model reactive baseline (policies.ts: the waiting jobs at `backlogPerWorker` a replica,
 *   the served rate of the last minute at the full-batch rate × targetUtilization, the larger
 *   winning, down only to the most wanted over 300 s), and never below what holds the memory of
 *   the models called within the keep-alive (a platform that promises it must hold them). No
 *   standby, no forecast; a model nobody holds is loaded on demand by the world's router, and a
 *   model whose waiting jobs pass `backlogPerWorker` per worker holding it gets one more copy, on
 *   the worker with room holding the fewest models (what a multi-model endpoint does when an
 *   instance holding the model is busy).
 * - oracle: the same planner with perfect foresight: each model's forecast is its true future —
 *   the mean rate over the horizon, its busiest minute as the upper quantile and the burst —
 *   times 1 + headroom. A lower bound on what forecasting could buy the planner, not a proof of
 *   the cheapest possible pool.
 */
import type { Backlog, Forecast } from '../contracts/pool.ts';
import {
  createBusyWindow,
  emptyPoolPlanMemory,
  forecastArrivals,
  type PoolModelInput,
  type PoolPlan,
  type PoolPlanSettings,
  type PoolWorkerView,
  planPool,
} from '../scaler/index.ts';
import { MINUTE_MS, type ModelSpec, type PoolAction, type PoolObservation, type PoolScaler } from './many-model-world.ts';

/** How long keep-alive keeps an idle model loaded: 10 minutes, the serverless platforms' figure. */
export const KEEP_ALIVE_MS = 600_000;
const REACTIVE_WINDOW_MS = 60_000;
const REACTIVE_DOWN_MS = 300_000;

export interface PoolContext {
  models: readonly ModelSpec[];
  /** Realised arrivals per minute per model: the history the live scaler records. */
  counts: readonly (readonly number[])[];
  startMs: number;
  missing: readonly boolean[];
  fromMinute: number;
  /** What the planner assumes a load takes until one is measured. */
  assumedLoadMs: number;
  workerRate: number;
  batchMs: number;
  /** A batch of one row (the profile's smallest). */
  batchOneMs?: number;
  tickMs: number;
  plan: PoolPlanSettings;
  /** Forecasts by model and minute, shared by replays of the same world. */
  forecasts?: Map<number, Forecast>;
  /** Hears every plan the planner makes (the comparison averages its terms). */
  onPlan?: (plan: PoolPlan) => void;
}

export function sharedPolicy(ctx: PoolContext): PoolScaler {
  const forecasts = ctx.forecasts ?? new Map<number, Forecast>();
  const n = ctx.models.length;
  return plannerPolicy('shared', ctx, (k, now, horizonS) => {
    const key = (Math.floor(now / MINUTE_MS) * n + k) * 10_000 + horizonS;
    let f = forecasts.get(key);
    if (!f) {
      f = forecastArrivals({
        series: { startMs: ctx.startMs, perMinute: ctx.counts[k] as number[] },
        now,
        horizonS,
        options: { missing: ctx.missing as boolean[] },
      });
      forecasts.set(key, f);
    }
    return f;
  });
}

export function oraclePoolPolicy(ctx: PoolContext, headroom: number): PoolScaler {
  return plannerPolicy('oracle', ctx, (k, now, horizonS) => {
    const series = ctx.counts[k] as readonly number[];
    const minute = Math.floor((now - ctx.startMs) / MINUTE_MS);
    const span = Math.max(1, Math.ceil(horizonS / 60));
    let sum = 0;
    let peak = 0;
    for (let m = minute; m < minute + span; m++) {
      sum += series[m] ?? 0;
      peak = Math.max(peak, series[m] ?? 0);
    }
    const f = 1 + headroom;
    const rate = (sum / span / 60) * f;
    const upper = (peak / 60) * f;
    return {
      ratePerSec: rate,
      upperRatePerSec: upper,
      upperQuantile: 0.9,
      burstRatePerSec: upper,
      burstsBySpan: [{ spanS: 60, ratePerSec: upper }],
      dispersion: 1,
      horizonS,
      method: 'seasonal',
      components: {},
    };
  });
}

type ForecastOf = (model: number, now: number, horizonS: number) => Forecast;

function plannerPolicy(name: string, ctx: PoolContext, forecastOf: ForecastOf): PoolScaler {
  let memory = emptyPoolPlanMemory();
  const loadMs = new Map<number, number>();
  const coldStarts: number[] = [];
  const index = new Map(ctx.models.map((m, k) => [m.name, k]));
  const busy = createBusyWindow();
  return {
    name,
    initial: () => initialPool(ctx),
    tick(obs) {
      // Each warm worker's engine-busy share of the tick, averaged over the SLO as the live controller does.
      busy.note(
        obs.now,
        ctx.plan.sloQueueWaitMs,
        obs.workers.filter((w) => w.state === 'warm').map((w) => [w.id, w.busyMs / ctx.tickMs] as const),
      );
      for (const l of obs.loads) loadMs.set(l.model, l.ms);
      coldStarts.push(...obs.coldStartsMs);
      if (coldStarts.length > 100) coldStarts.splice(0, coldStarts.length - 100);
      const coldStartMs = coldStarts.length > 0 ? coldStarts.reduce((a, b) => a + b, 0) / coldStarts.length : ctx.plan.coldStartMs;
      const horizonS = Math.ceil((coldStartMs + ctx.tickMs) / 1000);
      const held = heldModels(obs);
      const models: PoolModelInput[] = [];
      ctx.models.forEach((spec, k) => {
        const q = obs.models[k];
        if (!q) return;
        const forecast = forecastOf(k, obs.now, horizonS);
        // A model with no demand, no queue and no copy asks nothing of the planner: left out, it costs no time.
        if (forecast.ratePerSec <= 0 && q.waiting === 0 && !held.has(k)) return;
        models.push({
          model: spec.name,
          forecast,
          backlog: backlogOf(q),
          perWorkerRatePerSec: ctx.workerRate,
          loadMs: loadMs.get(k) ?? ctx.assumedLoadMs,
          memoryMb: spec.memoryMb,
          batchServiceMs: ctx.batchMs,
          ...(ctx.batchOneMs !== undefined ? { batchOneMs: ctx.batchOneMs } : {}),
          observed: { arrivedRows: q.arrived, servedRows: q.served, lateRows: q.late, sinceMs: ctx.tickMs },
        });
      });
      const plan = planPool({
        now: obs.now,
        settings: { ...ctx.plan, coldStartMs },
        models,
        workers: workerViews(obs, ctx, busy.share),
        memory,
      });
      memory = plan.memory;
      ctx.onPlan?.(plan);
      const actions: PoolAction[] = [];
      if (plan.launch > 0) actions.push({ action: 'launch', count: plan.launch });
      for (const id of plan.drain) actions.push({ action: 'drain', workerId: id });
      for (const e of plan.evictions) actions.push({ action: 'evict', workerId: e.workerId, model: index.get(e.model) as number });
      for (const l of plan.loads) actions.push({ action: 'load', workerId: l.workerId, model: index.get(l.model) as number });
      return actions;
    },
  };
}

export interface KeepAliveOptions {
  backlogPerWorker: number;
  targetUtilization: number;
  min: number;
  max: number;
}

export function keepAlivePolicy(ctx: PoolContext, o: KeepAliveOptions): PoolScaler {
  const served: Array<{ at: number; jobs: number }> = [];
  const recent: Array<{ at: number; desired: number }> = [];
  const lastCalled = new Map<number, number>();
  return {
    name: 'keep-alive',
    initial: () => initialPool(ctx),
    tick(obs) {
      const actions: PoolAction[] = [];
      obs.models.forEach((q, k) => {
        if (q.arrived > 0 || q.waiting > 0) lastCalled.set(k, obs.now);
      });
      for (const w of obs.workers) {
        if (w.state !== 'warm') continue;
        for (const h of w.models) {
          const q = obs.models[h.model];
          if (h.loading || h.inFlight > 0 || (q?.waiting ?? 0) > 0 || obs.now - h.lastUsedAt < KEEP_ALIVE_MS) continue;
          actions.push({ action: 'evict', workerId: w.id, model: h.model });
        }
      }
      actions.push(...keepAliveCopies(obs, ctx, o.backlogPerWorker));
      const queued = obs.models.reduce((t, q) => t + q.waiting, 0);
      served.push({ at: obs.now, jobs: obs.models.reduce((t, q) => t + q.served, 0) });
      while ((served[0]?.at ?? obs.now) <= obs.now - REACTIVE_WINDOW_MS) served.shift();
      const perSec = served.reduce((t, e) => t + e.jobs, 0) / ((served.length * ctx.tickMs) / 1000);
      const forRate = ceil(perSec / (ctx.workerRate * o.targetUtilization));
      const forQueue = ceil(queued / o.backlogPerWorker);
      const forMemory = keptMemoryWorkers(ctx, lastCalled, obs.now);
      const raw = Math.min(o.max, Math.max(o.min, forRate, forQueue, forMemory));
      recent.push({ at: obs.now, desired: raw });
      while ((recent[0]?.at ?? obs.now) < obs.now - REACTIVE_DOWN_MS) recent.shift();
      const desired = recent.reduce((m, e) => Math.max(m, e.desired), 0);
      const live = obs.workers.filter((w) => w.state !== 'draining');
      if (live.length < desired) actions.push({ action: 'launch', count: desired - live.length });
      if (live.length > desired) {
        const idle = live
          .filter((w) => w.state === 'warm' && !w.busy && w.models.every((h) => h.inFlight === 0))
          .sort((a, b) => a.models.length - b.models.length);
        for (const w of idle.slice(0, live.length - desired)) actions.push({ action: 'drain', workerId: w.id });
      }
      return actions;
    },
  };
}

/** One more copy for each model whose queue passes `backlogPerWorker` per holder, where some worker has room. */
function keepAliveCopies(obs: PoolObservation, ctx: PoolContext, backlogPerWorker: number): PoolAction[] {
  const actions: PoolAction[] = [];
  const used = new Map(obs.workers.map((w) => [w.id, w.models.reduce((t, h) => t + (ctx.models[h.model] as ModelSpec).memoryMb, 0)]));
  obs.models.forEach((q, k) => {
    const holders = obs.workers.filter((w) => w.state === 'warm' && w.models.some((h) => h.model === k));
    if (holders.length === 0 || q.waiting <= backlogPerWorker * holders.length) return;
    const mb = (ctx.models[k] as ModelSpec).memoryMb;
    const cap = ctx.plan.modelsPerWorker ?? Infinity;
    const room = obs.workers
      .filter((w) => w.state === 'warm' && !holders.includes(w) && (used.get(w.id) ?? 0) + mb <= ctx.plan.memoryMb && w.models.length < cap)
      .sort((a, b) => a.models.length - b.models.length)[0];
    if (!room) return;
    used.set(room.id, (used.get(room.id) ?? 0) + mb);
    actions.push({ action: 'load', workerId: room.id, model: k });
  });
  return actions;
}

/** Workers for the memory of every model called within the keep-alive (and the per-worker cap). */
function keptMemoryWorkers(ctx: PoolContext, lastCalled: Map<number, number>, now: number): number {
  let mb = 0;
  let count = 0;
  for (const [k, at] of lastCalled) {
    if (now - at >= KEEP_ALIVE_MS) continue;
    mb += (ctx.models[k] as ModelSpec).memoryMb;
    count++;
  }
  const byCount = ctx.plan.modelsPerWorker ? ceil(count / ctx.plan.modelsPerWorker) : 0;
  return Math.max(ceil(mb / ctx.plan.memoryMb), byCount);
}

/** Minutes of history that say which models the pool held when the replay begins. */
const INITIAL_LOOKBACK_MIN = 60;

/**
 * The pool when the replay begins, warm (a replay does not begin by paying for cold starts): the
 * models called in the last INITIAL_LOOKBACK_MIN minutes of history, busiest first, placed within
 * memory, on as many workers as the first minute's load or their memory needs. Every shared-pool
 * policy starts from this same pool.
 */
export function initialPool(ctx: PoolContext): number[][] {
  const minute = ctx.fromMinute;
  const from = Math.max(0, minute - INITIAL_LOOKBACK_MIN);
  const recent = ctx.counts.map((s) => s.slice(from, minute + 1).reduce((a, b) => a + b, 0));
  const rate = ctx.counts.reduce((t, s) => t + (s[minute] ?? 0), 0) / 60;
  const compute = ceil(rate / (ctx.workerRate * ctx.plan.targetUtilization));
  const called = ctx.models
    .map((_, k) => k)
    .filter((k) => (recent[k] ?? 0) > 0)
    .sort((a, b) => (recent[b] ?? 0) - (recent[a] ?? 0));
  const mb = called.reduce((t, k) => t + (ctx.models[k] as ModelSpec).memoryMb, 0);
  const byCount = ctx.plan.modelsPerWorker ? ceil(called.length / ctx.plan.modelsPerWorker) : 0;
  const workers = Math.min(ctx.plan.max, Math.max(ctx.plan.min, compute, ceil(mb / ctx.plan.memoryMb), byCount, 1));
  const out: number[][] = Array.from({ length: workers }, () => []);
  const used = new Array<number>(workers).fill(0);
  let next = 0;
  for (const k of called) {
    const size = (ctx.models[k] as ModelSpec).memoryMb;
    for (let tries = 0; tries < workers; tries++) {
      const w = (next + tries) % workers;
      const room = used[w] as number;
      const capped = ctx.plan.modelsPerWorker !== undefined && (out[w] as number[]).length >= ctx.plan.modelsPerWorker;
      if (room + size <= ctx.plan.memoryMb && !capped) {
        (out[w] as number[]).push(k);
        used[w] = room + size;
        next = w + 1;
        break;
      }
    }
  }
  return out;
}

function heldModels(obs: PoolObservation): Set<number> {
  const held = new Set<number>();
  for (const w of obs.workers) for (const h of w.models) held.add(h.model);
  return held;
}

function workerViews(obs: PoolObservation, ctx: PoolContext, busyFraction: (id: string) => number | undefined): PoolWorkerView[] {
  return obs.workers.map((w) => ({
    id: w.id,
    state: w.state,
    ...optional('busyFraction', busyFraction(w.id)),
    models: w.models.map((h) => ({
      model: (ctx.models[h.model] as ModelSpec).name,
      lastUsedAt: h.lastUsedAt,
      inFlight: h.inFlight,
      loading: h.loading,
    })),
  }));
}

function backlogOf(q: PoolObservation['models'][number]): Backlog {
  return { waiting: q.waiting, prioritized: 0, delayed: 0, active: q.inService, oldestAgeMs: q.oldestAgeMs };
}

function optional<K extends string>(key: K, value: number | undefined): Partial<Record<K, number>> {
  return value === undefined ? {} : ({ [key]: value } as Record<K, number>);
}

const ceil = (x: number) => (x > 0 ? Math.ceil(x - 1e-9) : 0);
