/**
 * Reads what a manifest records about a model (DESIGN §3) from the ONNX ModelProto itself:
 * input and output names, OIP datatypes and shapes, opset and producer.
 *
 * warmpool batches rows along the first axis, so every input and output must have a dynamic
 * first dimension; a model that fixes it is refused at publish time with a message naming the
 * tensor, rather than failing later inside a worker.
 */
import { createRequire } from 'node:module';
import type { TensorSpec } from '../contracts/manifest.ts';
import type { Datatype } from '../contracts/oip.ts';
import { errorMessage, InvalidInputError } from '../kernel/errors.ts';

const require = createRequire(import.meta.url);
// onnx-proto is CommonJS (protobufjs static classes); its bundled .d.ts gives the types.
const { onnx } = require('onnx-proto') as typeof import('onnx-proto');

type ValueInfo = import('onnx-proto').onnx.IValueInfoProto;
type Dim = import('onnx-proto').onnx.TensorShapeProto.IDimension;

export interface OnnxMetadata {
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  opset?: number;
  producer?: string;
}

/** ONNX TensorProto.DataType → OIP datatype; anything absent here is not servable. */
const ELEM_TO_DATATYPE: Record<number, Datatype> = {
  1: 'FP32',
  2: 'UINT8',
  3: 'INT8',
  4: 'UINT16',
  5: 'INT16',
  6: 'INT32',
  7: 'INT64',
  8: 'BYTES',
  9: 'BOOL',
  10: 'FP16',
  11: 'FP64',
  12: 'UINT32',
  13: 'UINT64',
};

const ELEM_NAMES: Record<number, string> = { 0: 'UNDEFINED', 14: 'COMPLEX64', 15: 'COMPLEX128', 16: 'BFLOAT16' };

export function readOnnxMetadata(bytes: Uint8Array): OnnxMetadata {
  const model = decodeModel(bytes);
  const graph = model.graph;
  if (!graph) throw notOnnx('it has no graph');
  // Older exporters (IR < 4) list initializers among the graph inputs; they are weights, not inputs.
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name ?? ''));
  const inputs = (graph.input ?? []).filter((v) => !initializers.has(v.name ?? '')).map((v) => tensorSpec(v, 'input'));
  if (inputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no inputs');
  const outputs = (graph.output ?? []).map((v) => tensorSpec(v, 'output'));
  if (outputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no outputs');
  const opset = defaultOpset(model.opsetImport ?? []);
  const producer = [model.producerName, model.producerVersion].filter(Boolean).join(' ');
  return {
    inputs,
    outputs,
    ...(opset !== undefined ? { opset } : {}),
    ...(producer ? { producer } : {}),
  };
}

function decodeModel(bytes: Uint8Array): import('onnx-proto').onnx.ModelProto {
  if (bytes.length === 0) throw notOnnx('the file is empty');
  try {
    return onnx.ModelProto.decode(bytes);
  } catch (err) {
    throw notOnnx(`it does not decode as an ONNX ModelProto (${errorMessage(err)})`, err);
  }
}

function notOnnx(why: string, cause?: unknown): InvalidInputError {
  return new InvalidInputError('invalid_model', `not an ONNX model: ${why}`, cause === undefined ? {} : { cause });
}

function tensorSpec(v: ValueInfo, role: 'input' | 'output'): TensorSpec {
  const name = v.name ?? '';
  const tensorType = v.type?.tensorType;
  if (!tensorType) {
    const kind = v.type ? (Object.keys(v.type)[0] ?? 'unknown') : 'untyped';
    throw new InvalidInputError('invalid_model', `${role} "${name}" is not a tensor (${kind}); only tensor ${role}s can be served`);
  }
  const elem = tensorType.elemType ?? 0;
  const datatype = ELEM_TO_DATATYPE[elem];
  if (!datatype) {
    const type = ELEM_NAMES[elem] ?? `element type ${elem}`;
    throw new InvalidInputError('invalid_model', `${role} "${name}" has type ${type}, which warmpool cannot serve`);
  }
  if (!tensorType.shape) {
    throw new InvalidInputError('invalid_model', `${role} "${name}" has no shape; export the model with shape information`);
  }
  const shape = (tensorType.shape.dim ?? []).map(dimSize);
  if (shape.length === 0) {
    throw new InvalidInputError('invalid_model', `${role} "${name}" is a scalar; it needs a first (batch) axis to be batched`);
  }
  if (shape[0] !== -1) {
    throw new InvalidInputError(
      'invalid_model',
      `${role} "${name}" has a fixed first dimension (${shape[0]}), so the model cannot be batched; export it with a dynamic batch axis`,
    );
  }
  return { name, datatype, shape };
}

/** A fixed size, or -1 for a symbolic (`dim_param`) or unknown dimension. */
function dimSize(d: Dim): number {
  const value = (d as { value?: string }).value; // protobufjs names the set member of the oneof
  if (value !== 'dimValue' || d.dimValue === null || d.dimValue === undefined) return -1;
  const n = Number(d.dimValue);
  return Number.isSafeInteger(n) && n >= 0 ? n : -1;
}

/** The default-domain ('' or 'ai.onnx') opset version, the one that says which operators mean what. */
function defaultOpset(imports: import('onnx-proto').onnx.IOperatorSetIdProto[]): number | undefined {
  const entry = imports.find((o) => !o.domain || o.domain === 'ai.onnx');
  return entry?.version === null || entry?.version === undefined ? undefined : Number(entry.version);
}
