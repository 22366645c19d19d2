/**
 * The shared-pool planner (DESIGN §8, issue 31 §4): a pure function from what the scaler sees of
 * one named pool — its settings, every member model's forecast, backlog, measured per-worker rate,
 * measured load time and resident memory, and the pool's workers with what each holds — to how
 * many workers the pool should have, how many of them standby (warm, holding no model), which
 * models each should hold, and the loads and evictions that get there, each with its reason.
 * The live controller and the simulator (infra/simulator many-model-policies.ts) run this code;
 * it reads nothing but its input (no clock, no randomness, no I/O) and never mutates it.
 *
 * 1. Per model: decide() (policy.ts), unchanged, with the model's own forecast, backlog and rate
 *    and the model's *load time* as its lead: in a shared pool a model gains a copy by a load
 *    onto a warm worker, not by a cold start (a cold start plus the load when no standby waits). Its `active` is the copies the model needs (distinct
 *    workers holding it); rules 2–5 (SLO sizing, backlog, stabilisation, the hold) apply per
 *    model as they do per deployment, so a copy added for a peak is kept down-slow and dropped
 *    when demand falls.
 * 2. The pool's compute: decide() once more, on the aggregate of the members, with the worker
 *    cold start as lead. Means add; the deviations above the mean (the upper quantile's, each
 *    burst span's) add as independent deviations do, in root-sum-square: the aggregate's variance
 *    is the sum of the members' variances. That is why a shared pool's burst standby is far below
 *    the sum of per-model standbys: forty models' one-minute bursts do not come at once, and
 *    sizing for the sum of their worst cases would pay forty bursts for the one that comes. The
 *    rows are weighed by each model's rate (the aggregate's per-worker rate is the rate-weighted
 *    harmonic mean), the dispersion is the rate-weighted mean, and the closed-loop headroom in
 *    decide()'s memory corrects what the aggregate misses (a worker serves only what it holds)
 *    from the measured late rows. `terms.pooledBurstStandby` vs `terms.perModelStandbySum`
 *    shows the difference on every tick.
 * 3. Memory, by ski rental (the reasoning of relaunch-hold.ts): keeping model m resident costs
 *    its share of a worker, r_m = memoryMb_m / the worker's budget (per unit of time); evicting it
 *    costs a reload of L_m (its measured load time) of a worker when it is next called. Keeping it
 *    while it has been idle less than K_m = L_m / r_m and dropping it after is the break-even rule
 *    (never more than twice the cost of the best rule with foresight, whatever the arrivals); and
 *    for arrivals at a forecast rate λ_m the expected reload cost per unit time of not holding it
 *    is λ_m·L_m against r_m for holding it, so a model is worth a copy when λ_m·K_m ≥ 1 (a
 *    request expected within its keep time), or when jobs wait for it, or it needs more than one.
 *    The pool holds workers for the memory of the models worth a copy or idle less than K_m, and
 *    evicts the rest only when a load needs the room: memory nobody needs costs nothing. K_m is
 *    two measurements over a setting, so it carries to any model size, load time and budget.
 * 4. Placement, from what is held now (no move without a reason): a model short of copies — a
 *    cold one (none holds it) with demand first — loads onto the least-loaded warm worker with
 *    room, else a standby, else the least-loaded worker whose least-recently-used evictable
 *    models make room. Evictable: not loading, nothing in flight, no jobs queued for it; among
 *    those, models idle longer than their K_m go first, oldest first, then the rest oldest first:
 *    a model used in the last K_m is never evicted while an older one can go. Copies beyond what
 *    rule 1 holds are dropped one a tick, from the busiest holder, when not in flight.
 * 5. Workers: active = the most of the compute (rule 2), the memory (rule 3) and the most copies
 *    one model needs, the total held at the most wanted over the minimum lifetime, lengthened to
 *    the measured hold of relaunch-hold.ts where the pool's own gaps say a drained worker comes
 *    back within it; standby = the pooled burst standby (rule 2), at least the setting; max caps
 *    active first, then standby; min raises active. Launch what the pool lacks; drain what it
 *    holds beyond the target only where decide() on the aggregate drains too (its windows hold
 *    scale-in), standby workers first, then those holding the fewest recently used models.
 */

import type { Backlog, Forecast, PolicyDecision, PolicyMemory, PolicySettings, RelaunchHoldState } from '../contracts/pool.ts';
import { emptyPolicyMemory } from '../contracts/pool.ts';
import { SCALER_DEFAULTS } from '../kernel/config.ts';
import { decide } from './policy.ts';
import { measuredHoldMs, noteWant } from './relaunch-hold.ts';

export interface PoolPlanSettings {
  min: number;
  max: number;
  /** Warm workers holding no model to keep beyond what bursts need (a floor). */
  standby: number;
  /** Each worker's memory budget for resident models, MB. */
  memoryMb: number;
  /** At most this many models resident per worker (absent: memory alone bounds it). */
  modelsPerWorker?: number;
  sloQueueWaitMs: number;
  /** A worker's launch to warm standby (no model), measured. */
  coldStartMs: number;
  scaleDownStabilizationMs: number;
  targetUtilization: number;
  minLifetimeColdStarts?: number;
  sloTarget?: number;
}

