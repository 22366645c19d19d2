/**
 * webhook-down: jobs whose webhooks go to a receiver that is down (connection refused) or slow
 * (answers after several seconds), beside the same jobs without webhooks. Deliveries run in the
 * dispatcher (api/webhooks), apart from the workers, so inference must not notice: the figure
 * is jobs/s with webhooks over jobs/s without, measured side by side in one run. Then the
 * receiver recovers and every webhook must arrive: retried later, none lost.
 */

import { startDispatcher } from '../../api/dispatcher/main.ts';
import { DELIVERY_STATES } from '../../api/webhooks/delivery-store.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { webhookIndexKey } from '../../infra/redis/keys.ts';
import { reconcile, type SubmitOutcome, submitJobs, waitSettled } from './load.ts';
import { type Receiver, startReceiver, waitForDeliveries } from './receiver.ts';
import { type ChaosContext, jobViolations, round, type ScenarioReport } from './report.ts';
import { type ChaosStack, startChaosStack } from './stack.ts';

export interface WebhookDownSizes {
  /** Jobs per phase (without webhooks ×2, receiver down, receiver slow). */
  jobs: number;
  workers: number;
  /** The slow receiver's delay before answering. */
  slowMs: number;
}

export const WEBHOOK_DOWN_FULL: WebhookDownSizes = { jobs: 3_000, workers: 2, slowMs: 5_000 };
export const WEBHOOK_DOWN_SHORT: WebhookDownSizes = { jobs: 200, workers: 1, slowMs: 3_000 };

const MODEL = 'chaos-hooks';

export async function webhookDown(ctx: ChaosContext, sizes: WebhookDownSizes): Promise<ScenarioReport> {
  const receiver = await startReceiver({ listening: false });
  const stack = await startChaosStack({
    dir: ctx.dir,
    log: ctx.log,
    redis: ctx.redis,
    // Retries every few seconds, so the scenario sees them happen (the default spreads over a day).
    env: { WEBHOOK_ALLOWED_PRIVATE_HOSTS: 'localhost', WEBHOOK_RETRY_SCHEDULE_MS: '1000,2000,4000,4000,4000,4000,4000,4000' },
  });
  const dispatcher = startDispatcher(stack.config, createLogger('silent'));
  try {
    await stack.deployModel(MODEL);
    for (let i = 0; i < sizes.workers; i++) stack.startWorker(MODEL);
    await stack.waitForWorkers(MODEL, 'active', sizes.workers);
    const hook = { webhook: { url: receiver.url } };
    const phases = new Phases(stack, sizes.jobs);
    // Unmeasured: the first jobs pay for connections, JIT and the workers' first batches.
    await phases.run({});
    ctx.log('webhook-down: baseline (no webhooks)');
    const base1 = await phases.run({});
    ctx.log('webhook-down: receiver down (connection refused)');
    const down = await phases.run(hook);
    ctx.log(`webhook-down: receiver slow (answers after ${sizes.slowMs} ms)`);
    receiver.delayMs = sizes.slowMs;
    await receiver.start();
    const slow = await phases.run(hook);
    ctx.log('webhook-down: baseline again');
    const base2 = await phases.run({});
    receiver.delayMs = 0;
    const hooked = [...down.outcome.accepted, ...slow.outcome.accepted];
    const undelivered = await waitForDeliveries(receiver, hooked);
    const states = await deliveryStates(stack);
    const all = phases.accepted();
    const jobs = await reconcile(stack, MODEL, all);
    return report({ jobs, phases: { base1, down, slow, base2 }, undelivered, receiver, settled: phases.settled, states });
  } finally {
    await dispatcher.close().catch(() => undefined);
    await stack.close();
    await receiver.stop();
  }
}

interface PhaseResult {
  outcome: SubmitOutcome;
  jobsPerS: number;
}

/** Runs phases one after another, each timed from its first submission to its last job's end. */
class Phases {
  private done = 0;
  private readonly all: string[] = [];
  settled = true;

  constructor(
    private readonly stack: ChaosStack,
    private readonly jobs: number,
  ) {}

  async run(extra: Record<string, unknown>): Promise<PhaseResult> {
    const started = performance.now();
    const outcome = await submitJobs(this.stack, { model: MODEL, count: this.jobs, concurrency: 16, from: this.done, extra });
    this.done += this.jobs;
    this.all.push(...outcome.accepted);
    this.settled &&= await waitSettled(this.stack, MODEL, this.all, 30_000);
    return { outcome, jobsPerS: outcome.accepted.length / ((performance.now() - started) / 1000) };
  }

  accepted(): string[] {
    return this.all;
  }
}

/** The dispatcher's own count of deliveries per state (api/webhooks/delivery-store.ts keys). */
async function deliveryStates(stack: ChaosStack): Promise<string> {
  const redis = createRedis(stack.config.redisUrl);
  try {
    const index = (state: string) => webhookIndexKey(stack.config.queuePrefix, 'chaos', state);
    const counts = await Promise.all(DELIVERY_STATES.map(async (s) => `${s} ${await redis.zcard(index(s))}`));
    return counts.join(', ');
  } finally {
    await closeRedis(redis);
  }
}

function report(r: {
  jobs: Awaited<ReturnType<typeof reconcile>>;
  phases: Record<'base1' | 'down' | 'slow' | 'base2', PhaseResult>;
  undelivered: number;
  receiver: Receiver;
  settled: boolean;
  states: string;
}): ScenarioReport {
  const { base1, down, slow, base2 } = r.phases;
  const baseline = (base1.jobsPerS + base2.jobsPerS) / 2;
  const violations = jobViolations(r.jobs);
  if (!r.settled) violations.push('a phase never settled');
  if (r.undelivered > 0) violations.push(`${r.undelivered} webhook(s) never delivered after the receiver recovered`);
  for (const [name, p] of Object.entries(r.phases)) {
    const rejected = Object.entries(p.outcome.rejected);
    if (rejected.length > 0) violations.push(`${name}: submissions not accepted: ${JSON.stringify(p.outcome.rejected)}`);
  }
  return {
    name: 'webhook-down',
    jobs: r.jobs,
    figures: {
      'jobs/s without webhooks (before / after)': `${round(base1.jobsPerS)} / ${round(base2.jobsPerS)}`,
      'jobs/s, receiver down': round(down.jobsPerS),
      'jobs/s, receiver slow': round(slow.jobsPerS),
      'ratio down / without': round(down.jobsPerS / baseline, 2),
      'ratio slow / without': round(slow.jobsPerS / baseline, 2),
      'webhooks delivered (distinct jobs)': r.receiver.delivered.size,
      'deliveries answered (repeats included)': r.receiver.answered,
      'webhooks never delivered': r.undelivered,
      'deliveries by state (dispatcher store)': r.states,
    },
    violations,
  };
}
