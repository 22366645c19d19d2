/**
 * A bulk chunk job's inputs → engine tensors. Chunks carry numeric inputs packed
 * (infra/contracts/binary-tensor.ts), which the OIP validator rightly refuses, so they get the same
 * manifest checks here instead: every model input once, its datatype, its rank and fixed dims,
 * the same rows ≥ 1 throughout. Element checks happen while decoding (tensor-codec.ts). Any
 * failure is invalid input: the chunk is refused, not retried.
 */
import { type BinaryTensor, isBinaryTensor } from '../infra/contracts/binary-tensor.ts';
import type { JobData } from '../infra/contracts/job.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import type { OipTensor } from '../infra/contracts/oip.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { EngineTensor } from './engine/engine.ts';
import { decodeBinaryTensor, oipToEngine } from './engine/tensor-codec.ts';

/** Whether a job's inputs need this path: a bulk chunk with at least one packed input. */
export function hasBinaryInputs(data: Pick<JobData, 'inputs' | 'bulk'>): boolean {
  return data.bulk !== undefined && data.inputs.some(isBinaryTensor);
}

export function decodeBulkInputs(
  inputs: ReadonlyArray<OipTensor | BinaryTensor>,
  manifest: Pick<ModelManifest, 'inputs'>,
): { tensors: Record<string, EngineTensor>; rows: number } {
  if (inputs.length !== manifest.inputs.length) {
    fail(`the chunk has ${inputs.length} inputs, the model ${manifest.inputs.length}`);
  }
  const tensors: Record<string, EngineTensor> = {};
  let rows: number | undefined;
  for (const spec of manifest.inputs) {
    const found = inputs.filter((t) => t.name === spec.name);
    const t = found[0];
    if (!t || found.length > 1) fail(`input "${spec.name}" must appear exactly once`);
    checkShape(t, spec);
    const tensorRows = t.shape[0] as number;
    if (rows !== undefined && tensorRows !== rows) fail(`input "${t.name}" has ${tensorRows} rows, the others ${rows}`);
    rows = tensorRows;
    tensors[spec.name] = isBinaryTensor(t) ? decodeBinaryTensor(t) : oipToEngine(t);
  }
  return { tensors, rows: rows ?? 0 };
}

function checkShape(t: OipTensor | BinaryTensor, spec: TensorSpec): void {
  if (t.datatype !== spec.datatype) fail(`input "${t.name}": expected datatype ${spec.datatype}, got ${String(t.datatype)}`);
  const shape: unknown = t.shape;
  if (!Array.isArray(shape) || shape.length !== spec.shape.length) {
    fail(`input "${t.name}": expected rank ${spec.shape.length} (shape [${spec.shape.join(', ')}])`);
  }
  shape.forEach((d: unknown, axis) => {
    const want = spec.shape[axis] as number;
    const ok = Number.isSafeInteger(d) && (d as number) >= (axis === 0 ? 1 : 0) && (axis === 0 || want < 0 || d === want);
    if (!ok) fail(`input "${t.name}": shape [${shape.join(', ')}] does not fit [${spec.shape.join(', ')}]`);
  });
}

function fail(message: string): never {
  throw new InvalidInputError('invalid_chunk', message);
}
