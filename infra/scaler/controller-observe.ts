/**
 * What the controller measures each tick, beyond the queues: the workers of each version (the
 * provider's list joined with heartbeats), the throughput one active worker sustains, and how
 * long a cold start takes. Measurements live in Redis under the controller's namespace, so a
 * restarted or new leader starts from what the last one learnt.
 *
 * Throughput: a worker's heartbeat `rowsPerS` is what it did, not what it can do — an idle
 * worker reports ~0. So only *busy* samples count (active, holding jobs, while jobs queue: it
 * would take more if it could), folded into an EWMA per model. Until there is one, the batch
 * profile's rows/s (measured by warm-up at the chosen batch size) stands in; without either the
 * rate is 0, "unknown", and the policy must treat it so.
 *
 * Cold start: a worker first seen in a starting state is remembered (id → its `startedAt`); when
 * it is later seen warmed (standby or active), the time from its start to the warmed state is one
 * sample (to the worker's `stateSince` when it reports one, else to the first warmed beat we see:
 * late by at most a tick). Workers already warm when first seen say nothing (their start
 * predates us). The estimate is a high quantile of the last COLD_START_SAMPLES samples
 * (cold-start-estimate.ts, shared with the simulator).
 */

import type { Backlog, ModelPoolTarget, PoolProvider, WorkerCounts } from '../contracts/pool.ts';
import type { WorkerState } from '../contracts/worker-state.ts';
import type { HeartbeatPayload } from '../fleet/worker-states.ts';
import { queuedJobs } from '../queue/index.ts';
import type { RedisClient } from '../redis/client.ts';
import { scalerColdStartKey, scalerColdStartPendingKey, scalerWorkerRateKey } from '../redis/keys.ts';
import { COLD_START_SAMPLES, coldStartEstimateMs } from './cold-start-estimate.ts';

/** One worker as the controller sees it: the provider's view, plus what its heartbeat says. */
export interface ObservedWorker {
  id: string;
  version: string;
  state: WorkerState;
  /** Jobs it holds, when its heartbeat says. */
  jobsInFlight?: number;
  /** Epoch ms it started, when its heartbeat says. */
  startedAt?: number;
}

export const STARTING_STATES: readonly WorkerState[] = ['launching', 'downloading', 'loading', 'warming'];
/** Weight of a new busy sample in the per-worker rate (the simulator folds its samples the same way). */
export const RATE_EWMA_ALPHA = 0.3;
/** Measurements of a model nobody has looked at for this long are dropped. */
const MEASUREMENT_TTL_MS = 30 * 24 * 3600_000;

export function isStarting(state: WorkerState): boolean {
  return STARTING_STATES.includes(state);
}

/** Workers of a target: the provider's list when there is a provider, else the heartbeats alone. */
export async function observeWorkers(
  target: ModelPoolTarget,
  beats: readonly HeartbeatPayload[],
  provider: Pick<PoolProvider, 'list'> | undefined,
): Promise<ObservedWorker[]> {
  const mine = beats.filter((b) => b.model === target.model && b.version === target.version);
  const byId = new Map(mine.map((b) => [b.id, b]));
  const listed = provider ? await provider.list(target) : mine.map((b) => ({ id: b.id, state: b.state }));
  return listed.map((w) => {
    const beat = byId.get(w.id);
    const worker: ObservedWorker = { id: w.id, version: target.version, state: w.state };
    if (beat) {
      worker.jobsInFlight = beat.jobsInFlight;
      worker.startedAt = beat.startedAt;
    }
    return worker;
  });
}

export function countWorkers(workers: readonly ObservedWorker[]): WorkerCounts {
  const counts: WorkerCounts = { starting: 0, standby: 0, active: 0, draining: 0 };
  for (const w of workers) {
    if (isStarting(w.state)) counts.starting++;
    else if (w.state === 'standby' || w.state === 'active' || w.state === 'draining') counts[w.state]++;
  }
  return counts;
}

/** Where a per-worker rate came from: busy workers (the EWMA), the warm-up batch profile, or neither (0). */
export type RateSource = 'measured' | 'warm-up' | 'none';

/** Per-worker throughput (see the header), one key per model: scalerWorkerRateKey. `shadow`: a shadow scaler's own. */
export function createThroughputMeter(redis: Pick<RedisClient, 'get' | 'set'>, prefix: string, shadow: boolean) {
  const key = (model: string) => scalerWorkerRateKey(prefix, shadow, model);
  return {
    /** Folds this tick's busy samples in and returns rows/s per active worker (0 = unknown), with its source. */
    async observe(
      model: string,
      beats: readonly HeartbeatPayload[],
      backlog: Backlog,
    ): Promise<{ ratePerSec: number; source: RateSource }> {
      const stored = Number(await redis.get(key(model)));
      let ewma = Number.isFinite(stored) && stored > 0 ? stored : undefined;
      const busy = beats.filter((b) => b.state === 'active' && b.jobsInFlight > 0 && b.rowsPerS > 0);
      if (busy.length > 0 && queuedJobs(backlog) > 0) {
        const sample = busy.reduce((sum, b) => sum + b.rowsPerS, 0) / busy.length;
        ewma = ewma === undefined ? sample : ewma + RATE_EWMA_ALPHA * (sample - ewma);
        await redis.set(key(model), String(ewma), 'PX', MEASUREMENT_TTL_MS);
      }
      if (ewma !== undefined) return { ratePerSec: ewma, source: 'measured' };
      const profile = bestProfileRate(beats);
      return { ratePerSec: profile, source: profile > 0 ? 'warm-up' : 'none' };
    },
  };
}

