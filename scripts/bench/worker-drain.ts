/**
 * One worker (in this process: the engine still runs in its own thread) draining a full queue.
 * The queue is paused while it is filled and while the worker warms up, so the clock starts
 * with a full queue and a warmed worker, and several phases (single-row jobs, then jobs of a
 * full batch each) can run on the same worker. The queue is filled as the API fills it under
 * load: requests sent together through the job queue's entry writer, so they share queue
 * entries (infra/contracts/entry.ts) and travel as packed bytes.
 */

import { queueName } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { type BullJobQueue, createBullJobQueue, openQueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import type { BatchProfile } from '../../worker/batch-profile.ts';
import { createThreadEngine } from '../../worker/engine/thread-engine.ts';
import { WarmpoolWorker } from '../../worker/worker-process.ts';
import { benchRequest, rowWidth } from './bench-models.ts';
import { inWorkerLatencies, RequestWatch } from './queue-watch.ts';
import { type BenchContext, scopedEnv } from './services.ts';
import { type LatencySummary, ratePerS } from './stats.ts';

export interface DrainPhase {
  jobs: number;
  rowsPerJob: number;
}

export interface DrainResult extends DrainPhase {
  rowsPerS: number;
  jobsPerS: number;
  failed: number;
  /** Rows per forward pass, as jobs brought them. */
  meanBatchRows: number;
  /** Share of the drain's wall time the engine spent in forward passes. */
  engineBusy: number;
  /** Took the job → result stored (BullMQ processedOn → finishedOn). */
  inWorker: LatencySummary;
}

export interface DrainRun {
  /** The worker's batch size (BATCH_MAX_ROWS, else its warm-up's choice) and threads. */
  maxRows: number;
  threads: number;
  profile?: BatchProfile;
  phases: DrainResult[];
}

export async function measureWorkerDrain(
  ctx: BenchContext,
  manifest: ModelManifest,
  label: string,
  phases: DrainPhase[],
  overrides: Record<string, string> = {},
): Promise<DrainRun> {
  const { config } = scopedEnv(ctx, label, overrides);
  const connection = createRedis(config.redisUrl);
  const probes = openQueueProbes(connection, config.queuePrefix);
  const queue = probes.queue(queueName(manifest.name, manifest.version));
  const worker = new WarmpoolWorker(
    {
      config,
      redis: createRedis(config.redisUrl),
      registry: ctx.registry,
      engine: createThreadEngine(),
      clock: systemClock,
      log: createLogger('warn'),
    },
    { model: manifest.name, version: manifest.version },
  );
  const producer = createBullJobQueue({ connection: config.redisUrl, prefix: config.queuePrefix, retentionS: 3600, attempts: 1 });
  const watch = new RequestWatch(queue);
  const batches = { count: 0, rows: 0, inferMs: 0 };
  worker.on('batch:flushed', (e) => {
    batches.count++;
    batches.rows += e.rows;
    batches.inferMs += e.inferMs;
  });
  try {
    await queue.pause();
    await worker.start();
    const results: DrainResult[] = [];
    for (const phase of phases) {
      Object.assign(batches, { count: 0, rows: 0, inferMs: 0 });
      await fill(producer, manifest, phase);
      const started = Date.now();
      await queue.resume();
      const { lastFinishedAt: finishedAt, failed } = await watch.waitFinished(phase.jobs);
      const inWorker = inWorkerLatencies(watch.requests());
      const jobsPerS = ratePerS(phase.jobs, started, finishedAt);
      results.push({
        ...phase,
        jobsPerS,
        rowsPerS: jobsPerS * phase.rowsPerJob,
        failed,
        meanBatchRows: batches.count > 0 ? batches.rows / batches.count : NaN,
        engineBusy: batches.inferMs / Math.max(1, finishedAt - started),
        inWorker,
      });
      await queue.pause();
      await watch.reset();
    }
    const profile = worker.batchProfile;
    const maxRows = config.worker.batchMaxRows > 0 ? config.worker.batchMaxRows : (profile?.chosenBatch ?? 0);
    return { maxRows, threads: profile?.threads ?? 0, phases: results, ...(profile ? { profile } : {}) };
  } finally {
    await worker.close();
    await producer.close();
    await queue.obliterate().catch(() => undefined);
    await probes.close();
    await closeRedis(connection);
  }
}

/** Values sent together: a chunk of a large model's requests is built, sent and dropped before the next. */
const VALUES_PER_ADD = 2_000_000;

async function fill(producer: BullJobQueue, manifest: ModelManifest, phase: DrainPhase): Promise<void> {
  const submittedAt = Date.now();
  const width = manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0);
  const chunk = Math.max(1, Math.min(500, Math.floor(VALUES_PER_ADD / (width * phase.rowsPerJob))));
  for (let start = 0; start < phase.jobs; start += chunk) {
    const size = Math.min(chunk, phase.jobs - start);
    await Promise.all(
      Array.from({ length: size }, (_, j) => {
        const n = start + j;
        const request = benchRequest(manifest, phase.rowsPerJob, n * phase.rowsPerJob, submittedAt);
        return producer.enqueue(request, { priority: 'normal', jobId: `job_drain_${submittedAt}_${n}` });
      }),
    );
  }
}
