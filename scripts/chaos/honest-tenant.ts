/**
 * The honest tenant of scripts/chaos/hostile-tenant.ts: one phase of its load, the same in the
 * run without the attacker and in the run with it, so the two can be compared:
 * - a steady stream of async jobs with webhooks, `jobsPerS` for `phaseMs`, paced from the start
 *   (open loop: a slow API does not slow the stream down, it shows as latency);
 * - a bulk run over its input into an output of the phase's own, checked row by row once done;
 * - probes: the health route every 100 ms, a sync inference on the dynamic-axis model (the one
 *   the attacker tries to poison) every 500 ms, and one job event stream mid-phase (the
 *   attacker holds as many streams as it may).
 */
import { jobBody, pool, pushTo, type SubmitOutcome, statusKey, submitJobs } from './load.ts';
import { sleep } from './sleep.ts';
import { type ChaosStack, FEATURES } from './stack.ts';

export interface HonestPlan {
  model: string;
  /** The dynamic-axis model the sync probe scores on. */
  dynamic: string;
  jobsPerS: number;
  phaseMs: number;
  /** How long a health or sync probe waits for its answer before it counts as none. */
  answerWithinMs: number;
  webhookUrl: string;
  /** Index of the phase's first job (rows differ across phases: no result-cache hits). */
  from: number;
  bulk?: BulkPlan;
}

export interface BulkPlan {
  runId: string;
  /** Key prefixes in the chaos bucket. */
  input: string;
  output: string;
  chunkRows: number;
  /** The row ids of the input, each of which must land in the output exactly once. */
  ids: readonly string[];
}

export interface ProbeResult {
  ms: number[];
  /** By `status code` (load.ts statusKey). */
  answers: Record<string, number>;
}

export interface BulkOutcome {
  /** The answer to the run's creation. */
  answer: string;
  status: string;
  error?: string;
  rowsDone: number;
  /** Expected ids not in the output, ids in it more than once, ids in it never sent. */
  missing: number;
  duplicates: number;
  extra: number;
  ms: number;
}

export interface HonestPhase {
  /** The job stream's submissions (and the stream probe's job). */
  outcome: SubmitOutcome;
  health: ProbeResult;
  dynamic: ProbeResult;
  /** The event stream probe: its answer, and the terminal event it saw. */
  stream: string;
  bulk?: BulkOutcome;
}

const TICK_MS = 100;
const BULK_TIMEOUT_MS = 300_000;

