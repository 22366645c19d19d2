/**
 * `warmpool bench [--model FILE.onnx [--input-shape DIMS]] [--json FILE] [--quick] [--api child|in-process] [--no-cluster]`
 *
 * One table, each row a ratio or a percentile measured side by side in this one run, because
 * absolute times on shared machines are noise; each row with a target says met or gap (a report,
 * never a failing exit). What the rows mean and the latest table: docs/BENCHMARKS.md.
 * --input-shape gives a --model's dynamic non-batch dimensions (input-shapes.ts).
 * --no-cluster skips the Redis Cluster row (1 vs 3 masters), for a redis-server without cluster
 * support or a shorter run. The shared pool's rows (pool-load-run.ts) run once, on models of their
 * own, whatever --model says.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import * as ort from 'onnxruntime-node';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { type BenchModel, builtInModels, publishBenchModel, userModel } from './bench-models.ts';
import { measureBulkRows } from './bulk.ts';
import type { ApiMode } from './e2e.ts';
import { benchPoolLoad } from './pool-load-run.ts';
import { type BenchModelInfo, type BenchReport, type BenchRow, formatTable, judgedRows, toJson } from './report.ts';
import { startBenchContext } from './services.ts';
import { benchServing } from './serving-rows.ts';
import { benchCluster, benchModel, benchSizes } from './suite.ts';

export async function benchMain(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      quick: { type: 'boolean', default: false },
      json: { type: 'string' },
      model: { type: 'string' },
      'input-shape': { type: 'string' },
      api: { type: 'string', default: 'child' },
      'no-cluster': { type: 'boolean', default: false },
    },
    strict: true,
  });
  if (values.api !== 'child' && values.api !== 'in-process') {
    process.stderr.write(`warmpool bench: --api is 'child' or 'in-process' (got '${values.api}')\n`);
    return 2;
  }
  const api: ApiMode = values.api;
  const models = chooseModels(values.model, values['input-shape']);
  if (typeof models === 'string') {
    process.stderr.write(`warmpool bench: ${models}\n`);
    return 2;
  }
  const sizes = benchSizes(values.quick);
  const out = (line: string) => process.stdout.write(`${line}\n`);
  const started = Date.now();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-bench-'));
  const closers: Closer[] = [];
  try {
    const ctx = await startBenchContext(dir, values.quick, out, closers);
    out(
      `bench${values.quick ? ' --quick' : ''}: ${os.availableParallelism()} cpus (${cpuModel()}), node ${process.version}, onnxruntime ${ort.env.versions.common}`,
    );
    const rows: BenchRow[] = [];
    const infos: BenchModelInfo[] = [];
    for (const model of models) {
      const manifest = await publishBenchModel(ctx.registry, model);
      infos.push(modelInfo(manifest));
      const run = await benchModel(ctx, manifest, writeModel(dir, model), sizes);
      rows.push(...run.rows);
      // Per model: with a cheap model bulk is bound by parsing and S3, with a heavy one by ONNX Runtime.
      const bulkBudget = { maxValues: sizes.maxValues, seconds: sizes.budgetS * 2 };
      rows.push(...(await measureBulkRows(ctx, manifest, writeModel(dir, model), run.raw, bulkBudget)));
      rows.push(...(await benchServing(ctx, manifest, run, sizes, api)));
    }
    if (!values['no-cluster']) rows.push(...(await benchCluster(ctx, sizes)));
    // Once, on models of its own: a shared pool's worker is not bound to the models above.
    rows.push(...(await benchPoolLoad(ctx, sizes.pool)));
    out('');
    out(formatTable(rows));
    if (values.json) {
      const report: BenchReport = {
        machine: { cpus: os.availableParallelism(), cpuModel: cpuModel(), node: process.version, ort: ort.env.versions.common },
        model: infos[0] as BenchModelInfo,
        models: infos,
        options: { quick: values.quick, api },
        startedAt: new Date(started).toISOString(),
        durationS: Math.round((Date.now() - started) / 1000),
        rows: judgedRows(rows),
      };
      writeFileSync(values.json, toJson(report));
      out(`wrote ${values.json}`);
    }
    out(`bench took ${Math.round((Date.now() - started) / 1000)} s`);
    return 0;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The built-in models, or the user's with its input shapes pinned; a string says why not. */
function chooseModels(file: string | undefined, inputShape: string | undefined): BenchModel[] | string {
  if (!file) return inputShape === undefined ? builtInModels() : '--input-shape goes with --model FILE.onnx';
  try {
    return [userModel(file, inputShape)];
  } catch (err) {
    if (err instanceof InvalidInputError) return `${file}: ${err.message}`;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return `${file}: no such file`;
    throw err;
  }
}

function cpuModel(): string {
  return os.cpus()[0]?.model.trim() ?? 'unknown';
}

/** The model bytes on disk, for raw ONNX Runtime to load as the worker does (from a file). */
function writeModel(dir: string, model: BenchModel): string {
  const file = path.join(dir, `${model.name}.onnx`);
  writeFileSync(file, model.bytes);
  return file;
}

function modelInfo(m: ModelManifest): BenchModelInfo {
  const spec = ({ name, datatype, shape }: ModelManifest['inputs'][number]) => ({ name, datatype, shape });
  return { name: m.name, bytes: m.sizeBytes, sha256: m.sha256, inputs: m.inputs.map(spec), outputs: m.outputs.map(spec) };
}