/**
 * How long one full batch takes at `perWorkerRatePerSec`: the largest batch warm-up chose among
 * these workers over the rate. 0 when none reports a profile or the rate is unknown.
 */
/** The largest batch the workers' warm-up chose (1 before any reports one). */
export function chosenBatch(beats: readonly HeartbeatPayload[]): number {
  return Math.max(
    1,
    beats.reduce((most, b) => Math.max(most, b.batchProfile?.chosenBatch ?? 0), 0),
  );
}

export function batchServiceMs(beats: readonly HeartbeatPayload[], perWorkerRatePerSec: number): number {
  const batch = beats.reduce((most, b) => Math.max(most, b.batchProfile?.chosenBatch ?? 0), 0);
  return batch > 0 && perWorkerRatePerSec > 0 ? (batch / perWorkerRatePerSec) * 1000 : 0;
}

/** The best rows/s a warm-up measured at its chosen batch size, among these workers; 0 when none. */
export function bestProfileRate(beats: readonly HeartbeatPayload[]): number {
  return beats.reduce((best, b) => Math.max(best, b.batchProfile?.rowsPerS ?? 0), 0);
}

type ColdStartRedis = Pick<RedisClient, 'hgetall' | 'hsetnx' | 'hdel' | 'lpush' | 'ltrim' | 'lrange' | 'pexpire'>;

/** Cold-start times (see the header), per model: samples (scalerColdStartKey) and launches being timed (…PendingKey). */
export function createColdStartMeter(redis: ColdStartRedis, prefix: string, shadow: boolean) {
  const samplesKey = (model: string) => scalerColdStartKey(prefix, shadow, model);
  const pendingKey = (model: string) => scalerColdStartPendingKey(prefix, shadow, model);

  /** Records what this tick shows; returns the new samples (ms), for the histogram. */
  const observe = async (model: string, beats: readonly HeartbeatPayload[]): Promise<number[]> => {
    const mine = beats.filter((b) => b.model === model);
    const pending = await redis.hgetall(pendingKey(model));
    const samples: number[] = [];
    const done: string[] = [];
    for (const b of mine) {
      if (isStarting(b.state) && pending[b.id] === undefined) await redis.hsetnx(pendingKey(model), b.id, String(b.startedAt));
      if ((b.state === 'standby' || b.state === 'active') && pending[b.id] !== undefined) {
        samples.push(Math.max(0, readyAt(b) - Number(pending[b.id])));
        done.push(b.id);
      }
    }
    // Workers that vanished while starting (failed, killed) leave no sample.
    const alive = new Set(mine.map((b) => b.id));
    done.push(...Object.keys(pending).filter((id) => !alive.has(id)));
    if (done.length > 0) await redis.hdel(pendingKey(model), ...done);
    await redis.pexpire(pendingKey(model), MEASUREMENT_TTL_MS);
    if (samples.length > 0) {
      await redis.lpush(samplesKey(model), ...samples.map(String));
      await redis.ltrim(samplesKey(model), 0, COLD_START_SAMPLES - 1);
      await redis.pexpire(samplesKey(model), MEASUREMENT_TTL_MS);
    }
    return samples;
  };

  /** A high quantile of the recent samples (coldStartEstimateMs; undefined before the first), how many there are, and they (oldest first). */
  const estimate = async (model: string): Promise<{ ms: number | undefined; samples: number; values: number[] }> => {
    // LPUSH keeps the newest first; the estimate reads them oldest first.
    const values = (await redis.lrange(samplesKey(model), 0, -1)).map(Number).reverse();
    return { ms: coldStartEstimateMs(values), samples: values.length, values };
  };

  return { observe, estimate };
}

/**
 * When the worker became warm: the heartbeat's `stateSince` (workers report it), else the beat's
 * own time for an older worker — a worker beats right after a state change.
 */
function readyAt(b: HeartbeatPayload): number {
  return typeof b.stateSince === 'number' ? b.stateSince : b.updatedAt;
}

/**
 * Commands sent but not yet visible: a worker told to activate, stand by or drain reports its new
 * state with its next heartbeat, so a tick in between would see the old state and act on the
 * same worker (or another) again. For up to `holdMs` after a command the controller sees the
 * worker in the state it was told, unless the worker has moved on by itself.
 */
export function createIntents(holdMs: number) {
  const intents = new Map<string, { state: 'active' | 'standby' | 'draining'; until: number }>();
  return {
    remember(workerId: string, state: 'active' | 'standby' | 'draining', now: number): void {
      intents.set(workerId, { state, until: now + holdMs });
    },
    /** The workers as they will be once the commands land. */
    overlay(workers: ObservedWorker[], now: number): ObservedWorker[] {
      for (const [id, intent] of intents) if (now >= intent.until) intents.delete(id);
      return workers.map((w) => {
        const intent = intents.get(w.id);
        if (!intent) return w;
        const warm = w.state === 'active' || w.state === 'standby';
        if (w.state === intent.state || !warm) {
          intents.delete(w.id);
          return w;
        }
        return { ...w, state: intent.state };
      });
    },
  };
}
