/**
 * The dashboard's own record of a deployment's pool over time: what is not recorded elsewhere.
 * Arrivals are per-minute counters (infra/telemetry/arrival-history.ts) and the forecast is in the
 * scaler's decision log; queue depth at a finer grain, workers by state, batch sizes and queue
 * waits are sampled here.
 *
 * Sampling is lazy and shared: the series route calls `sampleIfDue` on every read, and a sample
 * is taken only when none was in the last `minIntervalMs` (a SET NX PX guard, so any number of
 * open dashboards and API processes add one sample per interval). The record therefore grows
 * while someone watches; `sampleIfDue` is exported so a periodic caller can keep it continuous.
 *
 * Keys (per model):
 *   <prefix>:dashboard:samples:<model>   stream, one `sample` field (PoolSample JSON), capped near maxLen
 *   <prefix>:dashboard:counters:<model>  the workers' raw counters at the last sample (for the next difference)
 *   <prefix>:dashboard:due:<model>       the guard
 */

import type { Backlog } from '../../infra/contracts/pool.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import { getMany, type RedisClient, scanKeys } from '../../infra/redis/client.ts';
import { dashboardKey, metricsKey } from '../../infra/redis/keys.ts';
import { countWorkers } from '../../infra/scaler/index.ts';
import { type CountersByWorker, type Histogram, intervalHistogram, type PoolSample, type WorkerCounters } from './series.ts';

export type SamplesRedis = Pick<RedisClient, 'set' | 'get' | 'xadd' | 'xrange' | 'scan' | 'mget'>;

export interface PoolSamplesDeps {
  redis: SamplesRedis;
  prefix: string;
  clock: Clock;
  /** A deployment's queues summed over the versions named. */
  backlog: (target: { model: string; versions: readonly string[] }) => Promise<Backlog>;
  /** Default 2 s. */
  minIntervalMs?: number;
  /** Samples kept per model; default 3600 (two hours at one per 2 s). */
  maxLen?: number;
}

export interface PoolSamples {
  /** Takes a sample of the deployment unless one was taken less than minIntervalMs ago. */
  sampleIfDue(target: { model: string; versions: readonly string[] }): Promise<boolean>;
  /** Samples taken in [fromMs, toMs], oldest first. */
  read(model: string, fromMs: number, toMs: number): Promise<PoolSample[]>;
}

const METRICS = { batchRows: 'warmpool_batch_rows', queueSeconds: 'warmpool_job_queue_seconds' } as const;
/** Stream ids are Redis's clock; `at` is ours. Reading a little earlier than asked absorbs a skew. */
const CLOCK_SLACK_MS = 60_000;

export function createPoolSamples(deps: PoolSamplesDeps): PoolSamples {
  const minIntervalMs = deps.minIntervalMs ?? 2_000;
  const maxLen = deps.maxLen ?? 3_600;
  const key = (kind: 'due' | 'counters' | 'samples', model: string) => dashboardKey(deps.prefix, kind, model);

  async function sampleIfDue(target: { model: string; versions: readonly string[] }): Promise<boolean> {
    const { model } = target;
    if ((await deps.redis.set(key('due', model), '1', 'PX', minIntervalMs, 'NX')) !== 'OK') return false;
    const [queue, beats, counters, previous] = await Promise.all([
      deps.backlog(target),
      listHeartbeats(deps.redis, deps.prefix),
      readCounters(deps.redis, deps.prefix, model),
      deps.redis.get(key('counters', model)),
    ]);
    const sample: PoolSample = {
      at: deps.clock.now(),
      queue,
      workers: countWorkers(beats.filter((b) => b.model === model)),
    };
    const earlier = previous ? (parseJson(previous) as CountersByWorker | undefined) : undefined;
    if (earlier) {
      sample.batchRows = intervalHistogram(earlier, counters, 'batchRows');
      sample.queueSeconds = intervalHistogram(earlier, counters, 'queueSeconds');
    }
    // Kept a few intervals: after a longer gap the next difference would span the gap as one point.
    await deps.redis.set(key('counters', model), JSON.stringify(counters), 'PX', 5 * minIntervalMs);
    await deps.redis.xadd(key('samples', model), 'MAXLEN', '~', maxLen, '*', 'sample', JSON.stringify(sample));
    return true;
  }

  async function read(model: string, fromMs: number, toMs: number): Promise<PoolSample[]> {
    const entries = await deps.redis.xrange(key('samples', model), String(Math.max(0, fromMs - CLOCK_SLACK_MS)), '+');
    const samples: PoolSample[] = [];
    for (const [, fields] of entries) {
      const sample = fields[0] === 'sample' ? (parseJson(fields[1] ?? '') as PoolSample | undefined) : undefined;
      if (sample && sample.at >= fromMs && sample.at <= toMs) samples.push(sample);
    }
    return samples;
  }

  return { sampleIfDue, read };
}

/** Every worker's published counters for `model` (infra/telemetry/metrics.ts snapshots), by worker id. */
async function readCounters(redis: SamplesRedis, prefix: string, model: string): Promise<CountersByWorker> {
  const head = metricsKey(prefix, '');
  const keys: string[] = [];
  // Every master of a Redis Cluster, and per-key reads there (the keys lie in many slots).
  for await (const batch of scanKeys(redis, `${head.replace(/[*?[\]\\]/g, '\\$&')}*`, 200)) keys.push(...batch);
  const unique = [...new Set(keys)];
  if (unique.length === 0) return {};
  const values = await getMany(redis, unique);
  const out: CountersByWorker = {};
  for (const [i, raw] of values.entries()) {
    const counters = raw === null ? undefined : countersOf(parseJson(raw), model);
    if (counters) out[(unique[i] as string).slice(head.length)] = counters;
  }
  return out;
}

interface MetricValue {
  labels?: Record<string, string | number>;
  value?: number;
  metricName?: string;
}

/**
 * A worker's batch-size and queue-wait histograms for `model` from its prom-client JSON snapshot
 * (`registry.getMetricsAsJSON()`), summed over versions; undefined when it has neither.
 */
export function countersOf(snapshot: unknown, model: string): WorkerCounters | undefined {
  if (!Array.isArray(snapshot)) return undefined;
  const out: WorkerCounters = {};
  for (const field of ['batchRows', 'queueSeconds'] as const) {
    const metric = snapshot.find((m: { name?: unknown }) => m?.name === METRICS[field]) as { values?: MetricValue[] } | undefined;
    const h = metric && Array.isArray(metric.values) ? histogramOf(metric.values, METRICS[field], model) : undefined;
    if (h) out[field] = h;
  }
  return out.batchRows || out.queueSeconds ? out : undefined;
}

function histogramOf(values: readonly MetricValue[], name: string, model: string): Histogram | undefined {
  const buckets = new Map<number, number>();
  let sum = 0;
  let count = 0;
  let seen = false;
  for (const v of values) {
    if (v.labels?.model !== model || typeof v.value !== 'number') continue;
    seen = true;
    if (v.metricName === `${name}_sum`) sum += v.value;
    else if (v.metricName === `${name}_count`) count += v.value;
    else if (v.metricName === `${name}_bucket`) {
      // +Inf is not a bound here: `count` holds it (series.ts Histogram).
      const le = Number(v.labels.le);
      if (Number.isFinite(le)) buckets.set(le, (buckets.get(le) ?? 0) + v.value);
    }
  }
  if (!seen || buckets.size === 0) return undefined;
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  return { bounds, counts: bounds.map((b) => buckets.get(b) ?? 0), sum, count };
}

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return undefined;
  }
}
