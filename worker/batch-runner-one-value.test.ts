/**
 * One value a pass (issue 30): rows that carry other values of an input with no batch axis never
 * share a forward pass, and each slice gets its own rows' answers back in order. The engine is a
 * recorder that computes y = x · k row by row, where k is the pass's single value.
 */
import { describe, expect, it } from 'vitest';
import { createBatchRunner, type Slice } from './batch-runner.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';

interface Pass {
  rows: number;
  k: number[];
}

function recorder(): InferenceEngine & { passes: Pass[] } {
  const passes: Pass[] = [];
  return {
    passes,
    load: async () => ({ inputNames: ['x', 'k'], outputNames: ['y'], loadMs: 0 }),
    close: async () => undefined,
    run: async (inputs) => {
      const x = inputs.x as EngineTensor;
      const k = inputs.k as EngineTensor;
      const rows = x.dims[0] ?? 0;
      passes.push({ rows, k: Array.from(k.data as Float32Array) });
      const first = (k.data as Float32Array)[0] as number;
      const y = Float32Array.from(x.data as Float32Array, (v) => v * first);
      return { y: { type: 'float32', dims: [rows, 1], data: y } };
    },
  };
}

/** A slice of rows x = values, k repeated per row as the API's row layout carries it. */
function slice(xs: number[], ks: number[]): Slice {
  return {
    rows: xs.length,
    inputs: {
      x: { type: 'float32', dims: [xs.length, 1], data: Float32Array.from(xs) },
      k: { type: 'float32', dims: [ks.length], data: Float32Array.from(ks) },
    },
  };
}

describe('the batch runner with an input that has no batch axis', () => {
  it('never puts rows with different values of it in one pass', async () => {
    const engine = recorder();
    const run = createBatchRunner(engine, ['x', 'k'], ['y'], undefined, ['k']);
    const slices = [slice([1, 2], [10, 10]), slice([3], [20]), slice([4, 5, 6], [10, 20, 20]), slice([7], [10])];
    const results = await run(slices, 7);
    for (const pass of engine.passes) expect(new Set(pass.k).size).toBe(1);
    // k = 10: rows 1, 2, 4, 7; k = 20: rows 3, 5, 6. Two passes, not four.
    expect(engine.passes.map((p) => [p.k[0], p.rows])).toEqual([
      [10, 4],
      [20, 3],
    ]);
    expect(results.map((r) => Array.from(r.outputs.y?.data as Float32Array))).toEqual([[10, 20], [60], [40, 100, 120], [70]]);
    expect(results.map((r) => r.outputs.y?.dims)).toEqual([
      [2, 1],
      [1, 1],
      [3, 1],
      [1, 1],
    ]);
  });

  it('runs slices that agree in one pass, untouched', async () => {
    const engine = recorder();
    const run = createBatchRunner(engine, ['x', 'k'], ['y'], undefined, ['k']);
    const results = await run([slice([1, 2], [5, 5]), slice([3], [5])], 3);
    expect(engine.passes).toEqual([{ rows: 3, k: [5, 5, 5] }]);
    expect(results.map((r) => Array.from(r.outputs.y?.data as Float32Array))).toEqual([[5, 10], [15]]);
  });

  it('batches across values when no input is marked', async () => {
    const engine = recorder();
    const run = createBatchRunner(engine, ['x', 'k'], ['y'], undefined);
    await run([slice([1], [5]), slice([2], [6])], 2);
    expect(engine.passes).toHaveLength(1);
  });
});
