/**
 * `warmpool bench` (first version; the "Benchmarks and reliability" issue completes it).
 * Every figure is a ratio or a percentile measured side by side in this one run, because
 * absolute times on shared machines are noise:
 *
 *   ort_best_vs_batch1    ONNX Runtime alone: rows/s at its best batch size / at batch 1
 *   batched_vs_unbatched  the worker draining single-row jobs with micro-batching / the same
 *                         worker forced to one row per forward pass
 *   batching_gain_kept    batched_vs_unbatched / ort_best_vs_batch1 (target ≥ 0.9)
 *   worker_vs_raw_ort     worker rows/s (micro-batched) / ONNX Runtime alone at the worker's batch size
 *   job_in_worker_ms      per-job time inside the worker (taken → result stored), p50/p95/p99;
 *                         latency at a fixed offered load arrives with the benchmarks issue
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import * as ort from 'onnxruntime-node';
import { systemClock } from '../infra/clock.ts';
import { loadConfig } from '../infra/config.ts';
import { startEmbeddedServices } from '../infra/dev/embedded-services.ts';
import { EVENTS_STREAM_MAX_LEN, queueName, type JobData, type JobResult } from '../infra/job-contract.ts';
import { closeAll } from '../infra/lifecycle.ts';
import { createLogger } from '../infra/log.ts';
import type { ModelManifest } from '../infra/manifest.ts';
import { createRedis } from '../infra/redis.ts';
import { createModelRegistry } from '../infra/registry.ts';
import { createS3ObjectStore } from '../infra/s3-object-store.ts';
import { createThreadEngine } from '../worker/engine/thread-engine.ts';
import { representativeInputs } from '../worker/warmup.ts';
import { WarmpoolWorker } from '../worker/worker-process.ts';
import { buildMlpModel } from './models.ts';

interface BenchRow {
  name: string;
  value: number;
  unit: string;
  detail: string;
}

export async function benchMain(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { quick: { type: 'boolean', default: false }, json: { type: 'string' }, model: { type: 'string' } },
  });
  const jobs = values.quick ? 1500 : 6000;
  const models = values.model
    ? [{ label: path.basename(values.model), bytes: new Uint8Array(readFileSync(values.model)) }]
    : [
        // Cheap per row: throughput is bound by the queue, not by ONNX Runtime.
        { label: 'demo', bytes: buildMlpModel({ features: 64 }) },
        // Heavier per row (a 3×1024 hidden MLP): ONNX Runtime is the bound, as with real models.
        { label: 'mlp-1024', bytes: buildMlpModel({ features: 256, hidden: 1024, layers: 3, seed: 5 }) },
      ];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-bench-'));
  const closers: Array<[string, () => Promise<void> | void]> = [];
  const out = (line: string) => process.stdout.write(`${line}\n`);
  try {
    const env = await benchServices(dir, closers);
    const config = loadConfig(env);
    const store = createS3ObjectStore(config.s3);
    closers.push(['s3-client', () => store.close()]);
    const registry = createModelRegistry({ store, prefix: config.s3.prefix });
    out(`bench: ${jobs} single-row jobs per mode, ${os.availableParallelism()} cpus, node ${process.version}`);
    const rows: BenchRow[] = [];
    const reported: Array<Pick<ModelManifest, 'name' | 'sha256' | 'inputs' | 'outputs'>> = [];
    for (const model of models) {
      const manifest = await registry.publish({
        name: model.label.replace(/[^A-Za-z0-9_-]/g, '-'),
        version: '1',
        bytes: model.bytes,
        maxBatch: 128,
        warmupBatches: [1, 8, 32, 128],
      });
      reported.push({ name: manifest.name, sha256: manifest.sha256, inputs: manifest.inputs, outputs: manifest.outputs });
      rows.push(...(await benchModel(env, registry, manifest, model.bytes, jobs, out)));
    }
    out('');
    out(table(rows));
    if (values.json) {
      const report = {
        machine: { cpus: os.availableParallelism(), node: process.version, ort: ort.env.versions.common },
        models: reported,
        rows,
      };
      writeFileSync(values.json, `${JSON.stringify(report, null, 2)}\n`);
      out(`wrote ${values.json}`);
    }
    return 0;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One model: raw ONNX Runtime by batch size, then the worker unbatched and micro-batched. */
