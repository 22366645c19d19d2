/**
 * Prometheus metrics, defined in one place, each on a Registry the caller passes in (never the
 * global default registry, so tests and several roles in one process do not collide).
 *
 * Workers are separate processes but users scrape one `/metrics` on the API. So each worker
 * publishes its registry as JSON to Redis under `<prefix>:metrics:<workerId>` with a TTL, and the
 * API merges those snapshots with its own registry through prom-client's
 * `AggregatorRegistry.aggregate`, which sums series with equal labels. Summing is also why the
 * worker-state gauge is one-hot per worker: the cluster total reads "workers in state S".
 * A dead worker's snapshot expires with its TTL.
 */
import { AggregatorRegistry, Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { WORKER_STATES, type WorkerState } from '../contracts/worker-state.ts';
import type { PoolWorkerCounts } from '../fleet/worker-states.ts';
import { getMany, scanKeys } from '../redis/client.ts';
import { metricsKey } from '../redis/keys.ts';

export function createApiMetrics(registry: Registry) {
  const registers = [registry];
  return {
    httpRequests: new Counter({
      name: 'warmpool_http_requests_total',
      help: 'HTTP requests served by the API, by route pattern, method and status',
      labelNames: ['route', 'method', 'status'] as const,
      registers,
    }),
    httpDuration: new Histogram({
      name: 'warmpool_http_request_duration_seconds',
      help: 'HTTP request handling time in seconds, by route pattern and method',
      labelNames: ['route', 'method'] as const,
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    }),
    jobsSubmitted: new Counter({
      name: 'warmpool_jobs_submitted_total',
      help: 'Jobs enqueued by the API, by model, version and kind (async submit or sync infer)',
      labelNames: ['model', 'version', 'kind'] as const,
      registers,
    }),
    // Requests ÷ entries is how much the queue's cost is shared (infra/queue/entry-writer.ts).
    queueEntries: new Counter({
      name: 'warmpool_queue_entries_total',
      help: 'Queue entries written by the API (each carries one or more jobs), by queue',
      labelNames: ['queue'] as const,
      registers,
    }),
    queueEntryJobs: new Counter({
      name: 'warmpool_queue_entry_jobs_total',
      help: 'Jobs written inside queue entries by the API, by queue; ÷ warmpool_queue_entries_total = jobs per entry',
      labelNames: ['queue'] as const,
      registers,
    }),
  };
}

export type ApiMetrics = ReturnType<typeof createApiMetrics>;
export type SubmitKind = 'async' | 'sync';

export interface WorkerMetricLabels {
  model: string;
  version: string;
}

export const BATCH_ROWS_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const SECONDS_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/**
 * A worker's metrics. `labels` are this worker's model and version: `setState` uses them, and
 * the state gauge starts at zero for every state so each series exists from the first scrape.
 */
export function createWorkerMetrics(registry: Registry, labels: WorkerMetricLabels) {
  const registers = [registry];
  const workerState = new Gauge({
    name: 'warmpool_worker_state',
    help: "Workers in each lifecycle state (1 for this worker's current state; summed across workers)",
    labelNames: ['model', 'version', 'state'] as const,
    registers,
  });
  for (const state of WORKER_STATES) workerState.set({ ...labels, state }, 0);
  let current: WorkerState | undefined;
  return {
    batchRows: new Histogram({
      name: 'warmpool_batch_rows',
      help: 'Rows per forward pass',
      labelNames: ['model', 'version'] as const,
      buckets: BATCH_ROWS_BUCKETS,
      registers,
    }),
    batchInferSeconds: new Histogram({
      name: 'warmpool_batch_infer_seconds',
      help: 'Time of one forward pass in seconds',
      labelNames: ['model', 'version'] as const,
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    jobsProcessed: new Counter({
      name: 'warmpool_jobs_processed_total',
      help: 'Jobs finished by workers, by outcome',
      labelNames: ['model', 'version', 'outcome'] as const,
      registers,
    }),
    jobQueueSeconds: new Histogram({
      name: 'warmpool_job_queue_seconds',
      help: 'Time from submit until a worker took the job, in seconds',
      labelNames: ['model', 'version'] as const,
      buckets: SECONDS_BUCKETS,
      registers,
    }),
    sessions: new Gauge({
      name: 'warmpool_worker_sessions',
      help: 'ONNX Runtime sessions of the model this worker runs passes on at once (SESSIONS_PER_WORKER)',
      labelNames: ['model', 'version'] as const,
      registers,
    }),
    sessionsBusyMax: new Gauge({
      name: 'warmpool_worker_sessions_busy_max',
      help: 'The most sessions that were in a forward pass at the same moment, since the worker started serving',
      labelNames: ['model', 'version'] as const,
      registers,
    }),
    workerState,
    /** One-hot: the new state to 1, the previous one to 0. */
    setState(state: WorkerState): void {
      if (current !== undefined && current !== state) workerState.set({ ...labels, state: current }, 0);
      workerState.set({ ...labels, state }, 1);
      current = state;
    },
  };
}

export type WorkerMetrics = ReturnType<typeof createWorkerMetrics>;

/** Load time buckets, seconds: a warm-cache load of a small model is tens of ms, a cold one of a large model minutes. */
const LOAD_SECONDS_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300];

/**
 * A shared pool's worker's own metrics (worker/pool-worker.ts), beside each resident model's
 * createWorkerMetrics. Hit ratio = `warmpool_pool_jobs_total{resident="hit"}` / all: a miss is a
 * job that was queued before its model became resident on the worker that ran it (it waited for a
 * load). Gauges carry the worker's id so the cluster's sum keeps one series per worker.
 */
export function createPoolWorkerMetrics(registry: Registry, labels: { pool: string; worker: string }) {
  const registers = [registry];
  const loads = new Counter({
    name: 'warmpool_pool_model_loads_total',
    help: 'Model loads on shared pool workers, by outcome (loaded, failed) and whether the weights were in the disk cache',
    labelNames: ['pool', 'outcome', 'cache'] as const,
    registers,
  });
  const loadSeconds = new Histogram({
    name: 'warmpool_pool_model_load_seconds',
    help: 'From a model load starting (download if needed) to its intake fetching, in seconds',
    labelNames: ['pool', 'cache', 'profile'] as const,
    buckets: LOAD_SECONDS_BUCKETS,
    registers,
  });
  const evictions = new Counter({
    name: 'warmpool_pool_model_evictions_total',
    help: 'Models a shared pool worker let go: to make room within its memory budget (budget) or no longer wanted (unwanted)',
    labelNames: ['pool', 'reason'] as const,
    registers,
  });
  const noRoom = new Counter({
    name: 'warmpool_pool_model_no_room_total',
    help: 'Loads not started because the model did not fit the memory budget and nothing could be evicted',
    labelNames: ['pool'] as const,
    registers,
  });
  const jobs = new Counter({
    name: 'warmpool_pool_jobs_total',
    help: 'Jobs shared pool workers finished, by whether their model was resident when they were queued (hit) or not (miss)',
    labelNames: ['pool', 'resident'] as const,
    registers,
  });
  const resident = new Gauge({
    name: 'warmpool_pool_models_resident',
    help: 'Models resident (serving) on a shared pool worker',
    labelNames: ['pool', 'worker'] as const,
    registers,
  });
  const residentBytes = new Gauge({
    name: 'warmpool_pool_resident_bytes',
    help: "Measured resident memory of a shared pool worker's models, bytes",
    labelNames: ['pool', 'worker'] as const,
    registers,
  });
  const { pool } = labels;
  // The same counts as totals since this worker began, for its heartbeat (GET /v1/pool, the dashboard).
  const totals: PoolWorkerCounts = { loads: 0, evictions: 0, jobsHit: 0, jobsMiss: 0 };
  return {
    loaded(e: { cacheHit: boolean; reused: boolean; loadMs: number }): void {
      const cache = e.cacheHit ? 'hit' : 'miss';
      totals.loads++;
      loads.inc({ pool, outcome: 'loaded', cache });
      loadSeconds.observe({ pool, cache, profile: e.reused ? 'reused' : 'measured' }, e.loadMs / 1000);
    },
    loadFailed: () => loads.inc({ pool, outcome: 'failed', cache: 'unknown' }),
    evicted(reason: 'budget' | 'unwanted'): void {
      totals.evictions++;
      evictions.inc({ pool, reason });
    },
    noRoom: () => noRoom.inc({ pool }),
    jobDone(hit: boolean): void {
      if (hit) totals.jobsHit++;
      else totals.jobsMiss++;
      jobs.inc({ pool, resident: hit ? 'hit' : 'miss' });
    },
    /** Loads done, models let go and jobs finished (hit or miss) since this worker began. */
    totals: (): PoolWorkerCounts => ({ ...totals }),
    setResident(models: number, bytes: number): void {
      resident.set(labels, models);
      residentBytes.set(labels, bytes);
    },
  };
}

export type PoolWorkerMetrics = ReturnType<typeof createPoolWorkerMetrics>;

/** The narrow slice of ioredis these functions use. */
export interface MetricsRedis {
  set(key: string, value: string, px: 'PX', ttlMs: number): Promise<unknown>;
  scan(cursor: string, match: 'MATCH', pattern: string, count: 'COUNT', n: number): Promise<[string, string[]]>;
  mget(keys: string[]): Promise<Array<string | null>>;
  get(key: string): Promise<string | null>;
}

/** Called by a worker periodically; the TTL should outlive a few periods. */
export async function publishMetricsSnapshot(redis: MetricsRedis, key: string, registry: Registry, ttlMs: number): Promise<void> {
  const snapshot = await registry.getMetricsAsJSON();
  await redis.set(key, JSON.stringify(snapshot), 'PX', Math.max(1, Math.round(ttlMs)));
}

/** Every live worker's snapshot under the prefix. SCAN, not KEYS: KEYS blocks Redis. */
export async function readMetricsSnapshots(redis: MetricsRedis, queuePrefix: string): Promise<object[]> {
  const pattern = metricsKey(escapeGlob(queuePrefix), '*');
  const keys = new Set<string>();
  // Every master of a Redis Cluster, and per-key reads there (the keys lie in many slots).
  for await (const batch of scanKeys(redis, pattern, 200)) for (const key of batch) keys.add(key);
  if (keys.size === 0) return [];
  const values = await getMany(redis, [...keys]);
  const snapshots: object[] = [];
  for (const raw of values) {
    const snapshot = raw === null ? undefined : parseSnapshot(raw);
    if (snapshot) snapshots.push(snapshot);
  }
  return snapshots;
}

/**
 * The API's own metrics merged with workers' snapshots, as Prometheus text. Series with the same
 * name and labels are combined by each metric's aggregator (sum unless the metric says otherwise).
 */
export async function renderClusterMetrics(apiRegistry: Registry, snapshots: object[]): Promise<string> {
  const own = await apiRegistry.getMetricsAsJSON();
  const valid = snapshots.filter(isSnapshot);
  return AggregatorRegistry.aggregate([own, ...valid]).metrics();
}

/** A snapshot a worker wrote; anything else (a half-written or foreign value) is skipped. */
function parseSnapshot(raw: string): object | undefined {
  try {
    const value: unknown = JSON.parse(raw);
    return isSnapshot(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

function isSnapshot(value: unknown): value is object[] {
  return (
    Array.isArray(value) &&
    value.every(
      (m: unknown) =>
        typeof m === 'object' &&
        m !== null &&
        typeof (m as { name?: unknown }).name === 'string' &&
        typeof (m as { aggregator?: unknown }).aggregator === 'string' &&
        Array.isArray((m as { values?: unknown }).values),
    )
  );
}

function escapeGlob(s: string): string {
  return s.replace(/[*?[\]\\]/g, '\\$&');
}
