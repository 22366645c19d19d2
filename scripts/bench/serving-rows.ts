/**
 * The rows measured end to end, over HTTP, per model:
 *
 *   e2e_vs_minimal_stack        completed single-row requests/s, closed loop, warmpool (API + one
 *                               worker) ÷ the minimal stack (minimal-stack.ts), best of `maxRuns` each
 *   cpu_ms_per_request_<proc>   CPU of warmpool's API, worker and Redis over that run ÷ its requests
 *   e2e_latency_p50/p95/p99_ms  submit → succeeded, open loop at 80% of warmpool's maximum
 *   serving_efficiency          the highest open-loop rate whose p99 ≤ 100 ms (serving-search.ts)
 *                               ÷ raw ONNX Runtime's best rows/s at the worker's thread count
 *   serving_efficiency_binary   the same with the requests as OIP binary tensor data
 *   binary_vs_json              the max rate with the requests as OIP binary tensor data ÷ as JSON
 *   grpc_vs_http                sync inferences/s over OIP gRPC ÷ over HTTP, binary tensors both
 *   edge_added_p50/p99_ms, …    the edge gateway under workerd in front of the same API (edge-hop.ts)
 */
import os from 'node:os';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { rowWidth } from './bench-models.ts';
import { type ApiMode, type MaxRate, measureMaxRate, measureOpenLoop, SEEDS, type StackUnderTest, warmUp } from './e2e.ts';
import { benchEdgeHop } from './edge-hop.ts';
import { closedLoopGrpc } from './grpc-load.ts';
import { climbLadder, type LadderRung, ladderRows } from './latency-ladder.ts';
import { closedLoopInfer, type SubmitTarget, type SyncLoopResult } from './load.ts';
import { startMinimalStack } from './minimal-stack.ts';
import { startCpuMeter } from './proc-cpu.ts';
import { bestCellAt, type RawSweep } from './raw-ort.ts';
import { type BenchRow, regime } from './report.ts';
import type { BenchContext } from './services.ts';
import { describeTrials, searchServingRate } from './serving-search.ts';
import { boundedCount, maxBy, planLatencyRun, ratePerS } from './stats.ts';
import { inferTarget, submitTarget, withSeed } from './submit-target.ts';
import { type BenchSizes, failedRows, type ModelRun } from './suite.ts';
import { startWarmpoolStack, type WarmpoolStack } from './warmpool-stack.ts';

/** serving_efficiency's p99 bound: MLPerf Server sets one per model; issue 15 sets 100 ms for single-row requests. */
export const SERVING_P99_BOUND_MS = 100;

const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');
const f2 = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');

export async function benchServing(
  ctx: BenchContext,
  manifest: ModelManifest,
  run: ModelRun,
  sizes: BenchSizes,
  api: ApiMode,
): Promise<BenchRow[]> {
  const m = manifest.name;
  ctx.out(`[${m}: end to end]`);
  const amount = boundedCount(sizes.e2eJobs, {
    valuesPerItem: manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0),
    maxValues: sizes.maxValues,
    ratePerS: run.raw?.best.rowsPerS ?? NaN,
    seconds: sizes.budgetS,
    min: 200,
  });
  const rows: BenchRow[] = [];
  let minimal: MaxRate | undefined;
  let minimalLadder: LadderRung[] | undefined;
  let minimalError = '';
  const ladder = { ...sizes.ladder, durationS: sizes.latencyDurationS };
  try {
    const minimalStack = await startMinimalStack(ctx, manifest, run.concurrency);
    try {
      minimal = await bestMaxRate(ctx, minimalStack, amount, sizes, false);
      minimalLadder = await climbLadder(minimalStack, ladder, minimal.requestsPerS, ctx.out);
    } finally {
      await minimalStack.stop();
    }
  } catch (err) {
    minimalError = errorMessage(err).split('\n')[0] ?? '';
  }
  let stack: WarmpoolStack | undefined;
  try {
    stack = await startWarmpoolStack(ctx, manifest, api);
    const max = await bestMaxRate(ctx, stack, amount, sizes, false);
    rows.push(minimalRow(m, max, minimal, minimalError, api, run.raw), ...cpuRows(m, max, minimal));
    rows.push(...ladderRows(m, await climbLadder(stack, ladder, max.requestsPerS, ctx.out), minimalLadder));
    rows.push(...(await latencyRows(ctx, m, stack, max, sizes)));
    rows.push(await servingRow(ctx, m, stack, max, run.raw, sizes));
    const binary = await binaryVsJsonRow(ctx, manifest, stack, max, amount, sizes);
    rows.push(binary.row);
    if (binary.target && binary.max) {
      rows.push(await servingRow(ctx, m, { ...stack, target: binary.target }, binary.max, run.raw, sizes, 'binary'));
    }
    rows.push(await grpcVsHttpRow(ctx, manifest, stack, amount, sizes));
    rows.push(...(await benchEdgeHop(ctx, manifest, stack, { ...sizes.edge, requests: Math.min(sizes.edge.requests, amount) })));
  } catch (err) {
    rows.push(...failedRows(m, ['e2e_vs_minimal_stack', 'light_load_p99_ms', 'e2e_latency_p99_ms', 'serving_efficiency'], err));
  } finally {
    await stack?.stop();
  }
  return rows;
}