async function benchModel(
  env: NodeJS.ProcessEnv,
  registry: ReturnType<typeof createModelRegistry>,
  manifest: ModelManifest,
  bytes: Uint8Array,
  jobs: number,
  out: (line: string) => void,
): Promise<BenchRow[]> {
  const m = manifest.name;
  out(`[${m}]`);
  const raw = await rawOrt(bytes, manifest, [1, 8, 32, 128]);
  out(`  raw ORT rows/s by batch: ${raw.map((r) => `${r.batch}:${Math.round(r.rowsPerS)}`).join('  ')}`);
  const unbatched = await drainQueue(env, manifest, registry, jobs, { BATCH_MAX_ROWS: '1' });
  out(`  worker, one row per pass: ${Math.round(unbatched.rowsPerS)} rows/s`);
  const batched = await drainQueue(env, manifest, registry, jobs, {});
  out(`  worker, micro-batched (batch ${batched.maxRows}): ${Math.round(batched.rowsPerS)} rows/s`);

  const b1 = raw.find((r) => r.batch === 1)?.rowsPerS ?? NaN;
  const best = raw.reduce((a, r) => (r.rowsPerS > a.rowsPerS ? r : a));
  const atWorkerBatch = raw.find((r) => r.batch === batched.maxRows)?.rowsPerS ?? best.rowsPerS;
  return [
    { name: `${m}.ort_best_vs_batch1`, value: best.rowsPerS / b1, unit: 'x', detail: `ONNX Runtime alone, batch ${best.batch} vs 1` },
    {
      name: `${m}.batched_vs_unbatched`,
      value: batched.rowsPerS / unbatched.rowsPerS,
      unit: 'x',
      detail: `worker, ${jobs} single-row jobs`,
    },
    {
      name: `${m}.batching_gain_kept`,
      value: batched.rowsPerS / unbatched.rowsPerS / (best.rowsPerS / b1),
      unit: 'ratio',
      detail: 'batched_vs_unbatched / ort_best_vs_batch1 (target ≥ 0.9)',
    },
    { name: `${m}.worker_vs_raw_ort`, value: batched.rowsPerS / atWorkerBatch, unit: 'ratio', detail: `at batch ${batched.maxRows}` },
    ...(['p50', 'p95', 'p99'] as const).map((p) => ({
      name: `${m}.job_in_worker_${p}_ms`,
      value: batched.latency[p],
      unit: 'ms',
      detail: 'micro-batched: worker took the job → result stored',
    })),
  ];
}

async function benchServices(dir: string, closers: Array<[string, () => Promise<void> | void]>): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: 'warn',
    QUEUE_PREFIX: `bench${Date.now()}`,
    S3_PREFIX: `bench-${Date.now()}`,
  };
  await startEmbeddedServices(env, { dir, log: (line) => process.stdout.write(`${line}\n`), closers });
  env.MODEL_CACHE_DIR = path.join(dir, 'cache');
  return env;
}

/** ONNX Runtime alone, in this thread, on the same synthetic rows: the raw limit. */
async function rawOrt(bytes: Uint8Array, manifest: ModelManifest, sizes: number[]) {
  const session = await ort.InferenceSession.create(bytes, { graphOptimizationLevel: 'all' });
  const results: Array<{ batch: number; rowsPerS: number }> = [];
  for (const batch of sizes) {
    const feeds = Object.fromEntries(
      Object.entries(representativeInputs(manifest, batch)).map(([n, t]) => [n, new ort.Tensor(t.type, t.data, t.dims)]),
    );
    await session.run(feeds);
    const target = 4000;
    const started = performance.now();
    let rows = 0;
    while (rows < target) {
      await session.run(feeds);
      rows += batch;
    }
    results.push({ batch, rowsPerS: rows / ((performance.now() - started) / 1000) });
  }
  await session.release();
  return results;
}