export interface PoolModelInput {
  model: string;
  /** Over the pool's horizon (a worker cold start plus a tick). */
  forecast: Forecast;
  backlog: Backlog;
  /** Rows/s one worker serves of this model at a full batch (measured). */
  perWorkerRatePerSec: number;
  /** Download-if-needed + load + warm-up onto a warm worker, measured. */
  loadMs: number;
  /** Resident memory of one loaded session (measured), MB. */
  memoryMb: number;
  batchServiceMs?: number;
  /** A batch of one row, measured (the batch profile's smallest): with batchServiceMs it splits a batch's time into a part per batch and a part per row. */
  batchOneMs?: number;
  /** Rows counted since the last tick, as PolicyInput.observed. */
  observed?: { arrivedRows: number; servedRows: number; lateRows?: number; sinceMs: number };
}

export interface HeldModel {
  model: string;
  /** When a job of it was last taken on this worker (epoch ms; loaded-at until then). */
  lastUsedAt: number;
  /** Jobs of it this worker holds now. */
  inFlight: number;
  /** Still loading. */
  loading: boolean;
}

export interface PoolWorkerView {
  id: string;
  state: 'starting' | 'warm' | 'draining';
  models: HeldModel[];
  /** Measured: the share of the recent window its engine was busy (batches and loads); absent: not measured. */
  busyFraction?: number;
}

/** What the planner remembers between ticks: decide()'s memory for the pool and per model (plain JSON). */
export interface PoolPlanMemory {
  pool: PolicyMemory;
  models: Record<string, PolicyMemory>;
  /** The pool's total want (active + standby) by tick, for rule 5's hold (absent: none yet). */
  recentTotal?: Array<{ at: number; workers: number }>;
  /** The measured gaps of the total want (relaunch-hold.ts), which lengthen that hold. */
  totalHold?: RelaunchHoldState;
}

export interface PoolPlanInput {
  now: number;
  settings: PoolPlanSettings;
  models: PoolModelInput[];
  workers: PoolWorkerView[];
  memory: PoolPlanMemory;
}

export interface PlacementAction {
  workerId: string;
  model: string;
  reason: string;
}

export interface PoolPlanTerms {
  /** Σ rate / per-worker rate over the members: the pool's mean load in workers. */
  meanWorkers: number;
  /** Workers decide() asks for the aggregate: compute. */
  computeActive: number;
  /** Workers the resident memory of the models worth keeping needs (rule 3). */
  memoryActive: number;
  /** The most copies one model needs. */
  maxCopies: number;
  /** The aggregate's burst standby (root-sum-square of the members' deviations). */
  pooledBurstStandby: number;
  /** What the members' own pools would hold: Σ of each model's burst standby at the worker cold start. */
  perModelStandbySum: number;
  activeSetBy: 'compute' | 'memory' | 'copies' | 'min' | 'max';
  perModel: Array<{ model: string; copies: number; held: number; keepMs: number; standbyAlone: number }>;
}

export interface PoolPlan {
  workers: number;
  active: number;
  standby: number;
  launch: number;
  /** Worker ids to drain. */
  drain: string[];
  /** Per warm worker, the models it should hold after this tick's loads and evictions. */
  placement: Array<{ workerId: string; models: string[] }>;
  loads: PlacementAction[];
  evictions: PlacementAction[];
  reasons: string[];
  terms: PoolPlanTerms;
  memory: PoolPlanMemory;
}

export function emptyPoolPlanMemory(): PoolPlanMemory {
  return { pool: emptyPolicyMemory(), models: {} };
}

interface ModelNeed {
  input: PoolModelInput;
  decision: PolicyDecision;
  copies: number;
  /** Mean load in workers (rate / per-worker rate). */
  share: number;
  keepMs: number;
  demand: boolean;
}