/**
 * The best of `maxRuns` closed-loop runs after a warm-up; stops the stack after unless told not
 * to. `seeds` keep each series' rows apart from every other's (a repeated row is a cache hit).
 */
async function bestMaxRate(
  ctx: BenchContext,
  stack: StackUnderTest,
  amount: number,
  sizes: BenchSizes,
  stop = true,
  seeds: { warmUp: number; max: number } = { warmUp: SEEDS.warmUp, max: SEEDS.max },
): Promise<MaxRate> {
  try {
    await warmUp(stack, Math.min(amount, sizes.warmUpRequests), seeds.warmUp);
    const runs: MaxRate[] = [];
    for (let i = 0; i < sizes.maxRuns; i++) {
      runs.push(await measureMaxRate(stack, { amount, connections: 32, seed: seeds.max + i * amount }));
      const r = runs.at(-1) as MaxRate;
      ctx.out(
        `  ${stack.label} max: ${f0(r.requestsPerS)} requests/s (${f2(r.requestsPerJob)} per queue job; CPU ms per request ${describeCpu(r)})`,
      );
    }
    return maxBy(runs, (r) => (Number.isFinite(r.requestsPerS) ? r.requestsPerS : -1)) as MaxRate;
  } finally {
    if (stop) await stack.stop();
  }
}

function describeCpu(r: MaxRate): string {
  return Object.entries(r.cpuMsPerRequest)
    .map(([name, ms]) => `${name} ${Number.isFinite(ms) ? ms.toFixed(3) : 'n/a'}`)
    .join(', ');
}

function minimalRow(
  m: string,
  max: MaxRate,
  minimal: MaxRate | undefined,
  error: string,
  api: ApiMode,
  raw: RawSweep | undefined,
): BenchRow {
  const trouble = max.rejected + max.failed > 0 ? `; ${max.rejected} rejected, ${max.failed} failed` : '';
  const rawPerS = raw?.best.rowsPerS ?? NaN;
  const minimalPerS = minimal?.requestsPerS ?? NaN;
  return {
    name: `${m}.e2e_vs_minimal_stack`,
    value: max.requestsPerS / minimalPerS,
    unit: 'ratio',
    detail:
      `${f0(max.requestsPerS)} vs ${minimal ? f0(minimal.requestsPerS) : `n/a (${error})`} completed requests/s, closed loop, 32 connections ` +
      `(API ${api} + 1 worker vs hono + BullMQ add + no-op Worker); ${f2(max.requestsPerJob)} requests per queue entry` +
      `, ${f2(1 / max.requestsPerJob)} entries_per_request${trouble}; raw ORT best ${f0(rawPerS)} rows/s = ` +
      `${f2(rawPerS / minimalPerS)} × the minimal stack: ${regime(rawPerS, minimalPerS)}`,
  };
}

function cpuRows(m: string, max: MaxRate, minimal: MaxRate | undefined): BenchRow[] {
  return ['api', 'worker', 'redis'].map((proc) => ({
    name: `${m}.cpu_ms_per_request_${proc}`,
    value: max.cpuMsPerRequest[proc] ?? NaN,
    unit: 'ms',
    detail:
      `/proc utime+stime over the max-rate run ÷ ${f0(max.completed)} requests` +
      `; minimal stack ${Number.isFinite(minimal?.cpuMsPerRequest[proc] ?? NaN) ? (minimal?.cpuMsPerRequest[proc] ?? NaN).toFixed(3) : 'n/a'}`,
  }));
}

