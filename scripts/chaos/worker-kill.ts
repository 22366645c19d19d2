/**
 * worker-kill: SIGKILL a random worker every few seconds (and start a replacement) while a run
 * of single-row jobs is submitted and drained. A killed worker's jobs are held under BullMQ
 * locks that nobody renews; when a lock expires the stalled check puts the job back (or, past
 * maxStalledCount, fails it with a reason). Invariant: every accepted job ends succeeded or
 * failed-with-reason, none missing, and the counts reconcile exactly.
 *
 * The first kill comes as soon as a worker holds an entry (it is that worker), the next every
 * `killEveryMs`: with coalescing a short run drains in a second or two, and a first kill timed
 * from the start could come after the last job, proving nothing.
 */
import type { ChildProcess } from 'node:child_process';
import { queueName } from '../../infra/contracts/job.ts';
import { openQueueProbes, type QueueProbe } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { reconcile, submitJobs, waitSettled } from './load.ts';
import { type ChaosContext, jobViolations, round, type ScenarioReport } from './report.ts';
import { sleep } from './sleep.ts';
import { type ChaosStack, startChaosStack } from './stack.ts';

export interface WorkerKillSizes {
  jobs: number;
  workers: number;
  killEveryMs: number;
}

export const WORKER_KILL_FULL: WorkerKillSizes = { jobs: 20_000, workers: 3, killEveryMs: 3_000 };
export const WORKER_KILL_SHORT: WorkerKillSizes = { jobs: 1_000, workers: 2, killEveryMs: 3_000 };

const MODEL = 'chaos-kill';

export async function workerKill(ctx: ChaosContext, sizes: WorkerKillSizes): Promise<ScenarioReport> {
  const stack = await startChaosStack({ dir: ctx.dir, log: ctx.log, redis: ctx.redis });
  try {
    await stack.deployModel(MODEL);
    for (let i = 0; i < sizes.workers; i++) stack.startWorker(MODEL);
    await stack.waitForWorkers(MODEL, 'active', sizes.workers);
    ctx.log(`worker-kill: ${sizes.workers} workers active; submitting ${sizes.jobs} jobs, one SIGKILL every ${sizes.killEveryMs} ms`);

    // Kills go on while jobs are submitted and while the backlog drains, until it has settled.
    const stopKills = new AbortController();
    const kills = killLoop(stack, sizes, stopKills.signal);
    const started = performance.now();
    const submitted = await submitJobs(stack, { model: MODEL, count: sizes.jobs, concurrency: 32 });
    const settled = await waitSettled(stack, MODEL, submitted.accepted);
    stopKills.abort();
    const killed = await kills;
    const elapsedS = (performance.now() - started) / 1000;
    const jobs = await reconcile(stack, MODEL, submitted.accepted);
    const violations = jobViolations(jobs);
    if (!settled) violations.push('the queue never settled');
    if (killed === 0) violations.push('no worker was killed: the run was too short to prove anything');
    const rejected = Object.values(submitted.rejected).reduce((a, b) => a + b, 0);
    if (rejected > 0) violations.push(`${rejected} submission(s) not accepted: ${JSON.stringify(submitted.rejected)}`);
    return {
      name: 'worker-kill',
      jobs,
      figures: { 'workers SIGKILLed': killed, 'jobs/s (submit → all terminal)': round(jobs.accepted / elapsedS) },
      violations,
    };
  } finally {
    await stack.close();
  }
}

/**
 * Kills a worker that holds an entry as soon as one does, then one every `killEveryMs` (the one
 * holding an entry then, else a random one), starting a replacement each time; returns the kill count.
 */
async function killLoop(stack: ChaosStack, sizes: WorkerKillSizes, stop: AbortSignal): Promise<number> {
  const redis = createRedis(stack.config.redisUrl);
  const probes = openQueueProbes(redis, stack.config.queuePrefix);
  const queue = probes.queue(queueName(MODEL, '1'));
  const holder = () => holdingWorker(stack, queue).catch(() => undefined);
  let killed = 0;
  try {
    let victim = await holder();
    while (!victim && !stop.aborted) {
      await sleep(20, stop);
      victim = await holder();
    }
    while (!stop.aborted) {
      const live = stack.liveWorkers();
      victim ??= live[Math.floor(Math.random() * live.length)];
      if (victim) {
        victim.kill('SIGKILL');
        killed++;
        stack.startWorker(MODEL);
      }
      await sleep(sizes.killEveryMs, stop);
      victim = await holder();
    }
  } finally {
    await probes.close();
    await closeRedis(redis);
  }
  return killed;
}

/**
 * The live worker process that holds an entry of the queue now (BullMQ's processedBy is the
 * worker's id, its heartbeat names its pid); undefined when none does.
 */
async function holdingWorker(stack: ChaosStack, queue: Pick<QueueProbe, 'holders'>): Promise<ChildProcess | undefined> {
  const [holder] = await queue.holders(1);
  if (!holder) return undefined;
  const beat = (await stack.heartbeats()).find((b) => b.id === holder);
  return stack.liveWorkers().find((w) => w.pid === beat?.pid);
}