export async function honestPhase(stack: ChaosStack, plan: HonestPlan): Promise<HonestPhase> {
  const stop = new AbortController();
  const health = probeLoop(100, stop.signal, () =>
    fetch(`${stack.api.url}/v2/health/live`, { signal: AbortSignal.timeout(plan.answerWithinMs) }),
  );
  let k = plan.from;
  // A new row each time: an answer from the result cache would not reach the worker.
  const dynamic = probeLoop(500, stop.signal, () =>
    stack.call(`/v2/models/${plan.dynamic}/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'seq', shape: [1, 3], datatype: 'FP32', data: [1, 2, k++] }] }),
      signal: AbortSignal.timeout(plan.answerWithinMs),
    }),
  );
  const bulk = plan.bulk ? bulkRun(stack, plan.model, plan.bulk) : undefined;
  const streamProbe = sleep(plan.phaseMs / 2).then(() => eventStream(stack, plan));
  const outcome = await steadyStream(stack, plan);
  const stream = await streamProbe;
  if (stream.jobId) outcome.accepted.push(stream.jobId);
  stop.abort();
  return { outcome, health: await health, dynamic: await dynamic, stream: stream.answer, bulk: await bulk };
}

/** Submits `jobsPerS` a tick at a time; each tick's batch is sent on time whether the last was answered or not. */
async function steadyStream(stack: ChaosStack, plan: HonestPlan): Promise<SubmitOutcome> {
  const perTick = Math.max(1, Math.round((plan.jobsPerS * TICK_MS) / 1000));
  const ticks = Math.round(plan.phaseMs / TICK_MS);
  const extra = { version: '1', webhook: { url: plan.webhookUrl } };
  const batches: Array<Promise<SubmitOutcome>> = [];
  const started = performance.now();
  for (let k = 0; k < ticks; k++) {
    batches.push(submitJobs(stack, { model: plan.model, count: perTick, concurrency: perTick, from: plan.from + k * perTick, extra }));
    await sleep(started + (k + 1) * TICK_MS - performance.now());
  }
  return mergeOutcomes(await Promise.all(batches));
}

export function mergeOutcomes(outcomes: SubmitOutcome[]): SubmitOutcome {
  const merged: SubmitOutcome = { accepted: [], rejected: {}, latencyMs: {} };
  for (const o of outcomes) {
    merged.accepted.push(...o.accepted);
    for (const [key, n] of Object.entries(o.rejected)) merged.rejected[key] = (merged.rejected[key] ?? 0) + n;
    for (const [key, ms] of Object.entries(o.latencyMs)) pushTo(merged.latencyMs, key, ms);
  }
  return merged;
}

async function probeLoop(everyMs: number, stop: AbortSignal, send: () => Promise<Response>): Promise<ProbeResult> {
  const result: ProbeResult = { ms: [], answers: {} };
  while (!stop.aborted) {
    const started = performance.now();
    let key: string;
    try {
      const res = await send();
      key = statusKey(res, await res.text());
    } catch (err) {
      key = `no answer (${err instanceof Error ? err.name : 'error'})`;
    }
    result.ms.push(performance.now() - started);
    result.answers[key] = (result.answers[key] ?? 0) + 1;
    await sleep(everyMs - (performance.now() - started), stop);
  }
  return result;
}

/** One job of the honest tenant, watched through its event stream to its end. */
async function eventStream(stack: ChaosStack, plan: HonestPlan): Promise<{ answer: string; jobId?: string }> {
  const body = jobBody(plan.from + 1_000_000, { version: '1', webhook: { url: plan.webhookUrl } });
  const res = await stack.call(`/v1/models/${plan.model}/jobs`, { method: 'POST', body });
  if (res.status !== 202) return { answer: `its job: ${statusKey(res, await res.text())}` };
  const { id } = (await res.json()) as { id: string };
  try {
    const events = await stack.call(`/v1/jobs/${id}/events`, { signal: AbortSignal.timeout(30_000) });
    if (!events.ok) return { answer: statusKey(events, await events.text()), jobId: id };
    // The stream ends after the job's terminal event.
    const text = await events.text();
    const terminal = /event: ?(succeeded|failed|canceled)/.exec(text)?.[1];
    return { answer: `${events.status}, ${terminal ? `${terminal} event` : 'no terminal event'}`, jobId: id };
  } catch (err) {
    return { answer: `no answer (${err instanceof Error ? err.name : 'error'})`, jobId: id };
  }
}

/** Writes `objects` JSONL objects of `rows` rows each under `prefix`; returns the row ids (each contains `marker`). */
export async function writeBulkInput(stack: ChaosStack, prefix: string, marker: string, objects: number, rows: number): Promise<string[]> {
  const ids: string[] = [];
  for (let o = 0; o < objects; o++) {
    const lines: string[] = [];
    for (let n = 0; n < rows; n++) {
      const id = `${marker}-${o}-${n}`;
      ids.push(id);
      const features = Array.from({ length: FEATURES }, (_, k) => Math.round(Math.cos(o * 31 + n * 7 + k) * 1e4) / 1e4);
      lines.push(JSON.stringify({ id, features }));
    }
    await stack.objects.put(`${prefix}part-${o}.jsonl`, `${lines.join('\n')}\n`);
  }
  return ids;
}

/** Starts the run, waits until it ends, and counts the ids in its output. */
async function bulkRun(stack: ChaosStack, model: string, plan: BulkPlan): Promise<BulkOutcome> {
  const started = performance.now();
  const s3 = (key: string) => `s3://${stack.config.s3.bucket}/${key}`;
  const request = { model, version: '1', input: s3(plan.input), output: s3(plan.output), chunkRows: plan.chunkRows, runId: plan.runId };
  const res = await stack.call('/v1/bulk-runs', { method: 'POST', body: JSON.stringify(request) });
  const answer = statusKey(res, await res.text());
  const outcome: BulkOutcome = { answer, status: 'not started', rowsDone: 0, missing: plan.ids.length, duplicates: 0, extra: 0, ms: 0 };
  if (!res.ok) return outcome;
  const deadline = Date.now() + BULK_TIMEOUT_MS;
  for (;;) {
    const view = (await (await stack.call(`/v1/bulk-runs/${plan.runId}`)).json()) as {
      status: string;
      progress?: { rowsDone: number };
      error?: { code: string; message: string };
    };
    outcome.status = view.status;
    outcome.rowsDone = view.progress?.rowsDone ?? 0;
    if (view.error) outcome.error = `${view.error.code}: ${view.error.message}`.slice(0, 200);
    if (view.status !== 'running' || Date.now() > deadline) break;
    await sleep(250);
  }
  outcome.ms = performance.now() - started;
  return { ...outcome, ...(await countIds(stack, plan)) };
}

/** How often each expected id appears in the run's output parts. */
async function countIds(stack: ChaosStack, plan: BulkPlan): Promise<Pick<BulkOutcome, 'missing' | 'duplicates' | 'extra'>> {
  const seen = new Map<string, number>();
  const parts = (await stack.objects.list(plan.output)).filter((o) => /\/part-\d+\.jsonl$/.test(o.key));
  await pool(parts.length, 8, async (i) => {
    const bytes = await stack.objects.getBytes((parts[i] as { key: string }).key);
    for (const line of Buffer.from(bytes ?? [])
      .toString('utf8')
      .split('\n')) {
      if (!line) continue;
      const id = String((JSON.parse(line) as { id: unknown }).id);
      seen.set(id, (seen.get(id) ?? 0) + 1);
    }
  });
  const expected = new Set(plan.ids);
  return {
    missing: plan.ids.filter((id) => !seen.has(id)).length,
    duplicates: [...seen.values()].filter((n) => n > 1).length,
    extra: [...seen.keys()].filter((id) => !expected.has(id)).length,
  };
}