export function planPool(input: PoolPlanInput): PoolPlan {
  const s = input.settings;
  const reasons: string[] = [];
  const memory: PoolPlanMemory = { pool: input.memory.pool, models: { ...input.memory.models } };
  const needs = input.models.map((m) => modelNeed(m, input, memory));
  const counts = countWorkers(input.workers);
  const agg = withBatchOverhead(withReloads(aggregate(input.models), needs, reasons), needs, s, reasons);
  const pool = decide({
    now: input.now,
    forecast: agg.forecast,
    backlog: agg.backlog,
    workers: counts,
    perWorkerRatePerSec: agg.perWorkerRatePerSec,
    batchServiceMs: agg.batchServiceMs,
    settings: policySettings(s, s.coldStartMs, s.standby),
    memory: input.memory.pool,
    ...(agg.observed ? { observed: agg.observed } : {}),
  });
  memory.pool = pool.memory;
  const holders = holdersByModel(input.workers);
  const memoryActive = memoryWorkers(needs, holders, input.now, s);
  const maxCopies = needs.reduce((m, n) => Math.max(m, n.copies), 0);
  const perModelStandbySum = needs.reduce((t, n) => t + standbyAlone(n, s), 0);
  const t = targets({ compute: pool.active, memory: memoryActive, copies: maxCopies, standby: pool.standby }, s, reasons);
  reasons.push(
    `aggregate ${agg.meanWorkers.toFixed(2)} workers of mean load over ${needs.length} models; pooled burst standby ${pool.terms?.burstStandby ?? 0} vs ${perModelStandbySum} summed per model`,
  );
  const current = counts.active + counts.standby + counts.starting;
  const want = t.active + t.standby;
  const target = Math.min(Math.max(0, Math.floor(s.max)), holdTotal(input, want, current, memory, reasons));
  const drain =
    current > target && pool.drain > 0
      ? pickDrains(input.workers, needs, input.now, Math.min(pool.drain, current - target), s.sloQueueWaitMs)
      : [];
  if (drain.length > 0) reasons.push(`drain ${drain.join(', ')}: pool ${current} above ${target}`);
  // Placement on the workers that stay: a drained worker's models are placed again from what is left.
  const placed = place(
    needs,
    input.workers.filter((w) => !drain.includes(w.id)),
    input.now,
    s,
    reasons,
  );
  const launch = Math.max(0, want - current);
  if (launch > 0) reasons.push(`launch ${launch}: pool ${current} below ${t.active} active + ${t.standby} standby`);
  return {
    workers: target,
    active: t.active,
    standby: t.standby,
    launch,
    drain,
    placement: placed.placement,
    loads: placed.loads,
    evictions: placed.evictions,
    reasons,
    terms: {
      meanWorkers: agg.meanWorkers,
      computeActive: pool.active,
      memoryActive,
      maxCopies,
      pooledBurstStandby: pool.terms?.burstStandby ?? 0,
      perModelStandbySum,
      activeSetBy: t.by,
      perModel: needs.map((n) => ({
        model: n.input.model,
        copies: n.copies,
        held: holders.get(n.input.model)?.length ?? 0,
        keepMs: n.keepMs,
        standbyAlone: standbyAlone(n, s),
      })),
    },
    memory,
  };
}

/**
 * Rule 5's hold on the pool's total: the most it wanted over the minimum lifetime (policy.ts rule
 * 5: the stabilisation window, at least minLifetimeColdStarts cold starts), so memory freed for a
 * minute does not drain a worker the next minute wants back. Entries from the future (the clock
 * went back) are dropped and the window restarts.
 */
function holdTotal(input: PoolPlanInput, want: number, current: number, memory: PoolPlanMemory, reasons: string[]): number {
  const s = input.settings;
  const lifetime = (s.minLifetimeColdStarts ?? SCALER_DEFAULTS.minLifetimeColdStarts) * nonNegative(s.coldStartMs);
  const floorMs = Math.max(nonNegative(s.scaleDownStabilizationMs), lifetime);
  // The measured hold (relaunch-hold.ts): longer where the pool's own gaps say a drained worker comes back within it.
  memory.totalHold = noteWant(input.memory.totalHold, { now: input.now, want, held: current, coldStartMs: s.coldStartMs });
  const measured = measuredHoldMs(memory.totalHold, s.coldStartMs, floorMs);
  const windowMs = Math.max(floorMs, measured.holdMs);
  const kept = (input.memory.recentTotal ?? []).filter((e) => e.at <= input.now && e.at > input.now - windowMs && e.workers > want);
  memory.recentTotal = [...kept, { at: input.now, workers: want }];
  const held = kept.reduce((m, e) => Math.max(m, e.workers), want);
  if (held > want) reasons.push(`holding ${held} workers, the most wanted in the last ${secs(windowMs)} (${measured.why})`);
  return held;
}

function policySettings(s: PoolPlanSettings, leadMs: number, standby: number): PolicySettings {
  return {
    min: 0,
    max: s.max,
    standby,
    sloQueueWaitMs: s.sloQueueWaitMs,
    coldStartMs: leadMs,
    scaleDownStabilizationMs: s.scaleDownStabilizationMs,
    targetUtilization: s.targetUtilization,
    ...(s.minLifetimeColdStarts !== undefined ? { minLifetimeColdStarts: s.minLifetimeColdStarts } : {}),
    ...(s.sloTarget !== undefined ? { sloTarget: s.sloTarget } : {}),
  };
}

