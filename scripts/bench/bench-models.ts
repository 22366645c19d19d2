/**
 * The models the bench measures, and the rows it feeds them. Built in, one of each regime: the
 * demo scorer (cheap per row, so the queue tier is the bound) and a small CNN (ONNX Runtime is
 * the bound: raw rows/s under half of what the minimal stack moves with its bodies). `--model
 * FILE.onnx` replaces both with the user's model; its dynamic non-batch dimensions are pinned
 * with `--input-shape` (input-shapes.ts), because the bench has to make up rows for it.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { QueuedRequest } from '../../infra/contracts/entry.ts';
import type { ModelManifest, TensorSpec } from '../../infra/contracts/manifest.ts';
import type { Datatype, OipTensor } from '../../infra/contracts/oip.ts';
import { fromJsonData } from '../../infra/contracts/packed-tensors.ts';
import type { ModelRegistry } from '../../infra/registry/model-registry.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import { buildCnnModel, buildMlpModel } from '../fixtures/onnx-models.ts';
import { parseInputShapes, pinInputShapes, pinModelInputs } from './input-shapes.ts';

export interface BenchModel {
  /** Registry name. */
  name: string;
  bytes: Uint8Array;
}

/** Batch sizes raw ONNX Runtime and the worker's warm-up try. */
export const BENCH_BATCHES = [1, 8, 32, 128] as const;
export const BENCH_MAX_BATCH = 128;

/**
 * The batch sizes the bench runs a model at: BENCH_BATCHES, or for an export with a fixed batch
 * (`batching.fixedBatch`) that one size, the only one ONNX Runtime takes.
 */
export function benchBatches(fixedBatch: number | undefined): readonly number[] {
  return fixedBatch === undefined ? BENCH_BATCHES : [fixedBatch];
}

/** How the bench serves the model, in words, for its report. */
export function benchMode(manifest: Pick<ModelManifest, 'inputs' | 'batching'>): string {
  const fixedBatch = manifest.batching.fixedBatch;
  if (manifest.inputs.every((i) => i.batchAxis === 'none'))
    return 'unbatched: one request a forward pass, its shapes exact (the model has no batch axis); several sessions where warm-up finds the cores for them';
  if (fixedBatch !== undefined)
    return `fixed batch of ${fixedBatch}: ${fixedBatch} row a forward pass, no micro-batching (the model takes no other first dimension)`;
  const moved = manifest.inputs.filter((i) => i.batchAxis !== undefined && i.batchAxis !== 0);
  if (moved.length === 0) return `batched: passes of up to ${BENCH_MAX_BATCH} rows`;
  const axes = moved.map((i) => (i.batchAxis === 'none' ? `${i.name} one value a pass` : `${i.name} on axis ${i.batchAxis}`)).join(', ');
  return `batched on each input's own axis (${axes}): passes of up to ${BENCH_MAX_BATCH} rows`;
}

/**
 * The CNN's conv width (channels 144, 288, 576; ~390 MFLOP a row). Sized on this 2-core machine
 * (AVX-512), where raw rows/s fall with width²: at width 64, 1,300 (1 thread) and 2,600–2,800
 * (2 threads); at 96, 600 and ~1,100; so ~500 at 144 with 2 threads, against 1,100–1,350 requests/s
 * for the minimal stack carrying the CNN's single-row bodies (3×32×32 floats, ~25 KB of JSON).
 * Each run prints the measured share and the regime it implies (e2e_vs_minimal_stack's detail).
 */
export const CNN_WIDTH = 144;

export function builtInModels(): BenchModel[] {
  return [
    { name: 'demo', bytes: buildMlpModel({ features: 64 }) },
    { name: 'cnn', bytes: buildCnnModel({ size: 32, width: CNN_WIDTH }) },
  ];
}

/**
 * The user's model, its dynamic non-batch dimensions fixed to `inputShape` (`3,48,192`, or
 * `NAME:3,48,192;NAME2:…`). Throws InvalidInputError naming the input whose dimension is
 * dynamic and not given, before anything is started.
 */
export function userModel(file: string, inputShape?: string): BenchModel {
  const base = path
    .basename(file, path.extname(file))
    .replace(/[^A-Za-z0-9_-]/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '');
  const bytes = new Uint8Array(readFileSync(file));
  const { inputs } = readOnnxMetadata(bytes);
  const pinned = pinInputShapes(inputs, inputShape === undefined ? undefined : parseInputShapes(inputShape));
  const changed = pinned.some((p, i) => p.shape.join() !== inputs[i]?.shape.join());
  return { name: (base || 'model').slice(0, 64), bytes: changed ? pinModelInputs(bytes, pinned) : bytes };
}

export async function publishBenchModel(registry: Pick<ModelRegistry, 'publish'>, model: BenchModel): Promise<ModelManifest> {
  const batches = benchBatches(readOnnxMetadata(model.bytes).fixedBatch);
  const manifest = await registry.publish({
    name: model.name,
    version: '1',
    bytes: model.bytes,
    maxBatch: Math.max(...batches),
    warmupBatches: [...batches],
    overwrite: true,
  });
  const problem = unbenchable(manifest);
  if (problem) throw new Error(`warmpool bench: ${model.name}: ${problem}`);
  return manifest;
}

/** Why the bench cannot make up rows for this model, or undefined when it can. */
export function unbenchable(manifest: Pick<ModelManifest, 'inputs'>): string | undefined {
  for (const input of manifest.inputs) {
    if (input.shape.slice(1).some((d) => d < 1)) {
      return `input ${input.name} has a dynamic non-batch dimension (shape [${input.shape.join(', ')}]); give it with --input-shape`;
    }
    if (input.datatype === 'BYTES') return `input ${input.name} is BYTES; the bench makes up numeric rows only`;
  }
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
    const width = rowWidth(spec);
    // An input with no batch axis carries one value a pass (batch-axes.ts): every row gets the first row's.
    const value =
      spec.batchAxis === 'none'
        ? (k: number) => benchValue(spec.datatype, width, seed, k % width)
        : (k: number) => benchValue(spec.datatype, width, seed, k);
    const data = Array.from({ length: rows * width }, (_, k) => value(k));
    return { name: spec.name, datatype: spec.datatype, shape: [rows, ...spec.shape.slice(1)], data };
  });
}

/**
 * Value `k` of the flat data `benchInputs` makes from `seed` for an input of `width` values a
 * row: row r of the request is row `seed + r` of an endless table.
 */
export function benchValue(datatype: Datatype, width: number, seed: number, k: number): number | boolean {
  const row = seed + Math.floor(k / width);
  const j = k % width;
  if (datatype.startsWith('FP')) return j === 0 ? rowTag(row) : Math.round(Math.sin(seed * 31 + k) * 1e4) / 2e4;
  const bit = ((row >>> (j % 20)) & 1) as 0 | 1;
  return datatype === 'BOOL' ? bit === 1 : bit;
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

/** A request as the API hands it to the job queue (typed arrays, as `fromJsonData` makes them), for producers that skip HTTP. */
export function benchRequest(manifest: ModelManifest, rows: number, seed: number, submittedAt: number): QueuedRequest {
  const inputs = benchInputs(manifest, rows, seed).map((t) => ({
    name: t.name,
    datatype: t.datatype,
    shape: t.shape,
    data: fromJsonData(t.datatype, t.data),
  }));
  return { tenant: 'bench', model: manifest.name, version: manifest.version, submittedAt, rows, inputs };
}
