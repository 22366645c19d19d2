/**
 * The bulk rows (issue 18), per input format (JSONL, CSV, Parquet; bulk-objects.ts lays them out):
 *
 *   bulk_vs_naive_script_<fmt>  rows/s of `warmpool bulk run` ÷ the single-process script a data
 *                               engineer would write (naive-bulk.ts), on the same objects
 *   bulk_vs_raw_ort_<fmt>       the same run's rows/s ÷ ONNX Runtime alone at its best configuration
 *
 * The run goes through as many `warmpool worker` processes as the machine has cores (at least
 * 2), each with its share of the cores as intra-op threads (INTRA_OP_THREADS), started before
 * and kept warm across the formats (a warm pool is the product); it is started
 * and driven by `warmpool bulk run` in a child process, as a data team runs it. Its rate is the
 * run's own record: rows done ÷ started → finished, which spans planning, every chunk's read,
 * score and part write, and the manifest, but neither the CLI's boot nor the input listing before
 * the start. The naive script's rate spans its first list to its last put, after its boot and
 * session creation; these two are the ratio's, the CLI's and the script's whole wall times are in
 * the detail. Both sides' outputs are read back: each input id exactly once, or the row fails.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { rowWidth } from './bench-models.ts';
import { BULK_FORMATS, idsProblem, inputLayout, writeBulkInput, writtenIds } from './bulk-objects.ts';
import type { NaiveFormat, NaiveInput, NaiveJob, NaiveResult } from './naive-bulk.ts';
import { clockTicksPerS, redisServerPid, startCpuMeter } from './proc-cpu.ts';
import type { RawSweep } from './raw-ort.ts';
import type { BenchRow } from './report.ts';
import { BENCH_TENANT, type BenchContext, type ChildRole, runRole, scopedEnv, spawnRole, waitForWorkers } from './services.ts';
import { boundedCount } from './stats.ts';

/** For the tests that knew it here. */
export { nest } from './bulk-objects.ts';

const NAIVE = fileURLToPath(new URL('./naive-bulk.ts', import.meta.url));
const RUN_TIMEOUT_MS = 600_000;

export interface BulkBudget {
  maxValues: number;
  seconds: number;
}

export interface BulkOptions {
  /** Go to each worker's node (e.g. `--cpu-prof`, to see where a run's time goes). */
  workerNodeArgs?: string[];
  /** Only these formats (default all). */
  formats?: readonly NaiveFormat[];
  /** `--chunk-rows` for the runs (default: the CLI's own default, as a data team runs it). */
  chunkRows?: number;
}

interface Side {
  rowsPerS: number;
  /** The process's whole wall time, ms (spawn → exit). */
  processMs: number;
  /** CPU ms over the side's run, by process (NaN where /proc cannot tell). */
  cpuMs: Record<string, number>;
}

interface WarmpoolSide extends Side {
  chunkRows: number;
}

/** What one model's bulk rows share: the bench tenant's bulk area, warm workers, a store to check outputs. */
interface BulkSession {
  ctx: BenchContext;
  manifest: ModelManifest;
  modelPath: string;
  env: NodeJS.ProcessEnv;
  bucket: string;
  /** Key prefix of this model's objects, ending with '/'. */
  base: string;
  workers: number;
  /** The workers' and redis-server's pids, for their CPU time. */
  pids: Record<string, number | undefined>;
  store: ReturnType<typeof createS3ObjectStore>;
}

const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');
const s1 = (ms: number) => (ms / 1000).toFixed(1);

