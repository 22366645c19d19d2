/**
 * `bulk_vs_raw_ort`: rows/s of a bulk scoring run (JSONL under an S3 prefix → parts under
 * another, DESIGN §7) through one real worker, against ONNX Runtime alone at its best
 * configuration. The run is started and driven by `warmpool bulk run` in a child process, as a
 * data team would run it; its rate is the run's own record (rows done / started → finished),
 * read back with `warmpool bulk status --json`, so the CLI's boot is not counted.
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { BulkRunView } from '../../infra/contracts/bulk.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { benchInputs, rowWidth } from './bench-models.ts';
import type { RawSweep } from './raw-ort.ts';
import type { BenchRow } from './report.ts';
import { BENCH_TENANT, type BenchContext, runRole, scopedEnv, spawnRole, waitForWorkers } from './services.ts';
import { boundedCount } from './stats.ts';

const DRIVER = fileURLToPath(new URL('../../infra/bulk/driver.ts', import.meta.url));
const ROWS_PER_OBJECT = 10_000;
const VALUES_PER_OBJECT = 2_000_000;

export interface BulkResult {
  rowsPerS: number;
  rows: number;
  chunkRows: number;
}

export async function measureBulkVsRawOrt(
  ctx: BenchContext,
  manifest: ModelManifest,
  raw: RawSweep | undefined,
  budget: { maxValues: number; seconds: number },
): Promise<BenchRow> {
  const name = `${manifest.name}.bulk_vs_raw_ort`;
  if (!existsSync(DRIVER)) {
    return { name, value: NaN, unit: 'ratio', detail: 'pending: bulk runs are not driven in this checkout yet (infra/bulk/driver.ts)' };
  }
  try {
    const rows = boundedCount(ctx.quick ? 20_000 : 100_000, {
      ...budget,
      valuesPerItem: manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0),
      ratePerS: raw?.best.rowsPerS ?? NaN,
      min: 1000,
    });
    const r = await measureBulk(ctx, manifest, rows);
    const best = raw?.best;
    return {
      name,
      value: best ? r.rowsPerS / best.rowsPerS : NaN,
      unit: 'ratio',
      detail: `${r.rows} rows JSONL → parts, chunks of ${r.chunkRows}: ${Math.round(r.rowsPerS)} rows/s vs raw batch ${best?.batch} × ${best?.threads} thread(s)`,
    };
  } catch (err) {
    return { name, value: NaN, unit: 'ratio', detail: `failed: ${errorMessage(err).split('\n')[0]}` };
  }
}

export async function measureBulk(ctx: BenchContext, manifest: ModelManifest, rows: number): Promise<BulkResult> {
  const runId = `bench-${Date.now().toString(36)}`;
  const { s3 } = loadConfig(ctx.env);
  const area = `${s3.prefix ? `${s3.prefix}/` : ''}bulk/${BENCH_TENANT}/`;
  // The bench tenant's bulk location (BULK_LOCATIONS): its runs may use this folder and no other.
  const { env, config } = scopedEnv(ctx, 'bulk', { BULK_LOCATIONS: `${BENCH_TENANT}:s3://${s3.bucket}/${area}` });
  const base = `${area}${runId}`;
  await writeInput(config.s3, `${base}/in/`, manifest, rows);
  const redis = createRedis(config.redisUrl);
  const worker = spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env);
  try {
    await waitForWorkers(redis, config, manifest.name, 'active');
    const url = (p: string) => `s3://${config.s3.bucket}/${base}/${p}/`;
    const args = ['--model', manifest.name, '--version', manifest.version, '--input', url('in'), '--output', url('out')];
    const run = await runRole(['bulk', 'run', ...args, '--run-id', runId, '--tenant', BENCH_TENANT], env, 600_000);
    if (run.code !== 0) throw new Error(`warmpool bulk run exited ${run.code}: ${run.stderr.trim().split('\n').at(-1) ?? ''}`);
    const status = await runRole(['bulk', 'status', runId, '--json', '--tenant', BENCH_TENANT], env, 60_000);
    const view = JSON.parse(status.stdout) as BulkRunView;
    if (view.status !== 'succeeded') throw new Error(`bulk run ${view.status}: ${view.error?.message ?? 'no reason given'}`);
    const spanMs = (view.finishedAt ?? NaN) - (view.startedAt ?? view.createdAt);
    return { rowsPerS: view.progress.rowsDone / (spanMs / 1000), rows: view.progress.rowsDone, chunkRows: view.chunkRows };
  } finally {
    await worker.stop();
    await closeRedis(redis);
  }
}

/**
 * `rows` JSONL rows (`{"id", "<input>": row, …}`) under `prefix`, in objects of ROWS_PER_OBJECT
 * rows or VALUES_PER_OBJECT values, whichever is fewer: one object is built in memory at a time.
 */
async function writeInput(s3: ReturnType<typeof scopedEnv>['config']['s3'], prefix: string, manifest: ModelManifest, rows: number) {
  const store = createS3ObjectStore(s3);
  try {
    const width = manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0);
    const perObject = Math.max(1, Math.min(ROWS_PER_OBJECT, Math.floor(VALUES_PER_OBJECT / width)));
    for (let start = 0, part = 0; start < rows; start += perObject, part++) {
      const lines: string[] = [];
      for (let i = start; i < Math.min(rows, start + perObject); i++) {
        const row: Record<string, unknown> = { id: i };
        for (const tensor of benchInputs(manifest, 1, i)) row[tensor.name] = nest(tensor.data, tensor.shape.slice(1));
        lines.push(JSON.stringify(row));
      }
      await store.put(`${prefix}in-${String(part).padStart(4, '0')}.jsonl`, `${lines.join('\n')}\n`);
    }
  } finally {
    store.close();
  }
}

/** Flat row-major values as nested arrays of `dims` (a scalar for no dims), as JSONL rows carry them. */
export function nest<T>(flat: readonly T[], dims: readonly number[]): unknown {
  const [first, ...rest] = dims;
  if (first === undefined) return flat[0];
  const size = rest.reduce((a, d) => a * d, 1);
  return Array.from({ length: first }, (_, i) => nest(flat.slice(i * size, (i + 1) * size), rest));
}
