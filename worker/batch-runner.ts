/**
 * One forward pass over many jobs' rows: concatenate each input along axis 0, run, split each
 * output back by the rows each slice brought. This is the `run` the micro-batcher calls.
 */
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { concatRows, splitRows } from './engine/tensor-codec.ts';

/** A job's rows (or a slice of a big job's rows) as engine tensors, by input name. */
export interface Slice {
  inputs: Record<string, EngineTensor>;
  rows: number;
}

export interface SliceResult {
  outputs: Record<string, EngineTensor>;
  /** Wall time of the forward pass that carried this slice. */
  inferMs: number;
  /** Rows in that forward pass. */
  batchRows: number;
}

export type BatchObserver = (e: { rows: number; items: number; inferMs: number }) => void;

export function createBatchRunner(
  engine: InferenceEngine,
  inputNames: string[],
  outputNames: string[],
  observe?: BatchObserver,
): (slices: Slice[], rows: number) => Promise<SliceResult[]> {
  return async (slices, rows) => {
    const feeds: Record<string, EngineTensor> = {};
    for (const name of inputNames) {
      const parts = slices.map((s) => s.inputs[name]);
      if (parts.some((p) => p === undefined)) throw new Error(`input "${name}" missing from a slice`);
      feeds[name] = parts.length === 1 ? (parts[0] as EngineTensor) : concatRows(parts as EngineTensor[]);
    }
    const started = performance.now();
    const outputs = await engine.run(feeds, outputNames);
    const inferMs = performance.now() - started;
    observe?.({ rows, items: slices.length, inferMs });

    const rowCounts = slices.map((s) => s.rows);
    const perSlice: Array<Record<string, EngineTensor>> = slices.map(() => ({}));
    for (const name of outputNames) {
      const out = outputs[name];
      if (!out) throw new Error(`model produced no output "${name}"`);
      if (out.dims[0] !== rows) {
        throw new Error(`output "${name}" has ${out.dims[0]} rows for ${rows} input rows: its first axis is not the batch axis`);
      }
      splitRows(out, rowCounts).forEach((part, i) => {
        (perSlice[i] as Record<string, EngineTensor>)[name] = part;
      });
    }
    return perSlice.map((o) => ({ outputs: o, inferMs, batchRows: rows }));
  };
}
