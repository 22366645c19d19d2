/**
 * What a warmed worker serves with: the completions, open-jobs and stored-bytes releasers, the
 * worker's Prometheus metrics, the batch runner and micro-batcher over the engine, the result
 * cache, and the BullMQ intake under its supervisor.
 *
 * Its own module so that BullMQ (with msgpackr) and prom-client, a third of what a worker
 * compiles, are not loaded before `downloading`: worker-process.ts imports it when the model
 * starts loading, while the inference thread creates the session and this thread is idle, and
 * awaits it once warm-up is done. Nothing here runs before then.
 */
import { Registry } from 'prom-client';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { createOpenJobs, createOpenJobsReleaser, type OpenJobsReleaser } from '../infra/redis/open-jobs.ts';
import { createResultCache } from '../infra/redis/result-cache.ts';
import { createStoredBytes } from '../infra/redis/stored-bytes.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { type ArrivalCounter, createArrivalCounter } from '../infra/telemetry/arrival-counter.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { createWorkerMetrics, publishMetricsSnapshot } from '../infra/telemetry/metrics.ts';
import type { BatchProfile } from './batch-profile.ts';
import { type BatchEvent, createBatchRunner, type Slice, type SliceResult } from './batch-runner.ts';
import { type Batcher, createBatcher } from './batcher.ts';
import { loadChunkFormats } from './bulk-formats.ts';
import { EngineRejectedError, type InferenceEngine } from './engine/engine.ts';
import type { EnginePool } from './engine/engine-pool.ts';
import { createIntake } from './intake.ts';
import { IntakeSupervisor } from './intake-supervisor.ts';

export interface ServingDeps {
  config: Config;
  redis: RedisClient;
  engine: InferenceEngine;
  clock: Clock;
  log: Log;
  storeFor?: (bucket: string) => ObjectStore;
  workerId: string;
  /** The worker takes jobs now (active, not closing): the intake's watchdog asks. */
  serving: () => boolean;
  /** After each forward pass. */
  onBatch: (e: BatchEvent) => void;
  /** A pass failed other than by ONNX Runtime refusing its data: the engine may be gone. */
  onEngineError: (err: unknown) => void;
  /** Several sessions under `engine` (engine-pool.ts): passes run that many at once. */
  sessions?: Pick<EnginePool, 'size' | 'mostBusy'>;
  /** After each job ends here, beside the metrics (a pool worker's last-used time and hit ratio). */
  onJobDone?: (e: { outcome: 'succeeded' | 'failed' | 'retry'; queueMs: number; rows: number }) => void;
}

/** The parts the worker steers and drains, in the order they close. */
export interface Serving {
  intake: IntakeSupervisor;
  batcher: Batcher<Slice, SliceResult>;
  completions: ArrivalCounter;
  openJobs: OpenJobsReleaser;
  storedBytes?: OpenJobsReleaser;
  /** Writes the worker's metrics snapshot under `key` (the heartbeat does, each beat). */
  publishMetrics(key: string, ttlMs: number): Promise<void>;
}

