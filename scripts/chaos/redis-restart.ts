/**
 * redis-restart: Redis with an append-only file is stopped mid-run — once with SIGTERM (a clean
 * shutdown: the AOF is flushed and fsynced) and once with SIGKILL (no shutdown at all) — and
 * started again on the same port and folder, while submissions keep coming. On a Redis Cluster
 * (`--redis cluster`) every node is stopped each time, and then the queue's own shard alone is
 * SIGKILLed and restarted.
 *
 * Invariants: every job that got a 202 survives and ends terminal; while Redis is down every
 * submission is answered 503 `unavailable` (with Retry-After) within the client's timeout,
 * never hangs; the API, the workers and the webhook dispatcher reconnect by themselves (the
 * same worker processes serve after the restart, and every job's webhook is delivered).
 *
 * Durability: a 202 means Redis replied to the entry's writes, which is durable across a SIGKILL
 * only as far as Redis's appendfsync makes it. With `everysec` Redis write(2)s the AOF before it
 * replies, except while its background fsync of the last second is still running: then it
 * postpones the write (up to 2 s) and replies anyway, and a SIGKILL in that window loses writes it
 * acknowledged (measured here: 1 SIGKILL in 80 lost 247 acknowledged SETs under a write-heavy
 * load; none in 40 with `always`). The short run (CI) uses `always`, so "no accepted job
 * missing" is exact; the full run uses `everysec`, as deployed, and counts the missing jobs
 * acknowledged in the window before a SIGKILL apart, so such a loss reads as what it is.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startDispatcher } from '../../api/dispatcher/main.ts';
import { createDeliveryStore } from '../../api/webhooks/delivery-store.ts';
import { deliveryLeaseMs } from '../../api/webhooks/dispatcher.ts';
import { deliveryId } from '../../api/webhooks/event-source.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { queueKey } from '../../infra/redis/keys.ts';
import { pushTo, reconcile, type SubmitOptions, type SubmitOutcome, submitJobs, waitSettled } from './load.ts';
import { startReceiver, waitForDeliveries } from './receiver.ts';
import { type ChaosContext, jobViolations, percentile, round, type ScenarioReport } from './report.ts';
import { sleep } from './sleep.ts';
import { type ChaosStack, startChaosStack } from './stack.ts';

export interface RedisRestartSizes {
  /** Submissions while Redis is up, before, between and after the outages. */
  jobsPerPhase: number;
  /** How long each outage lasts. */
  downMs: number;
  workers: number;
  appendfsync: 'always' | 'everysec';
  /**
   * The faults to inject, by name (default: every one the topology has). `npm test`'s cluster run
   * takes the queue shard's alone: every-node stops are the single-node run's too.
   */
  faults?: FaultName[];
}

export type FaultName = 'SIGTERM' | 'SIGKILL' | 'SIGKILL queue shard';

export const REDIS_RESTART_FULL: RedisRestartSizes = { jobsPerPhase: 2_000, downMs: 8_000, workers: 2, appendfsync: 'everysec' };
export const REDIS_RESTART_SHORT: RedisRestartSizes = { jobsPerPhase: 200, downMs: 3_000, workers: 1, appendfsync: 'always' };

/** How long before a SIGKILL an `everysec` Redis may have acknowledged writes it had not written (2 s, counted in whole seconds). */
const EVERYSEC_WINDOW_MS = 3_000;

const MODEL = 'chaos-redis';
/** What a submission must get while Redis is down (load.ts answerKey). */
const UNAVAILABLE = '503 unavailable';
/** A request unanswered this long is a hang. */
const CLIENT_TIMEOUT_MS = 10_000;

