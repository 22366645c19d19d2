/**
 * Which measurements make which rows, per model: raw ONNX Runtime (every thread count and batch
 * size), the worker unbatched and micro-batched, cold start (here), bulk scoring (bulk.ts) and
 * end to end over HTTP against the minimal stack (serving-rows.ts). Once, on models of its own:
 * end to end on a 1-master Redis Cluster vs a 3-master one.
 *
 * A measurement that fails gives its rows as n/a with the reason, and the others still run:
 * a bench that stops at the first broken piece hides how the rest performs.
 */
import os from 'node:os';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { BENCH_MAX_BATCH, benchBatches, benchMode, rowWidth } from './bench-models.ts';
import { CLUSTER_ROW, measureClusterScaling } from './cluster.ts';
import { measureColdStart } from './cold-start.ts';
import type { HopPlan } from './edge-hop.ts';
import type { PoolLoadPlan } from './pool-load.ts';
import { cellAt, describeSweep, type RawSweep, rawOrtSweep } from './raw-ort.ts';
import type { BenchRow } from './report.ts';
import type { BenchContext } from './services.ts';
import { boundedCount } from './stats.ts';
import { measureWorkerDrain } from './worker-drain.ts';

export interface BenchSizes {
  /** Single-row jobs per worker drain. */
  jobs: number;
  /** Jobs of BENCH_MAX_BATCH rows each, for the full-batch drain. */
  fullBatchJobs: number;
  /** Timed ms per raw ONNX Runtime cell. */
  cellMs: number;
  /** Requests per closed-loop run end to end. */
  e2eJobs: number;
  /** Untimed requests before them. */
  warmUpRequests: number;
  /** Closed-loop runs per stack; each side keeps its best. */
  maxRuns: number;
  latencyDurationS: number;
  /** The light-load ladder's rates (requests/s), and each rung's least requests (latency-ladder.ts). */
  ladder: { rates: number[]; minRequests: number };
  /** Open-loop runs, and seconds each, searching the highest rate within the p99 bound. */
  searchSteps: number;
  searchDurationS: number;
  /**
   * A run's counts are cut to this many tensor values in all, and to about `budgetS` at raw ONNX
   * Runtime's best rate (stats.ts boundedCount): large or slow models stay bounded.
   */
  maxValues: number;
  budgetS: number;
  /** Models, single-row jobs per model and jobs in flight per model, per cluster run. */
  cluster: { models: number; jobs: number; concurrency: number };
  /** The edge → region hop's closed loops (edge-hop.ts). */
  edge: HopPlan;
  /** The shared pool's loads and Zipf traffic (pool-load.ts); `fits` 8 of these models is the least a pool allows (64 MB). */
  pool: PoolLoadPlan;
}

export function benchSizes(quick: boolean): BenchSizes {
  return quick
    ? {
        jobs: 1500,
        fullBatchJobs: 120,
        cellMs: 300,
        e2eJobs: 2000,
        warmUpRequests: 500,
        maxRuns: 2,
        latencyDurationS: 5,
        ladder: { rates: [10, 50], minRequests: 100 },
        searchSteps: 4,
        searchDurationS: 3,
        maxValues: 10_000_000,
        budgetS: 8,
        cluster: { models: 3, jobs: 300, concurrency: 48 },
        edge: { concurrencies: [1, 16], rounds: 4, requests: 200, warmUp: 300 },
        pool: { loads: 8, models: 24, fits: 8, ratePerS: 10, durationS: 20, checked: 40, seed: 31 },
      }
    : {
        jobs: 6000,
        fullBatchJobs: 400,
        cellMs: 1000,
        e2eJobs: 6000,
        warmUpRequests: 1000,
        maxRuns: 3,
        latencyDurationS: 20,
        ladder: { rates: [5, 10, 20, 50], minRequests: 200 },
        searchSteps: 6,
        searchDurationS: 8,
        maxValues: 20_000_000,
        budgetS: 30,
        cluster: { models: 3, jobs: 1000, concurrency: 48 },
        edge: { concurrencies: [1, 4, 16], rounds: 6, requests: 500, warmUp: 500 },
        pool: { loads: 20, models: 32, fits: 8, ratePerS: 20, durationS: 60, checked: 120, seed: 31 },
      };
}

const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');

