/**
 * What the pool controller sees of a shared pool, as the planner (pool-plan.ts) takes it: pure
 * functions from heartbeats, the provider's list and the placement claims to PoolWorkerViews, and
 * from the members' deployments to the model versions the pool serves.
 *
 * A model version is one planner "model", keyed `model@version` (modelKey): a deployment in a
 * shared pool that splits traffic over versions has each weighted version placed on its own, its
 * forecast the model's scaled by the version's share of the weight (scaleForecast).
 *
 * A worker's view carries its busy share: the controller's mean of its heartbeats' `busyFraction`
 * over the last SLO (busy-window.ts; each the share of one heartbeat interval its inference thread
 * had work, worker/busy-meter.ts), or the last heartbeat's where no window is given; absent when
 * the heartbeat has none (no heartbeat yet, or a worker from before it was measured).
 *
 * What a heartbeat's `models` says a worker holds: downloading, loading and warming are a load in
 * progress (`loading`), `active` is resident and serving; `draining`, `evicted`, `no-room` and
 * `failed` are not held. A claim (pool-controller.ts: a placement asked for and not yet in a
 * heartbeat) is shown as a load in progress on the worker it named, so the tick never places the
 * same model a second time while the first load is on its way.
 *
 * Measurements carried between ticks (PoolMeasurements): per model version, its last measured
 * load time, resident memory and warm-up profile (rows/s at its chosen batch, that batch's time,
 * a batch of one's time), so a model evicted a day ago is still planned with what it cost when it
 * was last loaded. A model never loaded has no rate yet: it is planned with the median of the
 * pool's measured ones (standInRate), which in a pool of similar models is far closer than the
 * planner's "unknown" (a row a second, which would size a first burst's copies as if each worker
 * could barely serve it), and without batch times (batchTimes).
 */

import type { Forecast, PoolWorker } from '../contracts/pool.ts';
import type { SharedPoolConfig } from '../contracts/shared-pool.ts';
import type { Deployment } from '../deployments/deployment-store.ts';
import type { HeartbeatPayload, PoolModelView } from '../fleet/worker-states.ts';
import { isStarting } from './controller-observe.ts';
import type { HeldModel, PoolModelInput, PoolPlanSettings, PoolWorkerView } from './pool-plan.ts';
import type { ScalerSettings } from './settings.ts';

/** A heartbeat as the pool controller reads it: a pool worker's names its pool and lists its models. */
export type PoolBeat = HeartbeatPayload;

/** A member model version of the pool. */
export interface MemberRef {
  /** `model@version`: the planner's model name. */
  key: string;
  model: string;
  version: string;
  /** This version's share of its deployment's traffic weight (1 for a single version). */
  share: number;
}

/** A model version's measurements; the last three are of one warm-up profile, the newest tick's best (measure). */
export interface Measured {
  loadMs?: number;
  memoryMb?: number;
  /** Rows/s at the profile's chosen batch. */
  rowsPerSec?: number;
  /** The chosen batch's time: chosen batch / rows/s. */
  batchServiceMs?: number;
  /** A batch of one row's median time, where the profile measured one. */
  batchOneMs?: number;
}

export type PoolMeasurements = Record<string, Measured>;

const LOADING = new Set(['downloading', 'loading', 'warming']);
const MB = 1024 * 1024;

export function modelKey(model: string, version: string): string {
  return `${model}@${version}`;
}