/** Six rows per model: bulk_vs_naive_script and bulk_vs_raw_ort for each format. */
export async function measureBulkRows(
  ctx: BenchContext,
  manifest: ModelManifest,
  modelPath: string,
  raw: RawSweep | undefined,
  budget: BulkBudget,
  options: BulkOptions = {},
): Promise<BenchRow[]> {
  const rows = boundedCount(ctx.quick ? 100_000 : 400_000, {
    ...budget,
    valuesPerItem: manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0),
    ratePerS: raw?.best.rowsPerS ?? NaN,
    min: 1000,
  });
  const workers = Math.max(2, os.availableParallelism());
  const formats = options.formats ?? BULK_FORMATS;
  const out: BenchRow[] = [];
  let session: (BulkSession & { close(): Promise<void> }) | undefined;
  try {
    session = await startSession(ctx, manifest, modelPath, workers, options.workerNodeArgs ?? []);
    for (const format of formats) out.push(...(await measureFormat(session, format, rows, raw, options.chunkRows)));
  } catch (err) {
    const why = `failed: ${errorMessage(err).split('\n')[0]}`;
    for (const format of formats.slice(out.length / 2)) out.push(...failedRows(manifest.name, format, why));
  } finally {
    await session?.close();
  }
  return out;
}

function rowNames(model: string, format: NaiveFormat) {
  return { naive: `${model}.bulk_vs_naive_script_${format}`, raw: `${model}.bulk_vs_raw_ort_${format}` };
}

function failedRows(model: string, format: NaiveFormat, detail: string): BenchRow[] {
  const names = rowNames(model, format);
  return [
    { name: names.naive, value: NaN, unit: 'ratio', detail },
    { name: names.raw, value: NaN, unit: 'ratio', detail },
  ];
}

async function startSession(ctx: BenchContext, manifest: ModelManifest, modelPath: string, workers: number, nodeArgs: string[]) {
  const { s3 } = loadConfig(ctx.env);
  const area = `${s3.prefix ? `${s3.prefix}/` : ''}bulk/${BENCH_TENANT}/`;
  // The bench tenant's bulk location (BULK_LOCATIONS): its runs may use this folder and no other.
  // Several workers on one host share its cores: each gets its share of intra-op threads, as an
  // operator would set it, not a warm-up's pick that assumes the host is its own.
  const { env, config } = scopedEnv(ctx, 'bulk', {
    BULK_LOCATIONS: `${BENCH_TENANT}:s3://${s3.bucket}/${area}`,
    INTRA_OP_THREADS: String(threadsPerWorker(workers)),
  });
  const store = createS3ObjectStore(config.s3);
  const redis = createRedis(config.redisUrl);
  const roles: ChildRole[] = [];
  const close = async () => {
    await Promise.all(roles.map((r) => r.stop()));
    await closeRedis(redis);
    store.close();
  };
  try {
    for (let i = 0; i < workers; i++)
      roles.push(spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env, { nodeArgs }));
    await waitForWorkers(redis, config, manifest.name, 'active', { count: workers });
  } catch (err) {
    await close();
    throw err;
  }
  const pids: Record<string, number | undefined> = { redis: await redisServerPid(redis) };
  roles.forEach((r, i) => {
    pids[`worker${i}`] = r.child.pid;
  });
  const base = `${area}${manifest.name}-${Date.now().toString(36)}/`;
  return { ctx, manifest, modelPath, env, bucket: config.s3.bucket, base, workers, pids, store, close };
}

function threadsPerWorker(workers: number): number {
  return Math.max(1, Math.floor(os.availableParallelism() / workers));
}