/** Rows named `<model>.<name>` (`<name>` for no model) with value NaN and the failure as detail. */
export function failedRows(model: string | undefined, names: string[], err: unknown): BenchRow[] {
  const reason = errorMessage(err);
  return names.map((name) => ({
    name: model === undefined ? name : `${model}.${name}`,
    value: NaN,
    unit: '',
    detail: `failed: ${reason.split('\n')[0]}`,
  }));
}

export interface ModelRun {
  rows: BenchRow[];
  raw?: RawSweep;
  /** Jobs the worker holds in flight: the no-op BullMQ worker gets the same. */
  concurrency: number;
}

export async function benchModel(ctx: BenchContext, manifest: ModelManifest, modelPath: string, sizes: BenchSizes): Promise<ModelRun> {
  const m = manifest.name;
  const rows: BenchRow[] = [];
  ctx.out(`[${m}]`);
  ctx.out(`  mode: ${benchMode(manifest)}`);
  const threads = Array.from({ length: os.availableParallelism() }, (_, i) => i + 1);
  const raw = await rawOrtSweep(modelPath, manifest, {
    batches: benchBatches(manifest.batching.fixedBatch),
    threads,
    cellMs: sizes.cellMs,
  });
  ctx.out(`  raw ORT rows/s: ${describeSweep(raw)}`);
  rows.push({
    name: `${m}.ort_best_vs_batch1`,
    value: raw.best.rowsPerS / raw.batch1.rowsPerS,
    unit: 'x',
    detail: `ONNX Runtime alone: batch ${raw.best.batch} × ${raw.best.threads} thread(s) ${f0(raw.best.rowsPerS)} rows/s vs batch 1 × ${raw.batch1.threads} ${f0(raw.batch1.rowsPerS)}; served ${benchMode(manifest)}`,
  });

  let concurrency = Math.max(4, BENCH_MAX_BATCH * 2);
  const width = manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0);
  const budget = { maxValues: sizes.maxValues, seconds: sizes.budgetS };
  const jobs = boundedCount(sizes.jobs, { ...budget, valuesPerItem: width, ratePerS: raw.best.rowsPerS, min: 200 });
  const fullBatchJobs = boundedCount(sizes.fullBatchJobs, {
    ...budget,
    valuesPerItem: width * BENCH_MAX_BATCH,
    ratePerS: raw.best.rowsPerS / BENCH_MAX_BATCH,
    min: 8,
  });
  try {
    const unbatched = await measureWorkerDrain(ctx, manifest, `${m}-b1`, [{ jobs, rowsPerJob: 1 }], { BATCH_MAX_ROWS: '1' });
    const u = unbatched.phases[0];
    ctx.out(`  worker, one row per pass: ${f0(u?.rowsPerS ?? NaN)} rows/s`);
    const batched = await measureWorkerDrain(ctx, manifest, `${m}-mb`, [
      { jobs, rowsPerJob: 1 },
      { jobs: fullBatchJobs, rowsPerJob: BENCH_MAX_BATCH },
    ]);
    const [single, full] = batched.phases;
    if (!u || !single || !full) throw new Error('a drain phase measured nothing');
    const configured = loadConfig(ctx.env).worker.concurrency;
    concurrency = configured > 0 ? configured : Math.max(4, batched.maxRows * 2);
    ctx.out(
      `  worker, micro-batched (batch ≤ ${batched.maxRows}, ${batched.threads} thread(s)): ${f0(single.rowsPerS)} rows/s single-row jobs, ${f0(full.rowsPerS)} rows/s ${BENCH_MAX_BATCH}-row jobs`,
    );
    const atWorker = cellAt(raw, batched.threads, batched.maxRows)?.rowsPerS ?? NaN;
    const gain = single.rowsPerS / u.rowsPerS;
    const failures = u.failed + single.failed + full.failed;
    rows.push(
      {
        name: `${m}.batched_vs_unbatched`,
        value: gain,
        unit: 'x',
        detail: `worker, ${jobs} single-row jobs: ${f0(single.rowsPerS)} vs ${f0(u.rowsPerS)} rows/s; mean batch ${single.meanBatchRows.toFixed(1)} rows, engine busy ${pct(single.engineBusy)}${failures ? `; ${failures} jobs FAILED` : ''}`,
      },
      {
        name: `${m}.batching_gain_kept`,
        value: gain / (raw.best.rowsPerS / raw.batch1.rowsPerS),
        unit: 'ratio',
        detail: 'batched_vs_unbatched / ort_best_vs_batch1',
      },
      {
        name: `${m}.worker_vs_raw_ort`,
        value: single.rowsPerS / raw.best.rowsPerS,
        unit: 'ratio',
        detail: `single-row jobs vs the best raw cell (batch ${raw.best.batch} × ${raw.best.threads} thread(s))`,
      },
      {
        name: `${m}.worker_vs_raw_ort_same_config`,
        value: single.rowsPerS / atWorker,
        unit: 'ratio',
        detail: `single-row jobs vs raw at the worker's own batch ${batched.maxRows} × ${batched.threads} thread(s)`,
      },
      {
        name: `${m}.full_batch_jobs_vs_raw_ort`,
        value: full.rowsPerS / raw.best.rowsPerS,
        unit: 'ratio',
        detail: `${fullBatchJobs} jobs of ${BENCH_MAX_BATCH} rows: ${f0(full.rowsPerS)} rows/s; engine busy ${pct(full.engineBusy)} (per-job cost out of the way)`,
      },
      ...(['p50', 'p99'] as const).map((p) => ({
        name: `${m}.job_in_worker_${p}_ms`,
        value: single.inWorker[p],
        unit: 'ms',
        detail: 'micro-batched, full queue: worker took the job → result stored',
      })),
    );
  } catch (err) {
    rows.push(...failedRows(m, ['batched_vs_unbatched', 'batching_gain_kept', 'worker_vs_raw_ort'], err));
  }

  rows.push(...(await coldStartRows(ctx, manifest)));
  return { rows, raw, concurrency };
}

