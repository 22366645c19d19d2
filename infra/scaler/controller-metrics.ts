/**
 * The scaler's Prometheus metrics, on a Registry of the scaler's own (never the API's: the
 * leader publishes this registry to Redis as a snapshot, `<prefix>:metrics:scaler`, with
 * infra/telemetry/metrics.ts publishMetricsSnapshot, and the API's /metrics merges it like a worker's —
 * publishing the API's own registry there would count the API twice). Only the leader
 * publishes, and gauges are rebuilt every tick, so a removed deployment's series go with it.
 */
import { Gauge, Histogram, type Registry } from 'prom-client';
import type { Backlog, Forecast, PolicyDecision } from '../contracts/pool.ts';
import { WORKER_STATES, type WorkerState } from '../contracts/worker-state.ts';
import { queuedJobs } from '../queue/index.ts';

export const COLD_START_BUCKETS_S = [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200];

export function createScalerMetrics(registry: Registry) {
  const registers = [registry];
  return {
    poolWorkers: new Gauge({
      name: 'warmpool_pool_workers',
      help: 'Workers of a deployment by lifecycle state, as the scaler saw them at its last tick',
      labelNames: ['model', 'state'] as const,
      registers,
    }),
    desired: new Gauge({
      name: 'warmpool_pool_desired',
      help: 'What the scaler wants for a deployment: active and standby workers, and workers launched or drained at the last tick',
      labelNames: ['model', 'kind'] as const,
      registers,
    }),
    forecastRate: new Gauge({
      name: 'warmpool_forecast_rate',
      help: 'Forecast arrivals per second over the next lead-time window',
      labelNames: ['model'] as const,
      registers,
    }),
    backlogJobs: new Gauge({
      name: 'warmpool_backlog_jobs',
      help: 'Jobs not yet taken by a worker (waiting + prioritized + delayed), over the versions with traffic',
      labelNames: ['model'] as const,
      registers,
    }),
    coldStart: new Histogram({
      name: 'warmpool_cold_start_seconds',
      help: 'Time from a worker starting to its being warmed (standby or active), in seconds',
      labelNames: ['model'] as const,
      buckets: COLD_START_BUCKETS_S,
      registers,
    }),
  };
}

export type ScalerMetrics = ReturnType<typeof createScalerMetrics>;

export interface DeploymentObservation {
  model: string;
  workers: ReadonlyArray<{ state: WorkerState }>;
  decision: Pick<PolicyDecision, 'active' | 'standby' | 'launch' | 'drain'>;
  forecast: Forecast;
  backlog: Backlog;
  coldStartSamplesMs: readonly number[];
}

/** Sets one deployment's series (after `reset` at the start of the tick). */
export function observeDeployment(m: ScalerMetrics, o: DeploymentObservation): void {
  for (const state of WORKER_STATES) {
    m.poolWorkers.set({ model: o.model, state }, o.workers.filter((w) => w.state === state).length);
  }
  for (const kind of ['active', 'standby', 'launch', 'drain'] as const) m.desired.set({ model: o.model, kind }, o.decision[kind]);
  m.forecastRate.set({ model: o.model }, o.forecast.ratePerSec);
  m.backlogJobs.set({ model: o.model }, queuedJobs(o.backlog));
  for (const ms of o.coldStartSamplesMs) m.coldStart.observe({ model: o.model }, ms / 1000);
}

/** Drops every gauge series (the histogram keeps counting). */
export function resetGauges(m: ScalerMetrics): void {
  m.poolWorkers.reset();
  m.desired.reset();
  m.forecastRate.reset();
  m.backlogJobs.reset();
}
