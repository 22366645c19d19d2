/**
 * BullMQ alone on the same Redis: a Queue adding the same single-row job data in bulk while a
 * Worker with a no-op processor and the warmpool worker's concurrency takes them. Its jobs/s is
 * the ceiling for the end-to-end rate: nothing built on BullMQ's per-job cost goes faster.
 * Producer and consumer share this process, as the raw limit is measured with the least machinery.
 */
import { Queue, Worker } from 'bullmq';
import { EVENTS_STREAM_MAX_LEN, type JobData } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { benchJobData } from './bench-models.ts';
import { type BenchContext, scopedEnv, withTimeout } from './services.ts';
import { ratePerS } from './stats.ts';

export interface RawBullmqResult {
  jobsPerS: number;
  /** Jobs/s the producer added at (it runs concurrently with the worker). */
  addPerS: number;
  concurrency: number;
}

export async function rawBullmqRate(
  ctx: BenchContext,
  manifest: ModelManifest,
  options: { jobs: number; concurrency: number; chunk?: number },
): Promise<RawBullmqResult> {
  const { config } = scopedEnv(ctx, 'raw-bullmq');
  const chunk = options.chunk ?? 100;
  const connection = createRedis(config.redisUrl);
  const workerConnection = createRedis(config.redisUrl);
  const name = 'raw-noop';
  const queue = new Queue<JobData>(name, {
    connection,
    prefix: config.queuePrefix,
    streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } },
  });
  let done = 0;
  let lastFinished = 0;
  let resolveDone = () => {};
  const allDone = new Promise<void>((resolve) => {
    resolveDone = resolve;
  });
  const worker = new Worker<JobData>(name, async () => undefined, {
    connection: workerConnection,
    prefix: config.queuePrefix,
    concurrency: options.concurrency,
    autorun: false,
  });
  worker.on('completed', () => {
    lastFinished = Date.now();
    if (++done >= options.jobs) resolveDone();
  });
  worker.on('error', () => undefined);
  try {
    await worker.waitUntilReady();
    void worker.run();
    const started = Date.now();
    for (let i = 0; i < options.jobs; i += chunk) {
      const size = Math.min(chunk, options.jobs - i);
      await queue.addBulk(Array.from({ length: size }, (_, j) => ({ name: 'noop', data: benchJobData(manifest, 1, i + j, Date.now()) })));
    }
    const added = Date.now();
    await withTimeout(allDone, 120_000, 'raw BullMQ run');
    return {
      jobsPerS: ratePerS(options.jobs, started, lastFinished),
      addPerS: ratePerS(options.jobs, started, added),
      concurrency: options.concurrency,
    };
  } finally {
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queue.close();
    await closeRedis(workerConnection);
    await closeRedis(connection);
  }
}