export function startServing(deps: ServingDeps, manifest: ModelManifest, profile: BatchProfile): Serving {
  const { config, redis, clock, log } = deps;
  const labels = { model: manifest.name, version: manifest.version };
  const completions = createArrivalCounter(createArrivalHistory(redis, config.queuePrefix, clock), clock, {
    onError: (err) => log.warn({ err }, 'completions not recorded'),
  });
  const openJobs = createOpenJobsReleaser(
    createOpenJobs(redis, { prefix: config.queuePrefix, horizonMs: config.jobs.retentionS * 1000, clock }),
    clock,
    { onError: (err) => log.warn({ err }, 'open jobs not released (they age out)') },
  );
  const storedBytes = storedBytesLedger(deps);
  const registry = new Registry();
  const metrics = createWorkerMetrics(registry, labels);
  // A model that fixes its batch (an export with a batch of 1) takes no other pass size, whatever BATCH_MAX_ROWS says.
  const wanted = config.worker.batchMaxRows > 0 ? config.worker.batchMaxRows : profile.chosenBatch;
  const maxRows = Math.min(wanted, manifest.batching.fixedBatch ?? wanted);
  const sessions = deps.sessions?.size ?? 1;
  metrics.sessions.set(labels, sessions);
  const run = createBatchRunner(
    deps.engine,
    manifest.inputs.map((i) => i.name),
    manifest.outputs.map((o) => o.name),
    (e) => {
      // Rows per forward pass: what the engine ran. Throughput counts rows served (onBatch).
      metrics.batchRows.observe(labels, e.uniqueRows);
      metrics.batchInferSeconds.observe(labels, e.inferMs / 1000);
      if (deps.sessions) metrics.sessionsBusyMax.set(labels, deps.sessions.mostBusy);
      deps.onBatch(e);
    },
    manifest.inputs.filter((i) => i.batchAxis === 'none').map((i) => i.name),
  );
  const batcher = createBatcher<Slice, SliceResult>({
    maxRows,
    maxWaitMs: config.worker.batchMaxWaitMs,
    rowsOf: (s) => s.rows,
    // One pass in flight more than sessions: each inference thread runs one while this thread
    // splits the last one's outputs and sends the next, so it never waits on this thread between
    // passes (a thread's runs are still one at a time, in order: ort-thread.ts).
    maxInFlight: sessions + 1,
    run: async (slices, rows) => {
      try {
        return await run(slices, rows);
      } catch (err) {
        // ORT refusing this data is the job's problem; anything else means the engine is gone.
        if (!(err instanceof EngineRejectedError)) deps.onEngineError(err);
        throw err;
      }
    },
    clock,
  });
  const concurrency = config.worker.concurrency > 0 ? config.worker.concurrency : Math.max(4, maxRows * 2 * sessions);
  // Built once: a replacement intake (IntakeSupervisor) shares them with the one it replaces.
  const results = createResultCache(redis, {
    prefix: config.queuePrefix,
    ttlS: config.worker.resultCacheTtlS,
    maxBytes: config.worker.resultCacheMaxBytes,
  });
  const bulk = deps.storeFor
    ? {
        bulk: {
          storeFor: deps.storeFor,
          formats: () => loadChunkFormats({ parquetFooterMaxBytes: config.bulk.parquetFooterMaxBytes }),
        },
      }
    : {};
  const processed = {
    succeeded: metrics.jobsProcessed.labels({ ...labels, outcome: 'succeeded' }),
    failed: metrics.jobsProcessed.labels({ ...labels, outcome: 'failed' }),
    retry: metrics.jobsProcessed.labels({ ...labels, outcome: 'retry' }),
  };
  const queueSeconds = metrics.jobQueueSeconds.labels(labels);
  const intake = new IntakeSupervisor({
    redis,
    clock,
    log,
    prefix: config.queuePrefix,
    manifest,
    concurrency,
    // A free BullMQ worker takes a waiting job in milliseconds; three lock lifetimes are far
    // beyond any reconnect that ends by itself.
    stallMs: Math.max(20_000, 3 * config.worker.lockDurationMs),
    serving: deps.serving,
    build: (connection, gate) =>
      createIntake({
        gate,
        connection,
        entries: redis,
        prefix: config.queuePrefix,
        manifest,
        batcher,
        maxRows,
        bounds: {
          maxRows: config.jobs.maxRowsPerJob,
          maxElements: config.jobs.maxElementsPerJob,
          maxBytesElements: config.jobs.maxBytesElementsPerJob,
        },
        openJobs,
        ...(storedBytes ? { storedBytes } : {}),
        concurrency,
        lockDurationMs: config.worker.lockDurationMs,
        stalledIntervalMs: config.worker.stalledIntervalMs,
        workerId: deps.workerId,
        clock,
        retentionS: config.jobs.retentionS,
        results,
        ...bulk,
        onCacheError: (err) => log.warn({ err }, 'result not cached'),
        onCleanupError: (err) => log.warn({ err }, 'an ended entry’s inputs not deleted (they expire)'),
        onRejected: (e) => log.warn(e, 'ONNX Runtime rejected a job'),
        onJobDone: (e) => {
          // Children bound once: a queue entry ends dozens of jobs at a time, and prom-client's
          // per-call label checks and lookups were a tenth of this thread's time per job.
          processed[e.outcome].inc();
          queueSeconds.observe(e.queueMs / 1000);
          // Completions per minute, beside the API's arrivals (the scaler's history, DESIGN §8).
          if (e.outcome === 'succeeded') {
            completions.recordCompletion(manifest.name, e.rows);
            // Those that waited past the SLO: what the scaler's SLO control counts (slo-control.ts).
            if (e.queueMs > config.scaler.sloQueueWaitMs) completions.recordLate(manifest.name, e.rows);
          }
          deps.onJobDone?.(e);
        },
      }),
  });
  return {
    intake,
    batcher,
    completions,
    openJobs,
    ...(storedBytes ? { storedBytes: storedBytes.releaser } : {}),
    publishMetrics: (key, ttlMs) => publishMetricsSnapshot(redis, key, registry, ttlMs),
  };
}

/** The ledger's worker side when a budget is set: outputs charged, ended entries' inputs released in batches. */
function storedBytesLedger(deps: ServingDeps) {
  const { config, redis, clock, log } = deps;
  if (config.jobs.maxStoredBytesPerTenant <= 0) return undefined;
  const ledger = createStoredBytes(redis, { prefix: config.queuePrefix, ttlMs: config.jobs.retentionS * 1000, clock });
  const releaser = createOpenJobsReleaser(ledger, clock, {
    onError: (err) => log.warn({ err }, 'stored bytes not released (they expire with the retention)'),
  });
  return { ledger, releaser };
}
