/**
 * s3-outage: the model registry (S3) is unreachable while a worker starts, so its download
 * fails; the server comes back on the same port and folder after a while.
 *
 * Invariants: the worker neither exits nor reports `failed` during the outage — it stays
 * `downloading` and its heartbeat says it is retrying (worker/start-backoff.ts); once S3 is
 * back it loads, warms up, becomes active and serves every job submitted before and during
 * the outage. The API keeps answering meanwhile: 202 while it still knows the model's manifest,
 * else a 503, never another 5xx.
 */
import { reconcile, type SubmitOutcome, submitJobs, waitSettled } from './load.ts';
import { type ChaosContext, jobViolations, type ScenarioReport } from './report.ts';
import { sleep } from './sleep.ts';
import { type ChaosStack, startChaosStack } from './stack.ts';

export interface S3OutageSizes {
  /** How long S3 stays down after the worker reports `downloading`. */
  downMs: number;
  /** Jobs submitted before the outage, during it, and after recovery (each). */
  jobs: number;
}

export const S3_OUTAGE_FULL: S3OutageSizes = { downMs: 15_000, jobs: 500 };
export const S3_OUTAGE_SHORT: S3OutageSizes = { downMs: 4_000, jobs: 50 };

const MODEL = 'chaos-s3';

export async function s3Outage(ctx: ChaosContext, sizes: S3OutageSizes): Promise<ScenarioReport> {
  const stack = await startChaosStack({ dir: ctx.dir, log: ctx.log, redis: ctx.redis });
  try {
    await stack.deployModel(MODEL);
    const before = await submitJobs(stack, { model: MODEL, count: sizes.jobs, concurrency: 8 });
    await stack.s3.stop();
    ctx.log(`s3-outage: S3 stopped; starting a worker, S3 back in ${sizes.downMs} ms`);
    const worker = stack.startWorker(MODEL);
    let exitedWith: string | undefined;
    worker.once('exit', (code, signal) => (exitedWith = signal ?? `exit code ${code}`));
    const during = submitJobs(stack, { model: MODEL, count: sizes.jobs, concurrency: 2, from: sizes.jobs });
    // A route that reads the registry itself (no cache in between) while it is down.
    const listing = await stack.call('/v1/models');
    const listingAnswer = `${listing.status} ${await listing.text().then((t) => t.slice(0, 80))}`;
    // The outage is timed from the worker's first heartbeat: its process start is not the point.
    await stack.waitForWorkers(MODEL, 'downloading', 1, 60_000);
    const seen = await watchWorker(stack, sizes.downMs);
    const duringOutcome = await during;
    await stack.s3.start();
    const restartedAt = Date.now();
    ctx.log('s3-outage: S3 back');
    const active = await stack.waitForWorkers(MODEL, 'active', 1, 120_000).then(
      () => true,
      () => false,
    );
    const recoveryMs = Date.now() - restartedAt;
    const after = await submitJobs(stack, { model: MODEL, count: sizes.jobs, concurrency: 8, from: 2 * sizes.jobs });
    const accepted = [before, duringOutcome, after].flatMap((o) => o.accepted);
    const settled = await waitSettled(stack, MODEL, accepted, 30_000);
    const jobs = await reconcile(stack, MODEL, accepted);
    const violations = jobViolations(jobs);
    if (!settled) violations.push('the queue never settled');
    if (exitedWith) violations.push(`the worker exited (${exitedWith})`);
    if (seen.states.has('failed')) violations.push('the worker reported failed during the outage');
    if (!seen.states.has('downloading')) violations.push('the worker never reported downloading');
    if (seen.retryReports === 0) violations.push('no heartbeat reported a download retry');
    if (!active) violations.push('the worker did not become active after S3 returned');
    violations.push(...serverErrors([before, duringOutcome, after]));
    if (listing.status >= 500 && listing.status !== 503) violations.push(`GET /v1/models answered ${listingAnswer} while S3 was down`);
    return {
      name: 's3-outage',
      jobs,
      figures: {
        'states during outage': [...seen.states].join(', '),
        'heartbeats reporting a retry': seen.retryReports,
        'last retry report': seen.lastError ?? '(none)',
        'recovery ms (S3 back → worker active)': recoveryMs,
        'GET /v1/models while S3 down': listingAnswer,
        'submissions during outage': Object.entries(duringOutcome.latencyMs)
          .map(([status, ms]) => `${status}: ${ms.length}`)
          .join(', '),
      },
      violations,
    };
  } finally {
    await stack.close();
  }
}

/** Watches the model's worker heartbeats for `ms`: the states seen and the retries reported. */
async function watchWorker(stack: ChaosStack, ms: number) {
  const states = new Set<string>();
  let retryReports = 0;
  let lastError: string | undefined;
  const until = Date.now() + ms;
  while (Date.now() < until) {
    for (const beat of (await stack.heartbeats()).filter((b) => b.model === MODEL)) {
      states.add(beat.state);
      if (beat.state === 'downloading' && beat.error) {
        retryReports++;
        lastError = beat.error.slice(0, 160);
      }
    }
    await sleep(250);
  }
  return { states, retryReports, lastError };
}

/** Any 5xx other than 503 `unavailable`, or a request that got no answer. */
function serverErrors(outcomes: SubmitOutcome[]): string[] {
  const bad: Record<string, number> = {};
  for (const o of outcomes) {
    for (const [status, n] of Object.entries(o.rejected)) {
      if (status !== '503 unavailable') bad[status] = (bad[status] ?? 0) + n;
    }
  }
  return Object.entries(bad).map(([status, n]) => `${n} submission(s) answered ${status}`);
}