export async function redisRestart(ctx: ChaosContext, sizes: RedisRestartSizes): Promise<ScenarioReport> {
  const receiver = await startReceiver();
  const stack = await startChaosStack({
    dir: ctx.dir,
    log: ctx.log,
    redis: ctx.redis,
    appendonly: true,
    appendfsync: sizes.appendfsync,
    env: { WEBHOOK_ALLOWED_PRIVATE_HOSTS: 'localhost', WEBHOOK_RETRY_SCHEDULE_MS: '500,1000,2000,4000,8000,8000,8000' },
  });
  const dispatcher = startDispatcher(stack.config, createLogger('silent'));
  try {
    await stack.deployModel(MODEL);
    for (let i = 0; i < sizes.workers; i++) stack.startWorker(MODEL);
    await stack.waitForWorkers(MODEL, 'active', sizes.workers);
    const pids = stack.liveWorkers().map((w) => w.pid);
    const webhook = { webhook: { url: receiver.url } };
    const ackedAt = new Map<string, number>();
    const onAccepted = (id: string) => ackedAt.set(id, Date.now());
    const load = steadyLoad(stack, webhook, onAccepted);
    const outages: Outage[] = [];
    await load.until(sizes.jobsPerPhase);
    const chosen = (await faults(stack)).filter((f) => sizes.faults === undefined || sizes.faults.includes(f.name));
    if (chosen.length === 0) throw new Error(`redis-restart: none of the faults ${sizes.faults?.join(', ')} applies to this topology`);
    for (const fault of chosen) {
      ctx.log(`redis-restart: ${fault.label}, down for ${sizes.downMs} ms`);
      outages.push(await outage(stack, fault, sizes.downMs, load, { extra: webhook, onAccepted }));
      await load.until(load.sent() + sizes.jobsPerPhase);
    }
    const submitted = await load.stop();
    const settled = await waitSettled(stack, MODEL, submitted.accepted);
    if (!settled) {
      // Each worker logs where it and its Redis connections stand (worker/main.ts), into the kept folder's logs.
      for (const w of stack.liveWorkers()) w.kill('SIGUSR2');
      await sleep(1_000);
    }
    const terminal = new Set<string>();
    const jobs = await reconcile(stack, MODEL, submitted.accepted, (id) => terminal.add(id));
    const missingIds = [...new Set(submitted.accepted)].filter((id) => !terminal.has(id));
    // A claim applied as Redis went away (its reply lost) is retried once its lease ends: late, not lost.
    const webhooksMissing = await waitForDeliveries(receiver, submitted.accepted, deliveryLeaseMs(stack.config.webhooks) + 15_000);
    const undelivered =
      webhooksMissing > 0
        ? await describeUndelivered(
            stack,
            submitted.accepted.filter((id) => !receiver.delivered.has(id)),
          )
        : '';
    const sameWorkers = stack.liveWorkers().map((w) => w.pid);
    const intakesReplaced = countInLogs(path.join(ctx.dir, 'logs'), 'intake stalled');
    return report(sizes, {
      jobs,
      settled,
      outages,
      submitted,
      webhooksMissing,
      undelivered,
      intakesReplaced,
      workersRestarted: pids.filter((p) => !sameWorkers.includes(p)).length,
      missingBeforeKill: missingIds.filter((id) => ackedBeforeKill(ackedAt.get(id), outages)).length,
    });
  } finally {
    await dispatcher.close().catch(() => undefined);
    await stack.close();
    await receiver.stop();
  }
}

/** A way to take Redis down and bring it back; `name` labels its figures. */
interface Fault {
  name: FaultName;
  label: string;
  stop(): Promise<void>;
  start(): Promise<void>;
}

/**
 * SIGTERM then SIGKILL to every Redis node. On a cluster also SIGKILL to the one master that
 * holds the model's queue: the other shards keep serving their slots until the cluster marks
 * itself down (cluster-node-timeout, 5 s here), and the queue's jobs must survive on that
 * node's AOF.
 */
async function faults(stack: ChaosStack): Promise<Fault[]> {
  const all = (['SIGTERM', 'SIGKILL'] as const).map((signal) => ({
    name: signal,
    label: `${signal} to every redis-server`,
    stop: () => stack.redis.stop(signal),
    start: () => stack.redis.start(),
  }));
  const cluster = stack.redis.cluster;
  if (!cluster) return all;
  const shard = await cluster.nodeOfKey(queueKey(stack.config.queuePrefix, queueName(MODEL, '1'), 'wait'));
  return [
    ...all,
    {
      name: 'SIGKILL queue shard',
      label: `SIGKILL to the master holding the queue (node ${shard} of ${cluster.nodes.length})`,
      stop: () => cluster.stopNode(shard, 'SIGKILL'),
      start: () => cluster.startNode(shard),
    },
  ];
}

