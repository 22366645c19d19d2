/**
 * The engine a model that keeps its rows elsewhere than axis 0 is run through (issue 30's
 * batching plan, infra/contracts/batch-axes.ts): the worker hands it row-layout tensors, as it
 * does every engine, and it feeds ONNX Runtime the model's own layout — a batched input's rows
 * moved back to its axis, an input with no batch axis once (every row of a pass carries the same
 * value of it: the batch runner keeps other values out) — and turns each output back into row
 * layout. For a model whose every tensor batches on axis 0 it is the engine itself.
 */
import { type BatchAxis, isMoved, modelShape, rowShape, rowsAlike, toModelLayout, toRowLayout } from '../../infra/contracts/batch-axes.ts';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import type { EngineData, EngineTensor, InferenceEngine } from './engine.ts';

export function plannedEngine(engine: InferenceEngine, inputs: readonly TensorSpec[], outputs: readonly TensorSpec[]): InferenceEngine {
  const moved = (specs: readonly TensorSpec[]) =>
    new Map(specs.flatMap((s) => (isMoved(s.batchAxis) ? [[s.name, s.batchAxis] as [string, BatchAxis]] : [])));
  const inputAxes = moved(inputs);
  const outputAxes = moved(outputs);
  if (inputAxes.size === 0 && outputAxes.size === 0) return engine;
  return {
    load: (modelPath, options) => engine.load(modelPath, options),
    close: () => engine.close(),
    async run(feeds, outputNames) {
      let rows = 1;
      const modelFeeds: Record<string, EngineTensor> = {};
      for (const [name, t] of Object.entries(feeds)) {
        rows = t.dims[0] ?? 1;
        modelFeeds[name] = toModelTensor(name, t, inputAxes.get(name));
      }
      const answers = await engine.run(modelFeeds, outputNames);
      const out: Record<string, EngineTensor> = {};
      for (const [name, t] of Object.entries(answers)) out[name] = toRowTensor(t, outputAxes.get(name), rows);
      return out;
    },
  };
}

/** A row-layout tensor as the model takes it (the bench's raw runs share it). */
export function toModelTensor(name: string, t: EngineTensor, axis: BatchAxis | undefined): EngineTensor {
  if (!isMoved(axis)) return t;
  if (axis === 'none' && !rowsAlike(t.data, t.dims[0] ?? 1)) {
    // The batch runner groups rows by these values; rows that differ here are warmpool's bug.
    throw new Error(`input "${name}" has no batch axis, yet the rows of one pass carry different values of it`);
  }
  return { type: t.type, dims: modelShape(t.dims, axis), data: toModelLayout(t.data, t.dims, axis) as EngineData };
}

/** An output in the model's layout into row layout: `rows` rows (one value repeated when it has no batch axis). */
export function toRowTensor(t: EngineTensor, axis: BatchAxis | undefined, rows: number): EngineTensor {
  if (!isMoved(axis)) return t;
  return { type: t.type, dims: rowShape(t.dims, axis, rows), data: toRowLayout(t.data, t.dims, axis, rows) as EngineData };
}