async function latencyRows(ctx: BenchContext, m: string, stack: StackUnderTest, max: MaxRate, sizes: BenchSizes): Promise<BenchRow[]> {
  const at = `at ${f0(max.requestsPerS * 0.8)} requests/s (80% of max), open loop`;
  try {
    const plan = planLatencyRun(max.requestsPerS, { durationS: sizes.latencyDurationS });
    const run = await measureOpenLoop(stack, { ...plan, amount: Math.max(200, plan.amount), seed: SEEDS.latency });
    ctx.out(`  latency ${at}: p50 ${f0(run.latency.p50)} p99 ${f0(run.latency.p99)} ms`);
    return (['p50', 'p95', 'p99'] as const).map((p) => ({
      name: `${m}.e2e_latency_${p}_ms`,
      value: run.latency[p],
      unit: 'ms',
      detail: `submit → succeeded ${at}, ${run.latency.count} requests; HTTP 202 ${p} ${run.http[p].toFixed(1)} ms${run.failed + run.rejected > 0 ? `; ${run.rejected} rejected, ${run.failed} failed` : ''}`,
    }));
  } catch (err) {
    return failedRows(m, ['e2e_latency_p99_ms'], `${at}: ${errorMessage(err)}`);
  }
}

/**
 * `binary_vs_json`: the max-rate run again with the same single-row requests sent as OIP binary
 * tensor data instead of JSON numbers (other rows, the same shapes), on the same stack: what the
 * API's JSON parse and validation of the elements cost end to end.
 */
async function binaryVsJsonRow(
  ctx: BenchContext,
  manifest: ModelManifest,
  stack: StackUnderTest,
  json: MaxRate,
  amount: number,
  sizes: BenchSizes,
): Promise<{ row: BenchRow; target?: SubmitTarget; max?: MaxRate }> {
  const m = manifest.name;
  try {
    const target = submitTarget(stack.target.url, manifest, { authorization: stack.target.headers.authorization ?? '' }, 'binary');
    const binary = await bestMaxRate(ctx, { ...stack, label: 'warmpool binary', target }, amount, sizes, false, {
      warmUp: SEEDS.binaryWarmUp,
      max: SEEDS.binary,
    });
    const bytes = (form: 'json' | 'binary') => Buffer.byteLength((form === 'json' ? stack.target : target).body(SEEDS.max));
    const row: BenchRow = {
      name: `${m}.binary_vs_json`,
      value: binary.requestsPerS / json.requestsPerS,
      unit: 'ratio',
      detail:
        `${f0(binary.requestsPerS)} vs ${f0(json.requestsPerS)} completed single-row requests/s (rows/s), closed loop, 32 connections, ` +
        `POST /v1/models/${m}/jobs with binary tensor data vs JSON numbers (${f0(bytes('binary'))} vs ${f0(bytes('json'))} body bytes); ` +
        `API CPU ms per request ${f2(binary.cpuMsPerRequest.api ?? NaN)} vs ${f2(json.cpuMsPerRequest.api ?? NaN)}`,
    };
    return { row, target, max: binary };
  } catch (err) {
    return { row: failedRows(m, ['binary_vs_json'], err)[0] as BenchRow };
  }
}

/**
 * `grpc_vs_http`: sync inference, binary tensors both ways, 32 calls in flight closed loop: the
 * OIP gRPC service's ModelInfer (raw_input_contents) against HTTP's POST /v2/models/{m}/infer,
 * the same rows' bytes, runs interleaved, best of `maxRuns` each. A call is done when answered.
 */