async function measureFormat(
  s: BulkSession,
  format: NaiveFormat,
  rows: number,
  raw: RawSweep | undefined,
  chunkRows: number | undefined,
): Promise<BenchRow[]> {
  const layout = inputLayout(s.manifest, format);
  if (typeof layout === 'string') return failedRows(s.manifest.name, format, `n/a: ${layout}`);
  const names = rowNames(s.manifest.name, format);
  const prefix = `${s.base}${format}/`;
  let objects: number;
  try {
    objects = await writeBulkInput(s.store, `${prefix}in/`, s.manifest, rows, format, layout);
  } catch (err) {
    return failedRows(s.manifest.name, format, `failed writing the input: ${errorMessage(err).split('\n')[0]}`);
  }
  s.ctx.out(`bulk ${s.manifest.name} ${format}: ${rows} rows in ${objects} objects; naive script, then warmpool bulk run`);
  const naive = await settle(runNaive(s, format, prefix, layout, rows));
  const warm = await settle(runWarmpool(s, format, prefix, rows, chunkRows));
  const what = `${rows} rows in ${objects} ${format.toUpperCase()} objects`;
  const wp = typeof warm === 'string' ? undefined : warm;
  const wpText = wp
    ? `warmpool ${s.workers} workers × ${threadsPerWorker(s.workers)} thread(s) (${os.availableParallelism()} cores) ${f0(wp.rowsPerS)} rows/s (run record; CLI wall ${s1(wp.processMs)} s = ${f0(rows / (wp.processMs / 1000))} rows/s), chunks of ${wp.chunkRows}, ${cpuText(wp.cpuMs)}`
    : `warmpool ${warm}`;
  const naiveText =
    typeof naive === 'string'
      ? `naive script ${naive}`
      : `naive script 1 process ${f0(naive.rowsPerS)} rows/s (first list → last put; process wall ${s1(naive.processMs)} s), ${cpuText(naive.cpuMs)}`;
  const best = raw?.best;
  const checked = wp && typeof naive !== 'string' ? '; each id once on both sides' : '';
  return [
    {
      name: names.naive,
      value: wp && typeof naive !== 'string' ? wp.rowsPerS / naive.rowsPerS : NaN,
      unit: 'ratio',
      detail: `${what}: ${wpText} vs ${naiveText}${checked}`,
    },
    {
      name: names.raw,
      value: wp && best ? wp.rowsPerS / best.rowsPerS : NaN,
      unit: 'ratio',
      detail: `${what}: ${wpText} vs raw batch ${best?.batch} × ${best?.threads} thread(s) ${f0(best?.rowsPerS ?? NaN)} rows/s`,
    },
  ];
}

/** `CPU s: workers 6.1, cli 1.2, …`: the worker processes summed, then the rest by name. */
function cpuText(cpuMs: Record<string, number>): string {
  const workers = Object.entries(cpuMs).filter(([name]) => name.startsWith('worker'));
  const rest = Object.entries(cpuMs).filter(([name]) => !name.startsWith('worker'));
  const parts = workers.length > 0 ? [['workers', workers.reduce((n, [, ms]) => n + ms, 0)] as const, ...rest] : rest;
  return `CPU s: ${parts.map(([name, ms]) => `${name === 'bench' ? 'bench (S3 server)' : name} ${Number.isFinite(ms) ? (ms / 1000).toFixed(1) : 'n/a'}`).join(', ')}`;
}

/** The promise's value, or 'failed: <why>'. */
async function settle<T>(promise: Promise<T>): Promise<T | string> {
  try {
    return await promise;
  } catch (err) {
    return `failed: ${errorMessage(err).split('\n')[0]}`;
  }
}

async function runNaive(s: BulkSession, format: NaiveFormat, prefix: string, layout: NaiveInput[], rows: number): Promise<Side> {
  const job: NaiveJob = {
    bucket: s.bucket,
    input: `${prefix}in/`,
    output: `${prefix}naive/`,
    modelPath: s.modelPath,
    format,
    inputs: layout,
    ...(s.manifest.batching.fixedBatch !== undefined ? { batchRows: s.manifest.batching.fixedBatch } : {}),
    outputAxes: Object.fromEntries(s.manifest.outputs.flatMap((o) => (o.batchAxis === undefined ? [] : [[o.name, o.batchAxis]]))),
  };
  const jobFile = path.join(s.ctx.dir, `naive-${s.manifest.name}-${format}.json`);
  writeFileSync(jobFile, JSON.stringify(job));
  const started = performance.now();
  const meter = startSideMeter(s.pids);
  const run = await runScript(NAIVE, [jobFile], s.ctx.env, RUN_TIMEOUT_MS);
  const processMs = performance.now() - started;
  const cpu = meter.stop();
  if (run.code !== 0) throw new Error(`exited ${run.code}: ${why(run.stderr)}`);
  const result = JSON.parse(lastLine(run.stdout)) as NaiveResult;
  const problem = idsProblem(await writtenIds(s.store, job.output, 'jsonl'), rows);
  if (problem) throw new Error(`wrong output: ${problem}`);
  return { rowsPerS: result.rows / (result.wallMs / 1000), processMs, cpuMs: { script: cpu.child, bench: cpu.bench } };
}