function pct(share: number): string {
  return Number.isFinite(share) ? `${Math.round(share * 100)}%` : 'n/a';
}

async function coldStartRows(ctx: BenchContext, manifest: ModelManifest): Promise<BenchRow[]> {
  const m = manifest.name;
  try {
    const r = await measureColdStart(ctx, manifest, m);
    const mb = (manifest.sizeBytes / 1e6).toFixed(1);
    ctx.out(
      `  cold start: empty cache ${f0(r.cold.boot + r.cold.ready)} ms, warm cache ${f0(r.warm.boot + r.warm.ready)} ms (boot included); raw ${f0(r.rawMs)} ms`,
    );
    const phase = (name: string, value: number, detail: string): BenchRow => ({
      name: `${m}.cold_start_${name}_ms`,
      value,
      unit: 'ms',
      detail,
    });
    return [
      phase('boot', r.cold.boot, "spawn → downloading: node, the compiled CLI and the worker's modules, Redis, control channel"),
      phase('download', r.cold.download, `empty cache: manifest + ${mb} MB weights from S3, sha256-checked`),
      phase('load', r.cold.load, 'ONNX Runtime session in the engine thread'),
      phase('warmup', r.cold.warmup, `batch profile over ${manifest.batching.warmupBatches.join('/')} rows, threads chosen`),
      phase(
        'warm_cache',
        r.warm.ready,
        `from a warm disk cache, boot aside: verify ${f0(r.warm.download)} + load ${f0(r.warm.load)} + warm-up ${f0(r.warm.warmup)} ms`,
      ),
      {
        name: `${m}.cold_start_vs_raw`,
        value: r.warm.ready / r.rawMs,
        unit: 'ratio',
        detail: `warm-cache start vs a fresh node importing onnxruntime-node, InferenceSession.create and the same warm-up batches (${f0(r.rawMs)} ms, ${r.threads} thread(s))`,
      },
    ];
  } catch (err) {
    return failedRows(m, ['cold_start_warm_cache_ms', 'cold_start_vs_raw'], err);
  }
}

/** Redis Cluster scaling, once per bench on models of its own; needs redis-server with cluster support. */
export async function benchCluster(ctx: BenchContext, sizes: BenchSizes): Promise<BenchRow[]> {
  const { models, jobs, concurrency } = sizes.cluster;
  ctx.out(`[Redis Cluster: ${models} models, 1 vs 3 masters]`);
  try {
    return await measureClusterScaling(ctx, { models, jobs, concurrency });
  } catch (err) {
    const reason = errorMessage(err).split('\n')[0];
    return failedRows(undefined, [CLUSTER_ROW], `${reason} (--no-cluster skips this row)`);
  }
}
