/**
 * Load and bookkeeping shared by the scenarios: submit jobs through the HTTP API and remember
 * exactly which ones were accepted (202), wait until every accepted request is terminal and the
 * queue has nothing left to do, and reconcile: every accepted id read back through
 * GET /v1/jobs/{id}, every request BullMQ's queue entries carried accounted for. Requests are
 * counted, never BullMQ jobs: one queue entry carries many (infra/contracts/entry.ts). The counts
 * it returns are the suite's invariants.
 */
import { describeMissing } from './missing.ts';
import { countReasons, type JobCounts } from './report.ts';
import { openRequestLedger } from './request-ledger.ts';
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
  /** Told of each 202 as it arrives: when the API acknowledged that request. */
  onAccepted?: (id: string) => void;
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
    if (status.id !== undefined) {
      outcome.accepted.push(status.id);
      options.onAccepted?.(status.id);
    } else outcome.rejected[status.status] = (outcome.rejected[status.status] ?? 0) + 1;
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

/**
 * Waits until every accepted request is terminal and the model's queue has nothing left to do
 * (no job waiting, delayed or running), or until `idleTimeoutMs` passes without a request
 * finishing. Returns whether it settled. Requests are counted, not BullMQ jobs: a request is
 * terminal once the entry carrying it is finished (request-ledger.ts). The few no finished entry
 * carries once the queue is idle — ended outside BullMQ (canceled or expired before a worker
 * took them, a result-cache hit) or routed to another version — are read through
 * GET /v1/jobs/{id}, so an accepted request settles only when the API shows it terminal.
 */
export async function waitSettled(stack: ChaosStack, model: string, accepted: readonly string[], idleTimeoutMs = 60_000): Promise<boolean> {
  const ledger = openRequestLedger(stack.config.redisUrl, stack.config.queuePrefix, model);
  const left = new Set(accepted);
  let progress = -1;
  let progressAt = Date.now();
  let readAt = 0;
  try {
    for (;;) {
      const open = await ledger.poll().then(
        () => ledger.open(),
        () => -1,
      );
      for (const id of left) if (ledger.finished.has(id)) left.delete(id);
      if (open === 0 && left.size > 0 && Date.now() - readAt >= 1_000) {
        readAt = Date.now();
        await readTerminal(stack, left);
      }
      if (open === 0 && left.size === 0) return true;
      const done = ledger.jobs + accepted.length - left.size;
      if (done !== progress) [progress, progressAt] = [done, Date.now()];
      else if (Date.now() - progressAt > idleTimeoutMs) return false;
      await new Promise((r) => setTimeout(r, 250));
    }
  } finally {
    await ledger.close();
  }
}

/** Reads `ids` through the API and deletes from it those the API shows terminal. */
async function readTerminal(stack: ChaosStack, ids: Set<string>): Promise<void> {
  const list = [...ids];
  await pool(list.length, 32, async (n) => {
    const id = list[n] as string;
    const job = await readJob(stack, id).catch(() => null);
    if (job && isTerminal(job)) ids.delete(id);
  });
}

function isTerminal(job: JobRead): boolean {
  return job.status === 'succeeded' || job.status === 'failed';
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
 * Reads every accepted id back through the API and counts what it finds; then reads which
 * requests the model's queue finished (request-ledger.ts), so a request BullMQ carried that no
 * client was told about (`extraInQueue`) shows too. A missing request is described as it stands
 * in Redis (missing.ts). `onRead` sees each terminal job as read (its times, for latency figures).
 */
export async function reconcile(
  stack: ChaosStack,
  model: string,
  accepted: string[],
  onRead?: (id: string, job: JobRead) => void,
): Promise<JobCounts> {
  const unique = new Set(accepted);
  const reads: JobRead[] = [];
  const missing: Array<{ id: string; read: string }> = [];
  let badOutputs = 0;
  const ids = [...unique];
  await pool(ids.length, 32, async (n) => {
    const id = ids[n] as string;
    const job = await readJob(stack, id);
    if (job === null || !isTerminal(job)) {
      missing.push({ id, read: job === null ? '404' : job.status });
      return;
    }
    if (job.status === 'succeeded' && job.outputs?.[0]?.data?.length !== 1) badOutputs++;
    reads.push(job);
    onRead?.(id, job);
  });
  const succeeded = reads.filter((r) => r.status === 'succeeded').length;
  const failedReads = reads.filter((r) => r.status === 'failed');
  const ledger = openRequestLedger(stack.config.redisUrl, stack.config.queuePrefix, model);
  const counts: JobCounts = {
    accepted: accepted.length,
    succeeded,
    failed: failedReads.length,
    failedByReason: countReasons(failedReads.map((r) => r.error?.code ?? 'no_reason')),
    missing: missing.length,
    duplicates: accepted.length - unique.size,
    badOutputs,
    extraInQueue: 0,
    queueEntries: 0,
  };
  try {
    await ledger.poll();
    counts.extraInQueue = [...ledger.finished].filter((id) => !unique.has(id)).length;
    counts.queueEntries = ledger.jobs;
  } finally {
    await ledger.close();
  }
  if (missing.length > 0) counts.missingFirst = await describeMissing(stack, model, missing.slice(0, 5));
  return counts;
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
