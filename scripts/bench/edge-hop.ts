/**
 * The edge → region hop (issue 32): what the edge gateway (api/edge/, bundled and run under a
 * real workerd by scripts/commands/edge.ts) adds in front of the regional API, measured on the
 * same warm stack in the same run. Two request paths, each sent straight to the API and through
 * workerd:
 *
 *   infer     POST /v2/models/{m}/infer with one JSON row: the edge checks the key, takes from
 *             the tenant's rate-limit Durable Object, parses and checks the body against the
 *             region's catalog, forwards it and relays the answer
 *   job read  GET /v1/jobs/{id} of one finished job: the key and the limiter, then a plain
 *             forward; no worker on the path, so the hop is most of what there is
 *
 * Closed loop at each of a few concurrencies, in rounds of direct, edge, then edge, direct
 * (ABBA), so a slow stretch of the shared machine falls on both sides alike; each side's samples
 * are pooled over its rounds. Rows, per model (`<prefix>` is `edge` for infer, `edge_job_read`):
 *
 *   <prefix>_added_p50_ms / _p99_ms   at 1 in flight: the edge's percentile − the direct one
 *   <prefix>_vs_direct_rps            at the most in flight: requests/s through the edge ÷ direct
 *
 * Both sides share this machine's cores: workerd's CPU is taken from the API and the worker it
 * calls, so the req/s ratio is lower than with the edge on a host of its own. The details give
 * the ratios of the percentiles and workerd's CPU ms per request.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import path from 'node:path';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { type RunningEdge, startEdge } from '../commands/edge.ts';
import { freePort } from '../dev/free-port.ts';
import { SEEDS } from './e2e.ts';
import type { SubmitTarget } from './load.ts';
import { startCpuMeter } from './proc-cpu.ts';
import type { BenchRow } from './report.ts';
import { BENCH_KEY, BENCH_TENANT, type BenchContext } from './services.ts';
import { summarizeMs } from './stats.ts';
import { inferTarget, withSeed } from './submit-target.ts';
import { type TimedLoopResult, type TimedRequest, timedClosedLoop } from './timed-loop.ts';
import type { WarmpoolStack } from './warmpool-stack.ts';

export type Side = 'direct' | 'edge';

export interface HopPlan {
  /** Requests in flight, one measurement each; latency rows take the first, rate rows the last. */
  concurrencies: number[];
  /** ABBA rounds per concurrency (each round runs both sides once). */
  rounds: number;
  /** Requests per side per round. */
  requests: number;
  /** Untimed requests per side before the first round. */
  warmUp: number;
}

export interface SideFigures {
  p50: number;
  p99: number;
  requestsPerS: number;
  completed: number;
  failed: number;
}

export interface HopFigures {
  concurrency: number;
  direct: SideFigures;
  edge: SideFigures;
  /** workerd's CPU over the edge's runs ÷ the requests it answered (NaN off Linux). */
  edgeCpuMsPerRequest: number;
}

/** A path under test: request `i` of a run at `offset` to the base URL of either side. */
export interface HopPath {
  name: 'infer' | 'job_read';
  /** How a row's detail names the request. */
  describe: string;
  request: (base: string, offset: number) => TimedRequest;
}

/** The edge's limits out of the way: the bench measures the hop, not the limiter's refusals. */
const EDGE_VARS = { RATE_LIMIT_RPS: '1000000', RATE_LIMIT_BURST: '1000000' };

/** Round r's order: ABBA, so neither side always runs first (warmer caches) or last (a busier machine). */
export function roundOrder(round: number): Side[] {
  return round % 2 === 0 ? ['direct', 'edge'] : ['edge', 'direct'];
}

/** One side's runs pooled: percentiles over every sample, requests/s over the summed run time. */
export function sideFigures(runs: readonly TimedLoopResult[]): SideFigures {
  const latency = summarizeMs(runs.flatMap((r) => r.latenciesMs));
  const completed = runs.reduce((n, r) => n + r.completed, 0);
  const ms = runs.reduce((n, r) => n + r.elapsedMs, 0);
  return {
    p50: latency.p50,
    p99: latency.p99,
    requestsPerS: ms > 0 ? (completed * 1000) / ms : NaN,
    completed,
    failed: runs.reduce((n, r) => n + r.failed, 0),
  };
}