/** Rule 1: decide() per model, with its load time as the lead; its active is the copies it needs. */
function modelNeed(m: PoolModelInput, input: PoolPlanInput, memory: PoolPlanMemory): ModelNeed {
  const holders = input.workers.filter((w) => w.state === 'warm' && w.models.some((h) => h.model === m.model));
  const ready = holders.filter((w) => w.models.some((h) => h.model === m.model && !h.loading)).length;
  const decision = decide({
    now: input.now,
    forecast: m.forecast,
    backlog: m.backlog,
    workers: { active: ready, standby: 0, starting: holders.length - ready, draining: 0 },
    perWorkerRatePerSec: m.perWorkerRatePerSec,
    batchServiceMs: m.batchServiceMs ?? 0,
    // A copy is a load onto a warm worker when one has room to spare; with none, a launch first.
    settings: policySettings(input.settings, m.loadMs + (spareWorker(input.workers) ? 0 : nonNegative(input.settings.coldStartMs)), 0),
    memory: input.memory.models[m.model] ?? emptyPolicyMemory(),
    ...(m.observed ? { observed: m.observed } : {}),
  });
  memory.models[m.model] = decision.memory;
  const rate = positive(m.perWorkerRatePerSec) ?? 1;
  const jobs = m.backlog.waiting + m.backlog.prioritized + m.backlog.delayed;
  const keep = keepMs(m, input.settings);
  // Worth a copy: jobs wait for it, it needs more than one, or the forecast expects a request
  // within its keep time (a copy then is cheaper than the reload it saves, rule 3).
  const demand = jobs > 0 || decision.active > 1 || nonNegative(m.forecast.ratePerSec) * (keep / 1000) >= 1;
  const copies = demand ? Math.max(1, decision.active) : 0;
  return { input: m, decision, copies, share: nonNegative(m.forecast.ratePerSec) / rate, keepMs: keep, demand };
}

/** Whether a warm worker holds no model (a standby a copy can land on at a load's notice). */
function spareWorker(workers: PoolWorkerView[]): boolean {
  return workers.some((w) => w.state === 'warm' && w.models.length === 0);
}

/** Rule 3's break-even idle time: a reload's worker time over the memory share holding costs. */
export function keepMs(m: Pick<PoolModelInput, 'loadMs' | 'memoryMb'>, s: Pick<PoolPlanSettings, 'memoryMb'>): number {
  const share = Math.min(1, nonNegative(m.memoryMb) / Math.max(1, s.memoryMb));
  return share > 0 ? nonNegative(m.loadMs) / share : Infinity;
}

/** What a model's own pool would hold in standby for its bursts (policy.ts rule 4, at the worker cold start plus its load). */
function standbyAlone(n: ModelNeed, s: PoolPlanSettings): number {
  const f = n.input.forecast;
  const rate = positive(n.input.perWorkerRatePerSec) ?? 1;
  const coldMs = s.coldStartMs + n.input.loadMs;
  const bursts = [...(f.burstsBySpan ?? []), { spanS: Infinity, ratePerSec: Math.max(f.burstRatePerSec, f.upperRatePerSec ?? 0) }];
  let warm = 0;
  for (const b of bursts) {
    const lastsMs = Math.min(b.spanS * 1000, coldMs);
    if (lastsMs > 0) warm = Math.max(warm, (nonNegative(b.ratePerSec) * lastsMs) / (lastsMs + s.sloQueueWaitMs));
  }
  return Math.max(0, ceilCount(warm / rate) - Math.max(1, n.copies));
}

interface Aggregate {
  forecast: Forecast;
  backlog: Backlog;
  perWorkerRatePerSec: number;
  batchServiceMs: number;
  meanWorkers: number;
  observed: PoolModelInput['observed'];
}

/** Rule 2: the members as one stream: means add, deviations add in root-sum-square. */
function aggregate(models: PoolModelInput[]): Aggregate {
  let mean = 0;
  let meanWorkers = 0;
  let upperSq = 0;
  let burstSq = 0;
  let dispersion = 0;
  let batchServiceMs = 0;
  const spans = new Map<number, number>();
  const backlog: Backlog = { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };
  let observed: Aggregate['observed'];
  for (const m of models) {
    const f = m.forecast;
    const r = nonNegative(f.ratePerSec);
    mean += r;
    meanWorkers += r / (positive(m.perWorkerRatePerSec) ?? 1);
    upperSq += (nonNegative(f.upperRatePerSec ?? r) - r) ** 2 * +(f.upperRatePerSec !== undefined && f.upperRatePerSec > r);
    burstSq += Math.max(0, nonNegative(f.burstRatePerSec) - r) ** 2;
    dispersion += r * (f.dispersion !== undefined && f.dispersion >= 1 ? f.dispersion : 1);
    batchServiceMs = Math.max(batchServiceMs, nonNegative(m.batchServiceMs ?? 0));
    for (const b of f.burstsBySpan ?? []) spans.set(b.spanS, (spans.get(b.spanS) ?? 0) + Math.max(0, b.ratePerSec - r) ** 2);
    backlog.waiting += nonNegative(m.backlog.waiting);
    backlog.prioritized += nonNegative(m.backlog.prioritized);
    backlog.delayed += nonNegative(m.backlog.delayed);
    backlog.active += nonNegative(m.backlog.active);
    backlog.oldestAgeMs = Math.max(backlog.oldestAgeMs, nonNegative(m.backlog.oldestAgeMs));
    if (m.observed) {
      const o = observed ?? { arrivedRows: 0, servedRows: 0, lateRows: 0, sinceMs: m.observed.sinceMs };
      observed = {
        arrivedRows: o.arrivedRows + m.observed.arrivedRows,
        servedRows: o.servedRows + m.observed.servedRows,
        lateRows: (o.lateRows ?? 0) + (m.observed.lateRows ?? 0),
        sinceMs: Math.max(o.sinceMs, m.observed.sinceMs),
      };
    }
  }
  const first = models[0]?.forecast;
  const forecast: Forecast = {
    ratePerSec: mean,
    upperRatePerSec: mean + Math.sqrt(upperSq),
    upperQuantile: first?.upperQuantile ?? 0.9,
    burstRatePerSec: mean + Math.sqrt(burstSq),
    burstsBySpan: [...spans.entries()].sort((a, b) => a[0] - b[0]).map(([spanS, sq]) => ({ spanS, ratePerSec: mean + Math.sqrt(sq) })),
    dispersion: mean > 0 ? dispersion / mean : 1,
    horizonS: first?.horizonS ?? 0,
    method: models.every((m) => m.forecast.method === 'seasonal') && models.length > 0 ? 'seasonal' : 'reactive',
    components: { models: models.length },
  };
  // The rate-weighted harmonic mean: Σ rate over Σ rate / per-worker rate (1 row/s/worker with no demand).
  const perWorkerRatePerSec = meanWorkers > 0 ? mean / meanWorkers : harmonic(models);
  return { forecast, backlog, perWorkerRatePerSec, batchServiceMs, meanWorkers, observed };
}