async function grpcVsHttpRow(
  ctx: BenchContext,
  manifest: ModelManifest,
  stack: WarmpoolStack,
  amount: number,
  sizes: BenchSizes,
): Promise<BenchRow> {
  const m = manifest.name;
  try {
    const key = (stack.target.headers.authorization ?? '').replace(/^Bearer /, '');
    const http = inferTarget(submitTarget(stack.target.url, manifest, { authorization: `Bearer ${key}` }, 'binary'), manifest);
    const grpc = { url: stack.grpcUrl, key, manifest };
    const warm = Math.min(amount, sizes.warmUpRequests);
    await closedLoopInfer(withSeed(http, SEEDS.syncWarmUp), warm, 16);
    await closedLoopGrpc(grpc, warm, 16, SEEDS.syncWarmUp + warm);
    const best = { http: 0, grpc: 0 };
    const apiMs = { http: [] as number[], grpc: [] as number[] };
    let failed = 0;
    const rate = (r: SyncLoopResult) => ratePerS(r.completed, r.startedAt, r.endedAt);
    /** One run, and the API process's CPU ms per answered call over it (the load generator's own CPU is not in it). */
    const measured = async (run: () => Promise<SyncLoopResult>) => {
      const meter = startCpuMeter({ api: stack.pids.api });
      const r = await run();
      return { r, apiMs: (meter.stop().api ?? NaN) / r.completed };
    };
    for (let i = 0; i < sizes.maxRuns; i++) {
      const h = await measured(() => closedLoopInfer(withSeed(http, SEEDS.http + i * amount), amount, 32));
      const g = await measured(() => closedLoopGrpc(grpc, amount, 32, SEEDS.grpc + i * amount));
      failed += h.r.failed + g.r.failed;
      ctx.out(`  sync: HTTP ${f0(rate(h.r))}, gRPC ${f0(rate(g.r))} requests/s (API CPU ms per call ${f2(h.apiMs)}, ${f2(g.apiMs)})`);
      best.http = Math.max(best.http, rate(h.r));
      best.grpc = Math.max(best.grpc, rate(g.r));
      apiMs.http.push(h.apiMs);
      apiMs.grpc.push(g.apiMs);
    }
    await stack.watch.reset();
    return {
      name: `${m}.grpc_vs_http`,
      value: best.grpc / best.http,
      unit: 'ratio',
      detail:
        `${f0(best.grpc)} vs ${f0(best.http)} single-row sync inferences/s (rows/s), closed loop, 32 in flight: gRPC ModelInfer with ` +
        `raw_input_contents vs HTTP POST /v2/models/${m}/infer with binary tensor data, the same rows; API CPU ms per call ` +
        `${f2(Math.min(...apiMs.grpc))} vs ${f2(Math.min(...apiMs.http))} (the load generators differ: grpc-js's client vs autocannon, on the same cores)` +
        `${failed > 0 ? `; ${failed} failed` : ''}`,
    };
  } catch (err) {
    return failedRows(m, ['grpc_vs_http'], err)[0] as BenchRow;
  }
}

async function servingRow(
  ctx: BenchContext,
  m: string,
  stack: WarmpoolStack,
  max: MaxRate,
  raw: RawSweep | undefined,
  sizes: BenchSizes,
  form: 'json' | 'binary' = 'json',
): Promise<BenchRow> {
  const { workerThreads } = stack;
  const cell = raw ? bestCellAt(raw, workerThreads || os.availableParallelism()) : undefined;
  const measurement = form === 'json' ? 'serving_efficiency' : 'serving_efficiency_binary';
  try {
    const search = await searchServingRate(stack, max.requestsPerS, {
      steps: sizes.searchSteps,
      durationS: sizes.searchDurationS,
      p99BoundMs: SERVING_P99_BOUND_MS,
      seed: form === 'json' ? SEEDS.search : SEEDS.searchBinary,
    });
    ctx.out(
      `  serving (${form}): ${f0(search.ratePerS)} requests/s with p99 ≤ ${SERVING_P99_BOUND_MS} ms (${describeTrials(search.trials)})`,
    );
    return {
      name: `${m}.${measurement}`,
      value: search.ratePerS / (cell?.rowsPerS ?? NaN),
      unit: 'ratio',
      detail:
        `${f0(search.ratePerS)} single-row requests/s (${form === 'json' ? 'JSON' : 'binary tensor data'}) open loop with p99 ≤ ${SERVING_P99_BOUND_MS} ms (runs: ${describeTrials(search.trials)}) ` +
        `vs raw ORT ${f0(cell?.rowsPerS ?? NaN)} rows/s (batch ${cell?.batch} × ${cell?.threads} thread(s), the worker's ${workerThreads || 'n/a'})`,
    };
  } catch (err) {
    return failedRows(m, [measurement], err)[0] as BenchRow;
  }
}
