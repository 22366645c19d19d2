/**
 * The models the bench measures, and the rows it feeds them. Built in: the demo scorer (cheap per
 * row, so the queue is the bound) and a 3×1024 MLP (ONNX Runtime is the bound, as with real
 * models). `--model FILE.onnx` replaces both with the user's model, which must have one input
 * whose non-batch dimensions are fixed: the bench has to make up rows for it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { JobData } from '../../infra/contracts/job.ts';
import type { ModelManifest, TensorSpec } from '../../infra/contracts/manifest.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import type { ModelRegistry } from '../../infra/registry/model-registry.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';

export interface BenchModel {
  /** Registry name. */
  name: string;
  bytes: Uint8Array;
}

/** Batch sizes raw ONNX Runtime and the worker's warm-up try. */
export const BENCH_BATCHES = [1, 8, 32, 128] as const;
export const BENCH_MAX_BATCH = 128;

export function builtInModels(): BenchModel[] {
  return [
    { name: 'demo', bytes: buildMlpModel({ features: 64 }) },
    { name: 'mlp-1024', bytes: buildMlpModel({ features: 256, hidden: 1024, layers: 3, seed: 5 }) },
  ];
}

export function userModel(file: string): BenchModel {
  const base = path
    .basename(file, path.extname(file))
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '');
  return { name: (base || 'model').slice(0, 64), bytes: new Uint8Array(readFileSync(file)) };
}

export async function publishBenchModel(registry: Pick<ModelRegistry, 'publish'>, model: BenchModel): Promise<ModelManifest> {
  const manifest = await registry.publish({
    name: model.name,
    version: '1',
    bytes: model.bytes,
    maxBatch: BENCH_MAX_BATCH,
    warmupBatches: [...BENCH_BATCHES],
    overwrite: true,
  });
  const problem = unbenchable(manifest);
  if (problem) throw new Error(`warmpool bench: ${model.name}: ${problem}`);
  return manifest;
}

/** Why the bench cannot make up rows for this model, or undefined when it can. */
export function unbenchable(manifest: Pick<ModelManifest, 'inputs'>): string | undefined {
  if (manifest.inputs.length !== 1) return `needs exactly one input (it has ${manifest.inputs.length})`;
  const input = manifest.inputs[0] as TensorSpec;
  if (input.shape.slice(1).some((d) => d < 1)) {
    return `input ${input.name} has a dynamic non-batch dimension (shape [${input.shape.join(', ')}]); fix it in the model`;
  }
  if (input.datatype === 'BYTES') return `input ${input.name} is BYTES; the bench makes up numeric rows only`;
  return undefined;
}

/** Values in one row of the input. */
export function rowWidth(spec: Pick<TensorSpec, 'shape'>): number {
  return spec.shape.slice(1).reduce((a, d) => a * Math.max(1, d), 1);
}

/**
 * `rows` rows of the model's input, different for each `seed` (so no two jobs hit the result
 * cache, and the worker cannot collapse them as duplicate rows), as the JSON of an OIP request:
 * floats in (-1, 1); integers and booleans 0/1, the bits of the seed (0 and 1 are indices any
 * embedding table accepts), distinct for rows of 20 values or more.
 */
export function benchInputs(manifest: Pick<ModelManifest, 'inputs'>, rows: number, seed: number): OipTensor[] {
  return manifest.inputs.map((spec) => {
    const n = rows * rowWidth(spec);
    // Row r of this request is row `seed + r` of an endless table.
    const width = rowWidth(spec);
    const bit = (k: number) => (((seed + Math.floor(k / width)) >>> ((k % width) % 20)) & 1) as 0 | 1;
    const data: Array<number | boolean> =
      spec.datatype === 'BOOL'
        ? Array.from({ length: n }, (_, k) => bit(k) === 1)
        : spec.datatype.startsWith('FP')
          ? Array.from({ length: n }, (_, k) =>
              k % width === 0 ? rowTag(seed + Math.floor(k / width)) : Math.round(Math.sin(seed * 31 + k) * 1e4) / 2e4,
            )
          : Array.from({ length: n }, (_, k) => bit(k));
    return { name: spec.name, datatype: spec.datatype, shape: [rows, ...spec.shape.slice(1)], data };
  });
}

/**
 * A float row's first value: the row's index in the endless table, exact in FP32 (an integer
 * below 2^24 over a power of two), so no two rows are equal and none is answered from the result
 * cache. The sine values alone collided now and then: rounded to 4 digits, sin(31·a + k) and
 * sin(31·b + k) agree for every k when 31·(a − b) is close enough to a multiple of 2π. Rows
 * 3,003,706… of the latency run repeated rows 1,000,028… of the warm-up (22 of them), were
 * answered from the cache without a BullMQ job, and the run waited for jobs that never existed.
 */
function rowTag(row: number): number {
  return (row % 2 ** 24) / 2 ** 24;
}

/** Job data as the API would enqueue it, for producers that skip HTTP (raw queue fills). */
export function benchJobData(manifest: ModelManifest, rows: number, seed: number, submittedAt: number): JobData {
  return {
    tenant: 'bench',
    model: manifest.name,
    version: manifest.version,
    inputs: benchInputs(manifest, rows, seed),
    submittedAt,
  };
}