/**
 * Rule 3's other side, as compute: a model not worth a copy is loaded again on (about) each of its
 * requests, and a load occupies the worker that runs it for L_m, so those models add λ_m·L_m
 * workers of load work to the aggregate. Without it the pool is sized for serving alone and its
 * loads queue behind each other on a worker sized for none.
 */
function withReloads(agg: Aggregate, needs: ModelNeed[], reasons: string[]): Aggregate {
  const reloadWorkers = needs.reduce(
    (t, n) => (n.demand ? t : t + nonNegative(n.input.forecast.ratePerSec) * (nonNegative(n.input.loadMs) / 1000)),
    0,
  );
  if (reloadWorkers <= 0 || agg.perWorkerRatePerSec <= 0) return agg;
  reasons.push(`reloads of the models not kept add ${reloadWorkers.toFixed(2)} workers of load work`);
  return withExtraWork(agg, reloadWorkers);
}

/** `workers` of work beyond serving rows, as rows at the aggregate's per-worker rate on every rate the forecast sizes by. */
function withExtraWork(agg: Aggregate, workers: number): Aggregate {
  const rows = workers * agg.perWorkerRatePerSec;
  const f = agg.forecast;
  const forecast: Forecast = {
    ...f,
    ratePerSec: f.ratePerSec + rows,
    upperRatePerSec: (f.upperRatePerSec ?? f.ratePerSec) + rows,
    burstRatePerSec: f.burstRatePerSec + rows,
    burstsBySpan: (f.burstsBySpan ?? []).map((b) => ({ ...b, ratePerSec: b.ratePerSec + rows })),
  };
  return { ...agg, forecast, meanWorkers: agg.meanWorkers + workers };
}

/**
 * Rule 2's other correction: the aggregate counts each row at the full-batch rate, but in a shared
 * pool a model's jobs come to one of its copies a few at a time, and every batch pays its fixed
 * part f_m (the batch of one, less one row's share of the slope up to the full batch) whatever its
 * size. A copy whose queue is taken once per SLO keeps its jobs' waits within the SLO, so it is
 * taken at most once per SLO and at least once per job: a copy of model m costs
 * f_m × min(λ_m / c_m, 1 / S) of its worker, which is the time a busy multi-model worker loses to
 * small batches (what a full batch's rate already counts, λ_m × f_m / full batch, taken off); the
 * variance of the cycles around that is the closed-loop SLO control's to cover, from the late
 * rows. From the measured profile and the SLO, nothing else: a model with no fixed part, or
 * batches that fill, adds nothing.
 */
function withBatchOverhead(agg: Aggregate, needs: ModelNeed[], s: PoolPlanSettings, reasons: string[]): Aggregate {
  const sloS = nonNegative(s.sloQueueWaitMs) / 1000;
  if (sloS <= 0 || agg.perWorkerRatePerSec <= 0) return agg;
  let workers = 0;
  for (const n of needs) {
    const m = n.input;
    const full = nonNegative(m.batchServiceMs ?? 0);
    const one = nonNegative(m.batchOneMs ?? 0);
    const rate = positive(m.perWorkerRatePerSec);
    if (full <= 0 || one <= 0 || rate === undefined) continue;
    const fullBatch = (rate * full) / 1000;
    if (fullBatch <= 1) continue;
    const perRowMs = Math.max(0, (full - one) / (fullBatch - 1));
    const fixedS = Math.max(0, one - perRowMs) / 1000;
    const lambda = nonNegative(m.forecast.ratePerSec);
    const copies = Math.max(1, n.copies);
    const visits = copies * Math.min(lambda / copies, 1 / sloS);
    workers += Math.max(0, fixedS * (visits - lambda / fullBatch));
  }
  if (workers <= 0) return agg;
  reasons.push(`batches of a few rows per model add ${workers.toFixed(2)} workers of per-batch time`);
  return withExtraWork(agg, workers);
}

