/**
 * Load and bookkeeping shared by the scenarios: submit jobs through the HTTP API and remember
 * exactly which ones were accepted (202), wait until the queue has nothing left to do, and
 * reconcile: every accepted id read back through GET /v1/jobs/{id}, every job BullMQ holds
 * accounted for. The counts it returns are the suite's invariants.
 */
import { queueName } from '../../infra/contracts/job.ts';
import { countJobs, type JobCountState, leaseQueues } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { countReasons, type JobCounts } from './report.ts';
import { type ChaosStack, FEATURES } from './stack.ts';

export interface SubmitOutcome {
  /** Ids the API answered 202 for, in submission order. */
  accepted: string[];
  /** Answers other than 202, by status ('timeout' / 'network' when there was none). */
  rejected: Record<string, number>;
  /** Milliseconds each answer took, by status. */
  latencyMs: Record<string, number[]>;
}

export interface SubmitOptions {
  model: string;
  count: number;
  concurrency: number;
  /** Offset of the first job's index, so several batches never send the same rows. */
  from?: number;
  /** Extra body fields (a webhook). */
  extra?: Record<string, unknown>;
  /** Client-side bound on one request. */
  timeoutMs?: number;
  /** Stop submitting when this says so (the rest are not sent). */
  stop?: () => boolean;
}

/** A body whose rows are a fixed function of `i`, distinct per job (no result-cache hits). */
export function jobBody(i: number, extra: Record<string, unknown> = {}): string {
  const data = Array.from({ length: FEATURES }, (_, k) => Math.round(Math.sin(i * 12.9898 + k * 78.233) * 1e6) / 1e6);
  return JSON.stringify({ inputs: [{ name: 'features', shape: [1, FEATURES], datatype: 'FP32', data }], cache: false, ...extra });
}

export async function submitJobs(stack: ChaosStack, options: SubmitOptions): Promise<SubmitOutcome> {
  const outcome: SubmitOutcome = { accepted: [], rejected: {}, latencyMs: {} };
  const from = options.from ?? 0;
  await pool(options.count, options.concurrency, async (n) => {
    if (options.stop?.()) return;
    const started = performance.now();
    const status = await submitOne(stack, options, from + n).then(
      (r) => r,
      (err: unknown) => ({ status: err instanceof Error && err.name === 'TimeoutError' ? 'timeout' : 'network', id: undefined }),
    );
    pushTo(outcome.latencyMs, status.status, [performance.now() - started]);
    if (status.id !== undefined) outcome.accepted.push(status.id);
    else outcome.rejected[status.status] = (outcome.rejected[status.status] ?? 0) + 1;
  });
  return outcome;
}

async function submitOne(stack: ChaosStack, options: SubmitOptions, i: number): Promise<{ status: string; id?: string }> {
  const res = await stack.call(`/v1/models/${options.model}/jobs`, {
    method: 'POST',
    body: jobBody(i, options.extra),
    signal: AbortSignal.timeout(options.timeoutMs ?? 30_000),
  });
  const text = await res.text();
  if (res.status === 202) return { status: '202', id: (JSON.parse(text) as { id: string }).id };
  return { status: answerKey(res, text) };
}

/** `503 unavailable`: the status and the error code, so an answer without one shows. */
export function answerKey(res: Response, text: string): string {
  let code = '(no error code)';
  try {
    code = (JSON.parse(text) as { error?: { code?: string } }).error?.code ?? code;
  } catch {
    code = '(not JSON)';
  }
  const retryAfter = res.status === 503 && !res.headers.has('retry-after') ? ' (no Retry-After)' : '';
  return `${res.status} ${code}${retryAfter}`;
}

/** answerKey, but a 2xx is its bare status (`200`): a success has no error code to show. */
export function statusKey(res: Response, text: string): string {
  return res.ok ? String(res.status) : answerKey(res, text);
}

/** Appends `values` to `record[key]`, creating the list. */
export function pushTo(record: Record<string, number[]>, key: string, values: number[]): void {
  const list = record[key] ?? [];
  list.push(...values);
  record[key] = list;
}

/** Runs `task(0..count-1)` with at most `concurrency` at once. */
export async function pool(count: number, concurrency: number, task: (n: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(concurrency, count) }, async () => {
    while (next < count) await task(next++);
  });
  await Promise.all(lanes);
}

/** Counts jobs by state in the model's queue. */
type CountJobs = <S extends JobCountState>(...states: S[]) => Promise<Record<S, number>>;