interface Outage {
  signal: string;
  /** Epoch ms the fault was injected. */
  stoppedAt: number;
  /** Answers to requests sent while Redis was down: status → latencies (ms). */
  answers: Record<string, number[]>;
  /** From the restart until a submission is accepted again. */
  recoveryMs: number;
}

/** Takes Redis down by `fault`, probes the API while it is down, starts it again on the same port and folder. */
async function outage(
  stack: ChaosStack,
  fault: Fault,
  downMs: number,
  load: SteadyLoad,
  submit: Pick<SubmitOptions, 'extra' | 'onAccepted'>,
): Promise<Outage> {
  const stoppedAt = Date.now();
  await fault.stop();
  const downSince = Date.now();
  const answers: Record<string, number[]> = {};
  // Submissions sent only while down: a probe pool that stops at the restart.
  let up = false;
  const probe = submitJobs(stack, {
    model: MODEL,
    count: 1_000_000,
    concurrency: 4,
    from: 50_000_000 + downSince,
    timeoutMs: CLIENT_TIMEOUT_MS,
    ...submit,
    stop: () => up || Date.now() - downSince > downMs,
  });
  await sleep(downMs);
  const probed = await probe;
  up = true;
  for (const [status, ms] of Object.entries(probed.latencyMs)) pushTo(answers, status, ms);
  load.absorb(probed);
  await fault.start();
  const restartedAt = Date.now();
  const before = load.acceptedCount();
  while (load.acceptedCount() === before && Date.now() - restartedAt < 60_000) await sleep(50);
  return { signal: fault.name, stoppedAt, answers, recoveryMs: Date.now() - restartedAt };
}

interface SteadyLoad {
  /** Resolves once `n` submissions have been sent. */
  until(n: number): Promise<void>;
  sent(): number;
  acceptedCount(): number;
  /** Counts a probe's 202s with the rest (a probe's requests race the restart). */
  absorb(outcome: SubmitOutcome): void;
  stop(): Promise<SubmitOutcome>;
}

/** Submissions at a steady pace through the whole scenario, each with a webhook. */
function steadyLoad(stack: ChaosStack, extra: Record<string, unknown>, onAccepted: (id: string) => void): SteadyLoad {
  const total: SubmitOutcome = { accepted: [], rejected: {}, latencyMs: {} };
  let stopped = false;
  let sent = 0;
  const running = (async () => {
    for (let round = 0; !stopped; round++) {
      const out = await submitJobs(stack, {
        model: MODEL,
        count: 20,
        concurrency: 4,
        from: round * 20,
        timeoutMs: CLIENT_TIMEOUT_MS,
        extra,
        onAccepted,
      });
      sent += 20;
      merge(total, out);
      // A pause while Redis is down: the outage's own probe measures the API then.
      if (out.accepted.length === 0) await sleep(100);
    }
  })();
  return {
    async until(n) {
      while (sent < n) await sleep(20);
    },
    sent: () => sent,
    acceptedCount: () => total.accepted.length,
    absorb: (outcome) => merge(total, { ...outcome, latencyMs: {} }),
    async stop() {
      stopped = true;
      await running;
      return total;
    },
  };
}

function merge(into: SubmitOutcome, from: SubmitOutcome): void {
  into.accepted.push(...from.accepted);
  for (const [k, n] of Object.entries(from.rejected)) into.rejected[k] = (into.rejected[k] ?? 0) + n;
  for (const [k, ms] of Object.entries(from.latencyMs)) pushTo(into.latencyMs, k, ms);
}