function harmonic(models: PoolModelInput[]): number {
  const rates = models.map((m) => positive(m.perWorkerRatePerSec)).filter((r): r is number => r !== undefined);
  return rates.length === 0 ? 0 : rates.length / rates.reduce((t, r) => t + 1 / r, 0);
}

function countWorkers(workers: PoolWorkerView[]) {
  const c = { starting: 0, standby: 0, active: 0, draining: 0 };
  for (const w of workers) {
    if (w.state === 'starting') c.starting++;
    else if (w.state === 'draining') c.draining++;
    else if (w.models.length === 0) c.standby++;
    else c.active++;
  }
  return c;
}

function holdersByModel(workers: PoolWorkerView[]): Map<string, PoolWorkerView[]> {
  const out = new Map<string, PoolWorkerView[]>();
  for (const w of workers) {
    if (w.state !== 'warm') continue;
    for (const h of w.models) out.set(h.model, [...(out.get(h.model) ?? []), w]);
  }
  return out;
}

/** Rule 3: workers for the memory of the models worth keeping (demand, or idle under K_m), each copy counted. */
function memoryWorkers(needs: ModelNeed[], held: Map<string, PoolWorkerView[]>, now: number, s: PoolPlanSettings): number {
  let mb = 0;
  let models = 0;
  for (const n of needs) {
    const lastUsed = Math.max(
      ...(held.get(n.input.model) ?? []).flatMap((w) => w.models.filter((h) => h.model === n.input.model).map((h) => h.lastUsedAt)),
    );
    const worth = n.demand || now - lastUsed < n.keepMs;
    if (!worth) continue;
    const copies = Math.max(1, n.copies);
    mb += copies * nonNegative(n.input.memoryMb);
    models += copies;
  }
  const byMemory = ceilCount(mb / Math.max(1, s.memoryMb));
  const byCount = s.modelsPerWorker !== undefined && s.modelsPerWorker > 0 ? ceilCount(models / s.modelsPerWorker) : 0;
  return Math.max(byMemory, byCount);
}

function targets(
  want: { compute: number; memory: number; copies: number; standby: number },
  s: PoolPlanSettings,
  reasons: string[],
): { active: number; standby: number; by: PoolPlanTerms['activeSetBy'] } {
  let active = Math.max(want.compute, want.memory, want.copies);
  let by: PoolPlanTerms['activeSetBy'] = active === want.compute ? 'compute' : active === want.memory ? 'memory' : 'copies';
  if (by === 'memory') reasons.push(`memory of the models worth keeping needs ${want.memory} workers (compute ${want.compute})`);
  const max = Math.max(0, Math.floor(s.max));
  if (active > max) {
    reasons.push(`max ${max} caps active at ${max}`);
    active = max;
    by = 'max';
  }
  const standby = Math.min(max - active, Math.max(want.standby, Math.floor(nonNegative(s.standby))));
  if (active + standby < s.min) {
    active = Math.floor(s.min) - standby;
    by = 'min';
  }
  return { active, standby, by };
}

interface Slot {
  worker: PoolWorkerView;
  models: HeldModel[];
  load: number;
}

/** Rule 4: loads for models short of copies, cold ones first; extra copies dropped. */
function place(needs: ModelNeed[], workers: PoolWorkerView[], now: number, s: PoolPlanSettings, reasons: string[]) {
  const byModel = new Map(needs.map((n) => [n.input.model, n]));
  const slots: Slot[] = workers
    .filter((w) => w.state === 'warm')
    .map((w) => ({ worker: w, models: w.models.map((h) => ({ ...h })), load: 0 }));
  const shareOf = (model: string) => {
    const n = byModel.get(model);
    return n ? n.share / Math.max(1, n.copies) : 0;
  };
  // A worker's load: its measured busy share where measured (batches at the sizes it really gets, and
  // its loads), else the forecast shares of what it holds at the full-batch rate.
  for (const slot of slots) slot.load = slot.worker.busyFraction ?? slot.models.reduce((t, h) => t + shareOf(h.model), 0);
  const loads: PlacementAction[] = [];
  const evictions: PlacementAction[] = [];
  const holders = (model: string) => slots.filter((x) => x.models.some((h) => h.model === model));
  let unplaced = 0;
  const short = needs
    .filter((n) => n.demand && holders(n.input.model).length < n.copies)
    .sort((a, b) => holders(a.input.model).length - holders(b.input.model).length || b.share - a.share);
  for (const n of short) {
    const model = n.input.model;
    const have = holders(model).length;
    for (let k = have; k < n.copies; k++) {
      const slot = landing(slots, n, { byModel, now, s });
      if (!slot) {
        reasons.push(`${model}: no worker has room for a copy; it waits for a launch`);
        unplaced += n.copies - k;
        break;
      }
      for (const victim of slot.evict) {
        slot.slot.models = slot.slot.models.filter((h) => h.model !== victim.model);
        slot.slot.load -= shareOf(victim.model);
        evictions.push({
          workerId: slot.slot.worker.id,
          model: victim.model,
          reason: `room for ${model} (LRU, idle ${secs(now - victim.lastUsedAt)})`,
        });
      }
      slot.slot.models.push({ model, lastUsedAt: now, inFlight: 0, loading: true });
      slot.slot.load += shareOf(model);
      const why = k === 0 ? 'cold: no worker holds it' : `copy ${k + 1} of ${n.copies} for its demand`;
      loads.push({ workerId: slot.slot.worker.id, model, reason: why });
    }
  }
  const moved = relieve(slots, byModel, { now, s, shareOf, loads, reasons });
  for (const n of needs) {
    const have = holders(n.input.model);
    if (have.length <= Math.max(1, n.copies) || moved.has(n.input.model)) continue;
    // Beyond one copy, only what rule 1 holds; the last copy goes only by LRU when room is needed.
    const ready = (x: Slot) => x.models.some((h) => h.model === n.input.model && !h.loading);
    const spare = have
      .filter((x) => x.models.some((h) => h.model === n.input.model && h.inFlight === 0 && !h.loading))
      .sort((a, b) => b.load - a.load)[0];
    // Dropped only while enough other copies are ready: a copy still loading serves nobody yet.
    if (!spare || have.filter((x) => x !== spare && ready(x)).length < Math.max(1, n.copies)) continue;
    spare.models = spare.models.filter((h) => h.model !== n.input.model);
    evictions.push({ workerId: spare.worker.id, model: n.input.model, reason: `demand fell: ${have.length} copies, ${n.copies} needed` });
  }
  const placement = slots.map((x) => ({ workerId: x.worker.id, models: x.models.map((h) => h.model) }));
  return { placement, loads, evictions, unplaced };
}

