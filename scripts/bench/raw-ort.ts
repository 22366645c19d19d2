/**
 * ONNX Runtime alone, in this process's main thread, on the same synthetic rows the worker warms
 * up on: the raw limit every worker row is compared with. Every (intra-op threads, batch size)
 * cell is measured, because the target is the best raw configuration, not the worker's own.
 */
import * as ort from 'onnxruntime-node';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { toModelTensor } from '../../worker/engine/planned-engine.ts';
import { representativeInputs } from '../../worker/representative-inputs.ts';
import { maxBy } from './stats.ts';

export interface RawCell {
  threads: number;
  batch: number;
  rowsPerS: number;
  /** Median forward pass at this cell, ms. */
  p50Ms: number;
}

export interface RawSweep {
  cells: RawCell[];
  best: RawCell;
  /** Batch 1 at its best thread count. */
  batch1: RawCell;
  /** ms for InferenceSession.create, per thread count. */
  createMs: Map<number, number>;
}

export interface RawSweepOptions {
  batches: readonly number[];
  threads: readonly number[];
  /** Timed run per cell, after one untimed pass. */
  cellMs: number;
}

/** Session options the worker's engine uses (worker/engine/ort-thread.ts), at `threads`. */
export function sessionOptions(threads: number): ort.InferenceSession.SessionOptions {
  return { executionProviders: ['cpu'], graphOptimizationLevel: 'all', ...(threads > 0 ? { intraOpNumThreads: threads } : {}) };
}

/** ORT tensors for `rows` rows of the manifest's inputs (the warm-up's representative rows). */
export function ortFeeds(manifest: Pick<ModelManifest, 'inputs'>, rows: number): Record<string, ort.Tensor> {
  const feeds: Record<string, ort.Tensor> = {};
  const axes = new Map(manifest.inputs.map((s) => [s.name, s.batchAxis]));
  for (const [name, rowsTensor] of Object.entries(representativeInputs(manifest as ModelManifest, rows))) {
    // In the model's own layout (a model that keeps its rows elsewhere: batch-axes.ts).
    const t = toModelTensor(name, rowsTensor, axes.get(name));
    // EngineData is one of the typed arrays (or string[]) ort.Tensor accepts for that type.
    feeds[name] = new ort.Tensor(t.type, t.data as ort.Tensor.DataType, t.dims);
  }
  return feeds;
}

export async function rawOrtSweep(modelPath: string, manifest: ModelManifest, options: RawSweepOptions): Promise<RawSweep> {
  const cells: RawCell[] = [];
  const createMs = new Map<number, number>();
  for (const threads of options.threads) {
    const started = performance.now();
    const session = await ort.InferenceSession.create(modelPath, sessionOptions(threads));
    createMs.set(threads, performance.now() - started);
    try {
      for (const batch of options.batches) cells.push(await measureCell(session, manifest, threads, batch, options.cellMs));
    } finally {
      await session.release();
    }
  }
  const best = maxBy(cells, (c) => c.rowsPerS);
  const batch1 = maxBy(
    cells.filter((c) => c.batch === 1),
    (c) => c.rowsPerS,
  );
  if (!best || !batch1) throw new Error('raw ONNX Runtime sweep measured nothing (batch 1 must be among the sizes)');
  return { cells, best, batch1, createMs };
}

async function measureCell(
  session: ort.InferenceSession,
  manifest: ModelManifest,
  threads: number,
  batch: number,
  cellMs: number,
): Promise<RawCell> {
  const feeds = ortFeeds(manifest, batch);
  await session.run(feeds);
  const samples: number[] = [];
  const started = performance.now();
  let now = started;
  // At least 5 passes, so a slow model's cell still has a median.
  while (now - started < cellMs || samples.length < 5) {
    await session.run(feeds);
    const after = performance.now();
    samples.push(after - now);
    now = after;
  }
  samples.sort((a, b) => a - b);
  const rowsPerS = (batch * samples.length) / ((now - started) / 1000);
  return { threads, batch, rowsPerS, p50Ms: samples[Math.floor(samples.length / 2)] ?? NaN };
}

/** The cell at (threads, batch), if measured. */
export function cellAt(sweep: Pick<RawSweep, 'cells'>, threads: number, batch: number): RawCell | undefined {
  return sweep.cells.find((c) => c.threads === threads && c.batch === batch);
}

/** The best cell at `threads` intra-op threads or fewer (at any count when `threads` < 1). */
export function bestCellAt(sweep: Pick<RawSweep, 'cells'>, threads: number): RawCell | undefined {
  return maxBy(
    sweep.cells.filter((c) => threads < 1 || c.threads <= threads),
    (c) => c.rowsPerS,
  );
}

/** `1:…  8:…` per thread count, for the progress log. */
export function describeSweep(sweep: RawSweep): string {
  const byThreads = new Map<number, RawCell[]>();
  for (const c of sweep.cells) byThreads.set(c.threads, [...(byThreads.get(c.threads) ?? []), c]);
  return [...byThreads]
    .map(([t, cells]) => `${t} thread(s): ${cells.map((c) => `b${c.batch} ${Math.round(c.rowsPerS)}`).join(' ')}`)
    .join(' | ');
}