function report(
  sizes: RedisRestartSizes,
  r: {
    jobs: Awaited<ReturnType<typeof reconcile>>;
    settled: boolean;
    outages: Outage[];
    submitted: SubmitOutcome;
    webhooksMissing: number;
    undelivered: string;
    intakesReplaced: number;
    workersRestarted: number;
    missingBeforeKill: number;
  },
): ScenarioReport {
  const violations = jobViolations(r.jobs);
  if (!r.settled) violations.push('the queue never settled after the restarts');
  if (r.jobs.accepted === 0) violations.push('no submission was accepted: the run proves nothing');
  const figures: Record<string, number | string> = { appendfsync: sizes.appendfsync };
  figures['answers other than 202 (outages included)'] = JSON.stringify(r.submitted.rejected);
  for (const o of r.outages) {
    const all = Object.values(o.answers).flat();
    const non503 = Object.entries(o.answers).filter(([s]) => s !== UNAVAILABLE && s !== '202');
    figures[`${o.signal}: requests while down`] = all.length;
    figures[`${o.signal}: 503 unavailable answers`] = o.answers[UNAVAILABLE]?.length ?? 0;
    figures[`${o.signal}: 503 answer ms p50/p99/max`] = latencies(o.answers[UNAVAILABLE] ?? []);
    figures[`${o.signal}: recovery ms (restart → first 202)`] = o.recoveryMs;
    if (all.length === 0) violations.push(`${o.signal}: no request was answered while Redis was down`);
    for (const [status, ms] of non503) violations.push(`${o.signal}: ${ms.length} request(s) answered ${status} while Redis was down`);
  }
  figures['workers restarted'] = r.workersRestarted;
  figures['stalled intakes replaced (worker watchdog)'] = r.intakesReplaced;
  if (r.jobs.missing > 0) figures[`missing, acknowledged ≤ ${EVERYSEC_WINDOW_MS / 1000} s before a SIGKILL`] = r.missingBeforeKill;
  figures['webhooks not delivered'] = r.webhooksMissing;
  if (r.undelivered) figures['undelivered, first few'] = r.undelivered;
  if (r.workersRestarted > 0) violations.push(`${r.workersRestarted} worker process(es) exited`);
  if (r.webhooksMissing > 0) violations.push(`${r.webhooksMissing} webhook(s) never delivered: the dispatcher did not recover`);
  return { name: 'redis-restart', jobs: r.jobs, figures, violations };
}

/** Lines containing `text` over every worker's log (the stack writes one file per worker). */
function countInLogs(dir: string, text: string): number {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir).reduce((n, file) => n + readFileSync(path.join(dir, file), 'utf8').split(text).length - 1, 0);
}

/** What the delivery store holds for the first few jobs whose webhook never arrived: where the chain broke. */
async function describeUndelivered(stack: ChaosStack, jobIds: string[]): Promise<string> {
  const redis = createRedis(stack.redis.url);
  try {
    const store = createDeliveryStore(redis, stack.config.queuePrefix);
    const parts: string[] = [];
    for (const jobId of jobIds.slice(0, 5)) {
      const delivery = await store.get(deliveryId(jobId, 'job.succeeded'));
      const due = delivery?.nextAttemptAt == null ? '' : `, due in ${Math.round((delivery.nextAttemptAt - Date.now()) / 1000)} s`;
      const what = delivery
        ? `${delivery.state}${delivery.reason ? ` (${delivery.reason})` : ''}, ${delivery.attempts.length} attempt(s)${due}`
        : 'no delivery record';
      parts.push(`${jobId}: ${what}`);
    }
    return parts.join('; ');
  } finally {
    await closeRedis(redis);
  }
}

/** Whether a 202 at `at` came in the window before a SIGKILL in which an `everysec` Redis may lose what it acknowledged. */
function ackedBeforeKill(at: number | undefined, outages: readonly Outage[]): boolean {
  if (at === undefined) return false;
  return outages.some((o) => o.signal.includes('SIGKILL') && at <= o.stoppedAt && at > o.stoppedAt - EVERYSEC_WINDOW_MS);
}

function latencies(ms: number[]): string {
  return [50, 99, 100].map((p) => round(percentile(ms, p))).join(' / ');
}