/**
 * Rule 4's measured side: a worker whose jobs wait while another has engine time to spare hands
 * one model over (a copy there now; the copy here is dropped as surplus once the new one is ready).
 * Hot: a model it holds has a job waiting past the SLO, a miss this worker's turns are making. The
 * move is made only where it lowers the busier of the two (the receiver's busy share plus the
 * model's estimated share here stays below this worker's), so two workers never trade a model
 * back and forth. Needs measured busy shares
 * (PoolWorkerView.busyFraction): without them a worker's load is the forecast, which is what missed.
 */
function relieve(
  slots: Slot[],
  byModel: Map<string, ModelNeed>,
  at: { now: number; s: PoolPlanSettings; shareOf: (model: string) => number; loads: PlacementAction[]; reasons: string[] },
): Set<string> {
  const moved = new Set<string>();
  // A pool still placing models (a load this tick, or one under way) hands nothing over: a cold
  // model's first jobs wait for those loads, a hand-over is one more load queued with them, and a
  // model whose jobs waited for its own load would look hot the moment it is ready.
  if (at.loads.length > 0 || slots.some((x) => x.models.some((h) => h.loading))) return moved;
  const slo = nonNegative(at.s.sloQueueWaitMs);
  const waitOf = (model: string) => byModel.get(model)?.input.backlog.oldestAgeMs ?? 0;
  const measured = slots.filter((x) => x.worker.busyFraction !== undefined);
  const hot = measured.filter((x) => x.models.some((h) => !h.loading && waitOf(h.model) > slo)).sort((a, b) => b.load - a.load);
  for (const src of hot) {
    const shares = src.models.reduce((t, h) => t + at.shareOf(h.model), 0);
    const candidates = src.models
      .filter((h) => !h.loading && !moved.has(h.model) && waitOf(h.model) > slo)
      .map((h) => ({ h, busy: shares > 0 ? (src.load * at.shareOf(h.model)) / shares : src.load / src.models.length }))
      .sort((a, b) => waitOf(b.h.model) - waitOf(a.h.model));
    for (const c of candidates) {
      const n = byModel.get(c.h.model);
      if (!n) continue;
      const mb = nonNegative(n.input.memoryMb);
      const dst = measured
        .filter((x) => x !== src && !x.models.some((h) => h.model === c.h.model))
        .filter((x) => room(x.models, byModel, at.s) >= mb && countRoom(x.models, at.s) >= 1)
        .filter((x) => x.load + c.busy < src.load)
        .sort((a, b) => a.load - b.load)[0];
      if (!dst) continue;
      dst.models.push({ model: c.h.model, lastUsedAt: at.now, inFlight: 0, loading: true });
      dst.load += c.busy;
      src.load -= c.busy;
      moved.add(c.h.model);
      at.loads.push({
        workerId: dst.worker.id,
        model: c.h.model,
        reason: `relieve ${src.worker.id}: busy ${pct(src.load + c.busy)}, a job waited ${secs(waitOf(c.h.model))}; ${dst.worker.id} busy ${pct(dst.load - c.busy)}`,
      });
      at.reasons.push(`${c.h.model}: a copy onto ${dst.worker.id} to relieve ${src.worker.id}`);
      break;
    }
  }
  return moved;
}