async function runWarmpool(s: BulkSession, format: NaiveFormat, prefix: string, rows: number, chunkRows?: number): Promise<WarmpoolSide> {
  const runId = `bench-${s.manifest.name}-${format}-${Date.now().toString(36)}`;
  const url = (p: string) => `s3://${s.bucket}/${prefix}${p}/`;
  const args = ['--model', s.manifest.name, '--version', s.manifest.version, '--input', url('in'), '--output', url('out')];
  if (chunkRows !== undefined) args.push('--chunk-rows', String(chunkRows));
  const started = performance.now();
  const meter = startSideMeter(s.pids);
  const run = await runRole(['bulk', 'run', ...args, '--run-id', runId, '--tenant', BENCH_TENANT], s.env, RUN_TIMEOUT_MS);
  const processMs = performance.now() - started;
  const cpu = meter.stop();
  if (run.code !== 0) throw new Error(`warmpool bulk run exited ${run.code}: ${why(run.stderr)}`);
  const status = await runRole(['bulk', 'status', runId, '--json', '--tenant', BENCH_TENANT], s.env, 60_000);
  const view = JSON.parse(status.stdout) as BulkRunView;
  if (view.status !== 'succeeded') throw new Error(`bulk run ${view.status}: ${view.error?.message ?? 'no reason given'}`);
  const problem = idsProblem(await writtenIds(s.store, `${prefix}out/`, format), rows);
  if (problem) throw new Error(`wrong parts: ${problem}`);
  const spanMs = (view.finishedAt ?? NaN) - (view.startedAt ?? view.createdAt);
  const cpuMs = { ...cpu.named, cli: cpu.child, bench: cpu.bench };
  return { rowsPerS: view.progress.rowsDone / (spanMs / 1000), processMs, cpuMs, chunkRows: view.chunkRows };
}

/**
 * CPU ms over one side's run: the named processes (workers, redis-server), this bench process
 * (where the embedded S3 server runs) and the child run in between (`child`: what this process
 * reaped meanwhile, its cutime + cstime, so a child that has exited is still counted).
 */
function startSideMeter(pids: Record<string, number | undefined>): {
  stop(): { named: Record<string, number>; bench: number; child: number };
} {
  const named = startCpuMeter(pids);
  const before = ownCpuMs();
  return {
    stop() {
      const after = ownCpuMs();
      return { named: named.stop(), bench: after.self - before.self, child: after.reaped - before.reaped };
    },
  };
}

/** This process's CPU ms and its reaped children's (/proc/self/stat utime + stime, cutime + cstime); NaN without /proc. */
function ownCpuMs(): { self: number; reaped: number } {
  try {
    const line = readFileSync('/proc/self/stat', 'utf8');
    const fields = line
      .slice(line.lastIndexOf(')') + 2)
      .split(' ')
      .map(Number);
    const perTick = 1000 / clockTicksPerS();
    // Fields 14–17 of stat(5), counted from field 3 (state).
    const at = (n: number) => fields[n - 3] ?? NaN;
    return { self: (at(14) + at(15)) * perTick, reaped: (at(16) + at(17)) * perTick };
  } catch {
    return { self: NaN, reaped: NaN };
  }
}

function lastLine(text: string): string {
  return text.trim().split('\n').at(-1) ?? '';
}

/** What a failed child said: its last lines, less a hint on how to see a stack trace. */
function why(stderr: string): string {
  const lines = stderr
    .trim()
    .split('\n')
    .filter((l) => l.trim() !== '' && !l.startsWith('(unexpected:'));
  return lines.slice(-2).join(' ');
}

/** `node --import tsx FILE args` run to its end: exit code and output (killed after `timeoutMs`). */
function runScript(file: string, args: string[], env: NodeJS.ProcessEnv, timeoutMs: number) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', file, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr = (stderr + c.toString()).slice(-4096);
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? 1, stdout, stderr: stderr + (signal ? `\n(killed by ${signal})` : '') });
    });
  });
}