/** The planner's settings: the pool's bounds and memory, the scaler's policy settings, the pool's measured cold start (else the setting). */
export function poolPlanSettings(pool: SharedPoolConfig, s: ScalerSettings, coldStartMs: number | undefined): PoolPlanSettings {
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

/** The weighted versions of the deployments that name `pool`, each with its share of its deployment's weight. */
export function memberRefs(pool: string, deployments: readonly Deployment[]): MemberRef[] {
  const refs: MemberRef[] = [];
  for (const d of deployments) {
    if (d.pool !== pool) continue;
    const weighted = d.versions.filter((v) => v.weight > 0);
    const versions = weighted.length > 0 ? weighted : [{ version: d.version, weight: 1 }];
    const total = versions.reduce((t, v) => t + v.weight, 0);
    for (const v of versions) refs.push({ key: modelKey(d.model, v.version), model: d.model, version: v.version, share: v.weight / total });
  }
  return refs;
}

/** A forecast for `share` of the traffic: every rate scaled, the rest kept. */
export function scaleForecast(f: Forecast, share: number): Forecast {
  if (share === 1) return f;
  const scaled: Forecast = { ...f, ratePerSec: f.ratePerSec * share, burstRatePerSec: f.burstRatePerSec * share };
  if (f.upperRatePerSec !== undefined) scaled.upperRatePerSec = f.upperRatePerSec * share;
  if (f.burstsBySpan) scaled.burstsBySpan = f.burstsBySpan.map((b) => ({ spanS: b.spanS, ratePerSec: b.ratePerSec * share }));
  return scaled;
}

/** A model's counted rows, for one version's share of its traffic. */
export function scaleObserved(o: NonNullable<PoolModelInput['observed']>, share: number): NonNullable<PoolModelInput['observed']> {
  if (share === 1) return o;
  return {
    arrivedRows: o.arrivedRows * share,
    servedRows: o.servedRows * share,
    ...(o.lateRows !== undefined ? { lateRows: o.lateRows * share } : {}),
    sinceMs: o.sinceMs,
  };
}

/** `workerId\u0000model@version` of every model a worker evicted and was not asked for since (its heartbeat's `evicted`). */
export function evictedHere(beats: readonly PoolBeat[]): Set<string> {
  const out = new Set<string>();
  for (const b of beats) for (const m of b.models ?? []) if (m.state === 'evicted') out.add(`${b.id}\u0000${modelKey(m.model, m.version)}`);
  return out;
}

/** The models a heartbeat says its worker holds (see the header). */
export function heldModels(beat: PoolBeat, now: number): HeldModel[] {
  const held: HeldModel[] = [];
  for (const m of beat.models ?? []) {
    const loading = LOADING.has(m.state);
    if (!loading && m.state !== 'active') continue;
    held.push({
      model: modelKey(m.model, m.version),
      lastUsedAt: m.lastUsedAt > 0 ? m.lastUsedAt : now,
      inFlight: m.jobsInFlight,
      loading,
    });
  }
  return held;
}

/**
 * The pool's workers: the provider's list when there is one (workers still without a heartbeat
 * are `starting`), else the heartbeats alone (shadow mode). Stopped and failed workers are gone.
 * `claims`: worker id → model keys placed on it and not yet in its heartbeat.
 */
export function poolWorkerViews(
  beats: readonly PoolBeat[],
  listed: readonly PoolWorker[] | undefined,
  claims: ReadonlyMap<string, readonly string[]>,
  now: number,
  /** A worker's busy share over the SLO (busy-window.ts); absent: its last heartbeat's. */
  busyShare?: (id: string) => number | undefined,
): PoolWorkerView[] {
  const byId = new Map(beats.map((b) => [b.id, b]));
  const workers = listed ?? beats.map((b) => ({ id: b.id, state: b.state, handle: b.id }));
  const views: PoolWorkerView[] = [];
  for (const w of workers) {
    if (w.state === 'stopped' || w.state === 'failed') continue;
    const beat = byId.get(w.id);
    const state = isStarting(w.state) ? 'starting' : w.state === 'draining' ? 'draining' : 'warm';
    const models = beat ? heldModels(beat, now) : [];
    for (const key of claims.get(w.id) ?? []) {
      if (!models.some((h) => h.model === key)) models.push({ model: key, lastUsedAt: now, inFlight: 0, loading: true });
    }
    const busy = beat && (busyShare ? busyShare(w.id) : beat.busyFraction);
    views.push({ id: w.id, state, models, ...(busy !== undefined ? { busyFraction: busy } : {}) });
  }
  return views;
}

/** The measurements so far, with what these heartbeats add (the newest load, resident size and warm-up profile of each model version). */
export function measure(previous: PoolMeasurements, beats: readonly PoolBeat[]): PoolMeasurements {
  const out: PoolMeasurements = { ...previous };
  const profiles = new Map<string, Profile>();
  for (const b of beats) {
    for (const m of b.models ?? []) {
      if (m.state !== 'active') continue;
      const key = modelKey(m.model, m.version);
      const seen: Measured = { ...out[key] };
      if (m.loadMs !== undefined && m.loadMs > 0) seen.loadMs = m.loadMs;
      if (m.residentBytes > 0) seen.memoryMb = m.residentBytes / MB;
      if (m.profile && m.profile.rowsPerS > (profiles.get(key)?.rowsPerS ?? 0)) profiles.set(key, m.profile);
      out[key] = seen;
    }
  }
  // This tick's best warm-up profile of each model replaces the last: a slower host's profile is
  // news too. Whole: a batch of one kept from another profile would not match this one's rate.
  for (const [key, p] of profiles) {
    const { rowsPerSec: _r, batchServiceMs: _s, batchOneMs: _o, ...rest } = out[key] ?? {};
    out[key] = {
      ...rest,
      rowsPerSec: p.rowsPerS,
      batchServiceMs: (Math.max(1, p.chosenBatch) / p.rowsPerS) * 1000,
      ...(p.batchOneMs !== undefined && p.batchOneMs > 0 ? { batchOneMs: p.batchOneMs } : {}),
    };
  }
  return out;
}

type Profile = NonNullable<PoolModelView['profile']>;

/**
 * A model's batch times as the planner takes them (PoolModelInput): none before its profile is
 * measured (it is planned at a stand-in rate then), and a batch of one only beside a full batch.
 */
export function batchTimes(m: Measured): Pick<PoolModelInput, 'batchServiceMs' | 'batchOneMs'> {
  if (m.rowsPerSec === undefined || m.batchServiceMs === undefined) return {};
  return { batchServiceMs: m.batchServiceMs, ...(m.batchOneMs !== undefined ? { batchOneMs: m.batchOneMs } : {}) };
}

/** The median measured rows/s of the pool's models, for one not measured yet; 0 (unknown) when none is. */
export function standInRate(measured: PoolMeasurements): number {
  const rates = Object.values(measured)
    .map((m) => m.rowsPerSec ?? 0)
    .filter((r) => r > 0)
    .sort((a, b) => a - b);
  if (rates.length === 0) return 0;
  const mid = Math.floor(rates.length / 2);
  return rates.length % 2 === 1 ? (rates[mid] as number) : ((rates[mid - 1] as number) + (rates[mid] as number)) / 2;
}