/** The path at each concurrency, both sides in ABBA rounds; `edgePid` is workerd's, for its CPU. */
export async function measureHop(
  bases: Record<Side, string>,
  hop: HopPath,
  plan: HopPlan,
  edgePid: number | undefined,
): Promise<HopFigures[]> {
  let offset = 0;
  const run = (side: Side, amount: number, connections: number) => {
    const request = hop.request(bases[side], offset);
    offset += amount;
    return timedClosedLoop(request, amount, connections);
  };
  const warmConnections = plan.concurrencies.at(-1) ?? 1;
  for (const side of ['direct', 'edge'] as const) await run(side, plan.warmUp, warmConnections);
  const figures: HopFigures[] = [];
  for (const concurrency of plan.concurrencies) {
    const runs: Record<Side, TimedLoopResult[]> = { direct: [], edge: [] };
    let edgeCpuMs = 0;
    for (let round = 0; round < plan.rounds; round++) {
      for (const side of roundOrder(round)) {
        const meter = side === 'edge' ? startCpuMeter({ edge: edgePid }) : undefined;
        runs[side].push(await run(side, plan.requests, concurrency));
        edgeCpuMs += meter?.stop().edge ?? 0;
      }
    }
    const edge = sideFigures(runs.edge);
    figures.push({ concurrency, direct: sideFigures(runs.direct), edge, edgeCpuMsPerRequest: edgeCpuMs / edge.completed });
  }
  return figures;
}

const ms = (v: number) => (Number.isFinite(v) ? v.toFixed(2) : 'n/a');
const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');
const signed = (v: number) => (Number.isFinite(v) ? `${v < 0 ? '−' : '+'}${Math.abs(v).toFixed(2)}` : 'n/a');
const x2 = (v: number) => (Number.isFinite(v) ? `×${v.toFixed(2)}` : '×n/a');

/** The rows of one path's figures (see the header); NaN where a concurrency is missing. */
export function hopRows(m: string, hop: Pick<HopPath, 'name' | 'describe'>, figures: readonly HopFigures[], plan: HopPlan): BenchRow[] {
  const prefix = `${m}.${hop.name === 'infer' ? 'edge' : 'edge_job_read'}`;
  const low = figures[0];
  const high = figures.at(-1);
  const failed = figures.reduce((n, f) => n + f.direct.failed + f.edge.failed, 0);
  const trouble = failed > 0 ? `; ${failed} requests FAILED` : '';
  const sample = `${plan.requests} requests a side × ${plan.rounds} ABBA rounds`;
  const others = figures
    .slice(1)
    .map((f) => `at ${f.concurrency} in flight p50 ${signed(f.edge.p50 - f.direct.p50)} p99 ${signed(f.edge.p99 - f.direct.p99)} ms`)
    .join('; ');
  const added = (p: 'p50' | 'p99'): BenchRow => ({
    name: `${prefix}_added_${p}_ms`,
    value: low ? low.edge[p] - low.direct[p] : NaN,
    unit: 'ms',
    detail:
      `${hop.describe}, ${low?.concurrency ?? 1} in flight: edge ${p} ${ms(low?.edge[p] ?? NaN)} vs direct ${ms(low?.direct[p] ?? NaN)} ms ` +
      `(${x2((low?.edge[p] ?? NaN) / (low?.direct[p] ?? NaN))}), ${sample}${others ? `; ${others}` : ''}${trouble}`,
  });
  const rates = figures.map((f) => `${f.concurrency}: ${f0(f.edge.requestsPerS)} vs ${f0(f.direct.requestsPerS)}`).join(', ');
  return [
    added('p50'),
    added('p99'),
    {
      name: `${prefix}_vs_direct_rps`,
      value: high ? high.edge.requestsPerS / high.direct.requestsPerS : NaN,
      unit: 'ratio',
      detail:
        `${hop.describe}, closed loop, requests/s edge vs direct by requests in flight (${rates}); workerd CPU ms per request ` +
        `${ms(high?.edgeCpuMsPerRequest ?? NaN)} at ${high?.concurrency ?? 'n/a'} in flight, on the same cores as the API and worker${trouble}`,
    },
  ];
}

const ROW_NAMES = ['edge_added_p50_ms', 'edge_added_p99_ms', 'edge_vs_direct_rps'];

