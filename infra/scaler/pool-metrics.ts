/**
 * The pool controller's Prometheus series, on the scaler's own registry (controller-metrics.ts:
 * the leader publishes it as the `scaler` snapshot). Gauges are rebuilt every tick, so a deleted
 * pool's series go with it; the counters count for the life of the process.
 *
 *   warmpool_shared_pool_workers{pool,state}        workers by state: starting, warm, draining
 *   warmpool_shared_pool_desired{pool,kind}         workers, active, standby, launch, drain of the latest plan
 *   warmpool_shared_pool_resident_models{pool}      models resident over the pool's workers (copies counted)
 *   warmpool_shared_pool_standby{pool,sizing}       standby for bursts: pooled vs the sum of per-model standbys
 *   warmpool_shared_pool_placements_total{pool,trigger}  loads asked (tick: planned, demand: a first request at once)
 *   warmpool_shared_pool_evictions_total{pool}      evictions the plans asked
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { PoolPlan, PoolWorkerView } from './pool-plan.ts';

export function createPoolMetrics(registry: Registry) {
  const registers = [registry];
  return {
    workers: new Gauge({
      name: 'warmpool_shared_pool_workers',
      help: "A shared pool's workers by state (starting, warm, draining), as the pool controller saw them at its last tick",
      labelNames: ['pool', 'state'] as const,
      registers,
    }),
    desired: new Gauge({
      name: 'warmpool_shared_pool_desired',
      help: "The pool controller's latest plan for a shared pool: workers, active, standby, and workers launched or drained",
      labelNames: ['pool', 'kind'] as const,
      registers,
    }),
    resident: new Gauge({
      name: 'warmpool_shared_pool_resident_models',
      help: "Models resident over a shared pool's workers, copies counted",
      labelNames: ['pool'] as const,
      registers,
    }),
    standby: new Gauge({
      name: 'warmpool_shared_pool_standby',
      help: 'Standby for bursts: pooled over the members, against the sum of what each model alone would hold',
      labelNames: ['pool', 'sizing'] as const,
      registers,
    }),
    placements: new Counter({
      name: 'warmpool_shared_pool_placements_total',
      help: 'Model loads the pool controller asked of workers: planned at a tick, or at once for a first request',
      labelNames: ['pool', 'trigger'] as const,
      registers,
    }),
    evictions: new Counter({
      name: 'warmpool_shared_pool_evictions_total',
      help: "Evictions the pool controller's plans asked of workers",
      labelNames: ['pool'] as const,
      registers,
    }),
  };
}

export type PoolMetrics = ReturnType<typeof createPoolMetrics>;

/** One pool's tick: its workers and plan (gauges), and what the plan asked (counters, when applied). */
export function observePool(m: PoolMetrics, pool: string, workers: readonly PoolWorkerView[], plan: PoolPlan, applied: boolean): void {
  for (const state of ['starting', 'warm', 'draining'] as const)
    m.workers.set({ pool, state }, workers.filter((w) => w.state === state).length);
  const counts = { workers: plan.workers, active: plan.active, standby: plan.standby, launch: plan.launch, drain: plan.drain.length };
  for (const [kind, n] of Object.entries(counts)) m.desired.set({ pool, kind }, n);
  m.resident.set(
    { pool },
    workers.reduce((t, w) => t + w.models.filter((h) => !h.loading).length, 0),
  );
  m.standby.set({ pool, sizing: 'pooled' }, plan.terms.pooledBurstStandby);
  m.standby.set({ pool, sizing: 'per-model-sum' }, plan.terms.perModelStandbySum);
  if (!applied) return;
  if (plan.loads.length > 0) m.placements.inc({ pool, trigger: 'tick' }, plan.loads.length);
  if (plan.evictions.length > 0) m.evictions.inc({ pool }, plan.evictions.length);
}

/** Drops every gauge series (the counters keep counting). */
export function resetPoolGauges(m: PoolMetrics): void {
  m.workers.reset();
  m.desired.reset();
  m.resident.reset();
  m.standby.reset();
}