/** Pre-fills the queue with single-row jobs, then times one worker draining it. */
async function drainQueue(
  baseEnv: NodeJS.ProcessEnv,
  manifest: ModelManifest,
  registry: ReturnType<typeof createModelRegistry>,
  count: number,
  overrides: Record<string, string>,
) {
  const env = { ...baseEnv, ...overrides, QUEUE_PREFIX: `${baseEnv.QUEUE_PREFIX}-${Object.keys(overrides).length}` };
  const config = loadConfig(env);
  const connection = createRedis(config.redisUrl);
  const queue = new Queue<JobData, JobResult>(queueName(manifest.name, manifest.version), {
    connection,
    prefix: config.queuePrefix,
    streams: { events: { maxLen: EVENTS_STREAM_MAX_LEN } },
  });
  const input = manifest.inputs[0];
  const width = input ? input.shape.slice(1).reduce((a, b) => a * Math.max(1, b), 1) : 1;
  const rand = (i: number) => Array.from({ length: width }, (_, k) => Math.sin(i * 31 + k) * 0.5);
  const submittedAt = Date.now();
  for (let start = 0; start < count; start += 500) {
    const batch = Array.from({ length: Math.min(500, count - start) }, (_, j) => ({
      name: 'infer',
      data: {
        tenant: 'bench',
        model: manifest.name,
        version: manifest.version,
        inputs: manifest.inputs.map((spec) => ({
          name: spec.name,
          datatype: spec.datatype,
          shape: [1, ...spec.shape.slice(1).map((d) => Math.max(1, d))],
          data: rand(start + j),
        })),
        submittedAt,
      } satisfies JobData,
      opts: { removeOnComplete: false },
    }));
    await queue.addBulk(batch);
  }
  const worker = new WarmpoolWorker(
    { config, redis: createRedis(config.redisUrl), registry, engine: createThreadEngine(), clock: systemClock, log: createLogger('warn') },
    { model: manifest.name, version: manifest.version },
  );
  await worker.start();
  const started = performance.now();
  for (;;) {
    const counts = await queue.getJobCounts('completed', 'failed');
    if ((counts.completed ?? 0) + (counts.failed ?? 0) >= count) break;
    await systemClock.sleep(20);
  }
  const elapsedS = (performance.now() - started) / 1000;
  const done = await queue.getJobs(['completed'], 0, count);
  const latencies = done.map((j) => (j.finishedOn ?? 0) - (j.processedOn ?? 0)).sort((a, b) => a - b);
  const maxRows = config.worker.batchMaxRows > 0 ? config.worker.batchMaxRows : (worker.batchProfile?.chosenBatch ?? 0);
  await worker.close();
  await queue.obliterate({ force: true });
  await queue.close();
  connection.disconnect();
  return { rowsPerS: count / elapsedS, maxRows, latency: percentiles(latencies) };
}

function percentiles(sorted: number[]): { p50: number; p95: number; p99: number } {
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}

function table(rows: BenchRow[]): string {
  const fmt = (v: number) =>
    !Number.isFinite(v) ? 'n/a' : Math.abs(v) >= 100 ? v.toFixed(0) : Math.abs(v) >= 0.1 ? v.toFixed(2) : v.toPrecision(2);
  const w = Math.max(...rows.map((r) => r.name.length));
  return rows.map((r) => `${r.name.padEnd(w)}  ${fmt(r.value).padStart(8)} ${r.unit.padEnd(5)}  ${r.detail}`).join('\n');
}