/** Where a copy of `n` goes: the least-loaded worker with room, a standby, or the least-loaded one LRU eviction makes room on. */
function landing(slots: Slot[], n: ModelNeed, at: { byModel: Map<string, ModelNeed>; now: number; s: PoolPlanSettings }) {
  const { byModel, now, s } = at;
  const model = n.input.model;
  const free = slots.filter((x) => !x.models.some((h) => h.model === model));
  const fits = (models: HeldModel[]) => room(models, byModel, s) >= nonNegative(n.input.memoryMb) && countRoom(models, s) >= 1;
  const withRoom = free.filter((x) => x.models.length > 0 && fits(x.models) && x.load + n.share <= 1).sort((a, b) => a.load - b.load)[0];
  if (withRoom) return { slot: withRoom, evict: [] as HeldModel[] };
  const standby = free.find((x) => x.models.length === 0);
  if (standby) return { slot: standby, evict: [] as HeldModel[] };
  // No spare compute anywhere: a load onto the least-loaded worker with room is seconds, a launch a cold start.
  const anyRoom = free.filter((x) => fits(x.models)).sort((a, b) => a.load - b.load)[0];
  if (anyRoom) return { slot: anyRoom, evict: [] as HeldModel[] };
  // Global LRU: the worker whose victims were last used longest ago (stale ones before any other) gives the room.
  let best: { slot: Slot; evict: HeldModel[]; score: number } | undefined;
  for (const x of free) {
    const victims: HeldModel[] = [];
    let left = x.models;
    for (const v of evictionOrder(x.models, byModel, now)) {
      if (fits(left)) break;
      victims.push(v);
      left = left.filter((h) => h !== v);
    }
    if (!fits(left)) continue;
    const fresh = victims.some((v) => now - v.lastUsedAt < (byModel.get(v.model)?.keepMs ?? 0));
    const score = (fresh ? 1e15 : 0) + Math.max(...victims.map((v) => v.lastUsedAt));
    if (!best || score < best.score) best = { slot: x, evict: victims, score };
  }
  return best;
}

/** Evictable models, those idle past their keep time first, each group least recently used first. */
export function evictionOrder(models: HeldModel[], byModel: Map<string, Pick<ModelNeed, 'keepMs' | 'input'>>, now: number): HeldModel[] {
  const queued = (model: string) => {
    const b = byModel.get(model)?.input.backlog;
    return b ? b.waiting + b.prioritized + b.delayed > 0 : false;
  };
  const stale = (h: HeldModel) => now - h.lastUsedAt >= (byModel.get(h.model)?.keepMs ?? 0);
  return models
    .filter((h) => !h.loading && h.inFlight === 0 && !queued(h.model))
    .sort((a, b) => Number(stale(b)) - Number(stale(a)) || a.lastUsedAt - b.lastUsedAt);
}

function room(models: HeldModel[], byModel: Map<string, ModelNeed>, s: PoolPlanSettings): number {
  return s.memoryMb - models.reduce((t, h) => t + nonNegative(byModel.get(h.model)?.input.memoryMb ?? 0), 0);
}

function countRoom(models: HeldModel[], s: PoolPlanSettings): number {
  return s.modelsPerWorker !== undefined && s.modelsPerWorker > 0 ? s.modelsPerWorker - models.length : Infinity;
}

/**
 * Standby workers first, then those with the fewest models worth keeping (a copy's worth, or
 * used within their keep time), idle ones before busy ones. A drain costs the reloads of its
 * worthwhile models, which land on the workers that stay: a worker is drained only while those
 * reloads fit in the SLO on the workers left (Σ L_m ≤ S × workers left), else its drain would
 * queue the reloads, and every job of those models behind them, past the SLO (measured: draining
 * a worker holding thirty models did on NASA split into fifty).
 */
function pickDrains(workers: PoolWorkerView[], needs: ModelNeed[], now: number, count: number, sloMs: number): string[] {
  const byModel = new Map(needs.map((n) => [n.input.model, n]));
  const worth = (h: HeldModel) => {
    const n = byModel.get(h.model);
    return h.loading || n?.demand === true || now - h.lastUsedAt < (n?.keepMs ?? 0);
  };
  const reloadMs = (w: PoolWorkerView) =>
    w.models.filter(worth).reduce((t, h) => t + nonNegative(byModel.get(h.model)?.input.loadMs ?? 0), 0);
  const value = (w: PoolWorkerView) => w.models.filter(worth).length;
  const busy = (w: PoolWorkerView) => w.models.reduce((t, h) => t + h.inFlight, 0);
  const warm = workers.filter((w) => w.state === 'warm');
  const out: string[] = [];
  const ordered = [...warm].sort(
    (a, b) => Number(a.models.length > 0) - Number(b.models.length > 0) || value(a) - value(b) || busy(a) - busy(b),
  );
  for (const w of ordered) {
    if (out.length >= count) break;
    const left = warm.length - out.length - 1;
    if (reloadMs(w) > sloMs * left) continue;
    out.push(w.id);
  }
  return out;
}

function ceilCount(x: number): number {
  return Number.isNaN(x) || x <= 0 ? 0 : Math.ceil(x - 1e-9);
}

function positive(x: number): number | undefined {
  return Number.isFinite(x) && x > 0 ? x : undefined;
}

function nonNegative(x: number): number {
  return x > 0 && Number.isFinite(x) ? x : 0;
}

const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
const pct = (x: number) => `${Math.round(x * 100)} %`;