/** BullMQ's own counts of the model's queue (a reader: it never rewrites the queue's settings), for `fn`. */
export async function withJobCounts<T>(stack: ChaosStack, model: string, fn: (count: CountJobs) => Promise<T>): Promise<T> {
  const connection = createRedis(stack.config.redisUrl);
  const queues = leaseQueues(connection, stack.config.queuePrefix);
  try {
    return await fn((...states) => countJobs(queues, queueName(model, '1'), ...states));
  } finally {
    await queues.release();
    await closeRedis(connection);
  }
}

/**
 * Waits until nothing is waiting, delayed or running and at least `expected` jobs are finished,
 * or until `idleTimeoutMs` passes without any job finishing. Returns whether it settled.
 */
export async function waitSettled(stack: ChaosStack, model: string, expected: number, idleTimeoutMs = 60_000): Promise<boolean> {
  return withJobCounts(stack, model, async (count) => {
    let lastDone = -1;
    let lastProgressAt = Date.now();
    for (;;) {
      const c = await count('waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed');
      const open = c.waiting + c.prioritized + c.delayed + c.active;
      const done = c.completed + c.failed;
      if (open === 0 && done >= expected) return true;
      if (done !== lastDone) {
        lastDone = done;
        lastProgressAt = Date.now();
      } else if (Date.now() - lastProgressAt > idleTimeoutMs) {
        return false;
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  });
}

/** GET /v1/jobs/{id} as reconcile reads it (ISO times, api/resources/job-resource.ts). */
export interface JobRead {
  status: string;
  error?: { code?: string; message?: string };
  outputs?: Array<{ data?: unknown[] }>;
  createdAt?: string;
  finishedAt?: string;
}

/**
 * Reads every accepted id back through the API and counts what it finds; then counts what
 * BullMQ holds, so a job the queue has but no client was told about (`extra`) shows too.
 * `onRead` sees each terminal job as read (its times, for latency figures).
 */
export async function reconcile(
  stack: ChaosStack,
  model: string,
  accepted: string[],
  onRead?: (id: string, job: JobRead) => void,
): Promise<JobCounts> {
  const unique = new Set(accepted);
  const reads: JobRead[] = [];
  let missing = 0;
  let badOutputs = 0;
  const ids = [...unique];
  await pool(ids.length, 32, async (n) => {
    const id = ids[n] as string;
    const job = await readJob(stack, id);
    if (job === null || (job.status !== 'succeeded' && job.status !== 'failed')) {
      missing++;
      return;
    }
    if (job.status === 'succeeded' && job.outputs?.[0]?.data?.length !== 1) badOutputs++;
    reads.push(job);
    onRead?.(id, job);
  });
  const succeeded = reads.filter((r) => r.status === 'succeeded').length;
  const failedReads = reads.filter((r) => r.status === 'failed');
  const inQueue = await withJobCounts(stack, model, (count) => count('completed', 'failed'));
  const total = inQueue.completed + inQueue.failed;
  return {
    accepted: accepted.length,
    succeeded,
    failed: failedReads.length,
    failedByReason: countReasons(failedReads.map((r) => r.error?.code ?? 'no_reason')),
    missing,
    duplicates: accepted.length - unique.size,
    badOutputs,
    extraInQueue: Math.max(0, total - unique.size + missing),
  };
}

/**
 * GET /v1/jobs/{id}, retried a few times on a 5xx or a network error; null on 404. A 429 (a
 * scenario run with the API's rate limits on) waits its Retry-After and is not an attempt.
 */
async function readJob(stack: ChaosStack, id: string): Promise<JobRead | null> {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await stack.call(`/v1/jobs/${id}`, { signal: AbortSignal.timeout(30_000) });
      if (res.status === 404) return null;
      if (res.ok) return (await res.json()) as JobRead;
      await res.body?.cancel();
      if (res.status === 429) {
        await new Promise((r) => setTimeout(r, retryAfterMs(res)));
        attempt--;
        continue;
      }
    } catch (err) {
      if (attempt >= 4) throw err;
    }
    if (attempt >= 4) return { status: 'unreadable' };
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** A 429's Retry-After in ms (1 s when absent), plus a little jitter so waiting readers do not return at once. */
export function retryAfterMs(res: Response): number {
  return (Number(res.headers.get('retry-after')) || 1) * 1000 + Math.random() * 250;
}