/**
 * The hop's rows for `manifest` on a running warmpool stack: starts workerd in front of its API,
 * measures both paths, and stops workerd whatever happened.
 */
export async function benchEdgeHop(ctx: BenchContext, manifest: ModelManifest, stack: WarmpoolStack, plan: HopPlan): Promise<BenchRow[]> {
  const m = manifest.name;
  const outDir = mkdtempSync(path.join(ctx.dir, 'edge-'));
  let edge: RunningEdge | undefined;
  try {
    edge = await startEdge({
      outDir,
      regionUrl: stack.target.url,
      listen: `127.0.0.1:${await freePort()}`,
      apiKeys: `${BENCH_TENANT}:${BENCH_KEY}`,
      vars: EDGE_VARS,
    });
    const bases = { direct: stack.target.url, edge: edge.url };
    const rows: BenchRow[] = [];
    const jobId = await finishedJob(stack.target, String(withSeed(stack.target, SEEDS.edge - 1).body(0)));
    for (const hop of [inferPath(manifest, stack.target), jobReadPath(stack.target, jobId)]) {
      try {
        const figures = await measureHop(bases, hop, plan, edge.child.pid);
        for (const f of figures) {
          ctx.out(
            `  edge hop, ${hop.name}, ${f.concurrency} in flight: p50 ${ms(f.edge.p50)} vs ${ms(f.direct.p50)} ms, ` +
              `p99 ${ms(f.edge.p99)} vs ${ms(f.direct.p99)} ms, ${f0(f.edge.requestsPerS)} vs ${f0(f.direct.requestsPerS)} requests/s (edge vs direct)`,
          );
        }
        rows.push(...hopRows(m, hop, figures, plan));
      } catch (err) {
        const names = hop.name === 'infer' ? ROW_NAMES : ROW_NAMES.map((n) => n.replace(/^edge_/, 'edge_job_read_'));
        rows.push(...names.map((name) => failedRow(`${m}.${name}`, err)));
      }
    }
    await stack.watch.reset();
    return rows;
  } catch (err) {
    return ROW_NAMES.map((name) => failedRow(`${m}.${name}`, err));
  } finally {
    await edge?.close();
    rmSync(outDir, { recursive: true, force: true });
  }
}

function failedRow(name: string, err: unknown): BenchRow {
  return { name, value: NaN, unit: '', detail: `failed: ${errorMessage(err).split('\n')[0]}` };
}

function inferPath(manifest: ModelManifest, target: SubmitTarget): HopPath {
  const infer = inferTarget(target, manifest);
  return {
    name: 'infer',
    describe: `sync POST /v2/models/${manifest.name}/infer, one JSON row`,
    request: (url, offset) => {
      const seeded = withSeed(infer, SEEDS.edge + offset);
      return { url, method: 'POST', path: seeded.path, headers: seeded.headers, body: seeded.body };
    },
  };
}

function jobReadPath(target: SubmitTarget, id: string): HopPath {
  const headers = { authorization: target.headers.authorization ?? '' };
  return {
    name: 'job_read',
    describe: 'GET /v1/jobs/{id} of a finished job',
    request: (url) => ({ url, method: 'GET', path: `/v1/jobs/${encodeURIComponent(id)}`, headers }),
  };
}

/** A job submitted straight to the API and polled until it succeeded: its id. */
async function finishedJob(target: SubmitTarget, body: string): Promise<string> {
  const res = await fetch(new URL(target.path, target.url), { method: 'POST', headers: target.headers, body });
  if (res.status !== 202) throw new Error(`the job for the read path was refused: HTTP ${res.status} ${await res.text()}`);
  const { id } = (await res.json()) as { id: string };
  const deadline = Date.now() + 30_000;
  for (;;) {
    const read = await fetch(new URL(`/v1/jobs/${encodeURIComponent(id)}`, target.url), {
      headers: { authorization: target.headers.authorization ?? '' },
    });
    const { status } = (await read.json()) as { status: string };
    if (status === 'succeeded') return id;
    if (status === 'failed' || status === 'canceled') throw new Error(`the read path's job ended ${status}`);
    if (Date.now() > deadline) throw new Error(`the read path's job was still ${status} after 30 s`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
