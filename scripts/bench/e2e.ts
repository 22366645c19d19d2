/**
 * End to end: single-row jobs submitted over HTTP to the real API (POST /v1/models/{m}/jobs),
 * served by one real worker process, until BullMQ records them completed.
 *
 *   max rate   closed-loop submits of `jobs` jobs; completed jobs / (last finished − first sent)
 *   latency    open-loop submits at 80% of that rate; per job, scheduled send → finishedOn
 *
 * The API runs as a child process by default, like the worker: in this process it would share
 * one event loop with the load generator, and on 2 cores the generator's CPU would be charged
 * to the API (docs/BENCHMARKS.md has both measured).
 */
import { startApiServer } from '../../api/main.ts';
import { queueName } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { leaseQueues } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { freePort } from '../dev/free-port.ts';
import { benchInputs } from './bench-models.ts';
import { closedLoopSubmit, openLoopSubmit, type SubmitTarget } from './load.ts';
import { forEachCompleted, resetFinished, waitFinished } from './queue-watch.ts';
import { BENCH_KEY, type BenchContext, scopedEnv, spawnRole, waitForHttp, waitForWorkers } from './services.ts';
import { type LatencyRunPlan, type LatencySummary, planLatencyRun, ratePerS, summarizeMs } from './stats.ts';

export type ApiMode = 'child' | 'in-process';

export interface E2eOptions {
  jobs: number;
  latencyDurationS: number;
  api: ApiMode;
  /** Closed-loop connections for the max-rate run. */
  connections?: number;
}

export interface E2eResult {
  maxJobsPerS: number;
  /** The API's accept rate during the max-rate run. */
  submitPerS: number;
  plan: LatencyRunPlan;
  /** Scheduled send → succeeded, per job. */
  latency: LatencySummary;
  /** Scheduled send → 202. */
  http: LatencySummary;
  rejected: number;
  failed: number;
  maxDispatchLagMs: number;
  /** Why the latency run has no figures, when it failed. */
  latencyError?: string;
}

export async function measureE2e(ctx: BenchContext, manifest: ModelManifest, options: E2eOptions): Promise<E2eResult> {
  const { env, config } = scopedEnv(ctx, `e2e-${options.api}`, { PORT: String(await freePort()) });
  const redis = createRedis(config.redisUrl);
  // A reader: it never rewrites the queue's settings (the events stream's maxLen).
  const queues = leaseQueues(redis, config.queuePrefix);
  const queue = queues.reader(queueName(manifest.name, manifest.version));
  const stops: Array<() => Promise<void>> = [];
  try {
    const url = await startApi(options.api, env, config, stops);
    const worker = spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env);
    stops.push(() => worker.stop());
    await waitForWorkers(redis, config, manifest.name, 'active');
    const target: SubmitTarget = {
      url,
      path: `/v1/models/${manifest.name}/jobs`,
      headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' },
      body: (i) => JSON.stringify({ inputs: benchInputs(manifest, 1, i) }),
    };
    // Warms the API, the worker and the connections (JIT, first queue and stream reads).
    await waitFinished(queue, await closedLoopSubmit(withSeed(target, 1_000_000), 300, 16).then((r) => r.ids.length));
    await resetFinished(queue);

    const closed = await closedLoopSubmit(withSeed(target, 2_000_000), options.jobs, options.connections ?? 32);
    const maxDone = await waitFinished(queue, closed.ids.length);
    const maxJobsPerS = ratePerS(maxDone.completed, closed.startedAt, maxDone.lastFinishedAt);
    await resetFinished(queue);
    ctx.out(
      `  e2e max: ${Math.round(maxJobsPerS)} jobs/s (API accepted ${Math.round(ratePerS(closed.ids.length, closed.startedAt, closed.endedAt))}/s)`,
    );

    const max = {
      maxJobsPerS,
      submitPerS: ratePerS(closed.ids.length, closed.startedAt, closed.endedAt),
      plan: planLatencyRun(maxJobsPerS, { durationS: options.latencyDurationS }),
    };
    try {
      const { plan } = max;
      const open = await openLoopSubmit(withSeed(target, 3_000_000), plan.ratePerS, plan.amount, plan.connections);
      const openDone = await waitFinished(queue, open.accepted.length);
      const finished = new Map<string, number>();
      await forEachCompleted(queue, (job) => {
        if (job.id && job.finishedOn) finished.set(job.id, job.finishedOn);
      });
      return {
        ...max,
        latency: summarizeMs(open.accepted.map((a) => (finished.get(a.id) ?? NaN) - a.scheduledAt)),
        http: open.http,
        rejected: closed.rejected + open.rejected,
        failed: maxDone.failed + openDone.failed,
        maxDispatchLagMs: open.maxDispatchLagMs,
      };
    } catch (err) {
      // The maximum stands on its own; the latency run's failure is reported beside it.
      const none = summarizeMs([]);
      const latencyError = errorMessage(err);
      return { ...max, latency: none, http: none, rejected: closed.rejected, failed: maxDone.failed, maxDispatchLagMs: NaN, latencyError };
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await queue.obliterate({ force: true }).catch(() => undefined);
    await queues.release();
    await closeRedis(redis);
  }
}

async function startApi(
  mode: ApiMode,
  env: NodeJS.ProcessEnv,
  config: ReturnType<typeof scopedEnv>['config'],
  stops: Array<() => Promise<void>>,
) {
  if (mode === 'in-process') {
    const server = await startApiServer(config, createLogger('warn', { role: 'bench-api' }));
    stops.push(() => server.close());
    return server.url;
  }
  const api = spawnRole(['api'], env);
  stops.push(() => api.stop());
  const url = `http://127.0.0.1:${config.api.port}`;
  await waitForHttp(`${url}/v2/health/ready`);
  return url;
}

function withSeed(target: SubmitTarget, offset: number): SubmitTarget {
  return { ...target, body: (i) => target.body(offset + i) };
}
