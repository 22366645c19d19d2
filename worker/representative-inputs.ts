/**
 * The synthetic inputs warm-up and the benchmarks run a model with: deterministic values each
 * datatype holds, at the shapes warm-up settled (worker/settle-shapes.ts).
 */
import { toRowLayout } from '../infra/contracts/batch-axes.ts';
import { DATATYPE_INFO, newElements } from '../infra/contracts/datatypes.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import type { InputShapes } from './batch-profile.ts';
import type { EngineTensor } from './engine/engine.ts';
import { datatypeToDtype, elementCount, encodeHalf } from './engine/tensor-codec.ts';

/**
 * Deterministic synthetic inputs for `rows` rows: each input's non-batch dimensions from
 * `shapes`, else its own with dynamic ones 1; floats in [-1, 1); integers 0 (the one index every
 * embedding or gather table accepts); bools alternating; strings a short word.
 */
export function representativeInputs(manifest: ModelManifest, rows: number, shapes: InputShapes = {}): Record<string, EngineTensor> {
  const inputs: Record<string, EngineTensor> = {};
  for (const spec of manifest.inputs) {
    const rest = Object.hasOwn(shapes, spec.name) ? shapes[spec.name] : undefined;
    const dims = rest ?? spec.shape.slice(1).map((d) => (d < 0 ? 1 : d));
    // An input with no batch axis carries one value for the whole pass (batch-axes.ts): one row of it, repeated.
    inputs[spec.name] =
      spec.batchAxis === 'none' ? repeatedRow(syntheticTensor(spec, [1, ...dims]), rows) : syntheticTensor(spec, [rows, ...dims]);
  }
  return inputs;
}

function repeatedRow(row: EngineTensor, rows: number): EngineTensor {
  return { type: row.type, dims: [rows, ...row.dims.slice(1)], data: toRowLayout(row.data, row.dims.slice(1), 'none', rows) };
}

/** Fresh buffers with the same values: a run may detach the ones it is given. */
export function copyInputs(inputs: Record<string, EngineTensor>): Record<string, EngineTensor> {
  const copy: Record<string, EngineTensor> = {};
  for (const [name, t] of Object.entries(inputs)) copy[name] = { type: t.type, dims: [...t.dims], data: t.data.slice() };
  return copy;
}

function syntheticTensor(spec: TensorSpec, dims: number[]): EngineTensor {
  const n = elementCount(dims);
  const data = newElements(spec.datatype, n);
  const next = unitRandom(0x5eed);
  // Values the datatype holds (the table's kind says which): floats in [-1, 1), alternating
  // bools, a word for strings, and integers left at 0.
  const kind = DATATYPE_INFO[spec.datatype].kind;
  for (let i = 0; i < n; i++) {
    if (kind === 'float') (data as Float32Array | Float64Array)[i] = next();
    else if (kind === 'half') (data as Uint16Array)[i] = encodeHalf(next());
    else if (kind === 'bool') (data as Uint8Array)[i] = i % 2;
    else if (kind === 'bytes') (data as string[])[i] = 'warmup';
  }
  return { type: datatypeToDtype(spec.datatype), dims, data };
}

/** A small seeded generator of values in [-1, 1): the same inputs on every worker. */
function unitRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  };
}
