/**
 * Reads what a manifest records about a model (DESIGN §3) from the ONNX ModelProto itself:
 * input and output names, OIP datatypes and shapes, opset and producer.
 *
 * warmpool batches rows along the first axis, so every input and output must have a dynamic
 * first dimension — or, for a model exported with a fixed batch of 1, every input a first
 * dimension of 1 (and every output 1 or dynamic): such a model is served one row a forward pass
 * (`fixedBatch: 1`), its first axis recorded as the batch axis like any other's, so a request of
 * several rows runs as several passes. Anything else is refused at publish time with a message
 * naming the tensor, rather than failing later inside a worker.
 *
 * A model must also carry all its weights (issue 20). ONNX external data names a file that ONNX
 * Runtime opens relative to the model's own folder: in the workers' shared, content-addressed
 * cache that folder holds every other model, so a publisher could make a model whose weights are
 * another model's file (or any file the worker can read) and serve what it computes from them.
 * Every tensor is looked at, wherever it hides: initializers, sparse initializers, Constant and
 * other node attributes, subgraphs (If, Loop, Scan), functions and training graphs.
 */
import { createRequire } from 'node:module';
import { datatypeOfOnnxElem } from '../contracts/datatypes.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
import { errorMessage, InvalidInputError } from '../kernel/errors.ts';

const require = createRequire(import.meta.url);
// onnx-proto is CommonJS (protobufjs static classes); its bundled .d.ts gives the types. Loaded at
// the first decode, not at import: a worker's warm-cache start decodes nothing (its model was
// checked when cached), and the ~30 ms load was part of every worker's boot.
let onnxProto: typeof import('onnx-proto').onnx | undefined;
function onnxLib(): typeof import('onnx-proto').onnx {
  onnxProto ??= (require('onnx-proto') as typeof import('onnx-proto')).onnx;
  return onnxProto;
}

type ValueInfo = import('onnx-proto').onnx.IValueInfoProto;
type Tensor = import('onnx-proto').onnx.ITensorProto;
type SparseTensor = import('onnx-proto').onnx.ISparseTensorProto;
type Graph = import('onnx-proto').onnx.IGraphProto;
type Node = import('onnx-proto').onnx.INodeProto;
type Dim = import('onnx-proto').onnx.TensorShapeProto.IDimension;

export interface OnnxMetadata {
  /** Every first dimension is the batch axis (-1), also for a fixed-batch export. */
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  /** The model fixes its batch dimension at this size (1): every forward pass carries exactly that many rows. */
  fixedBatch?: number;
  opset?: number;
  producer?: string;
}

/** Names of the ONNX element types that no datatype has (datatypes.ts maps the rest), for the refusal. */
const ELEM_NAMES: Record<number, string> = { 0: 'UNDEFINED', 14: 'COMPLEX64', 15: 'COMPLEX128', 16: 'BFLOAT16' };

export interface ReadOptions {
  /**
   * The outputs to serve, by name, in this order (`--outputs label,probabilities`): the others,
   * tensors or not, are left out of the manifest and never fetched. Absent: every output, each
   * of which must then be a tensor.
   */
  outputs?: readonly string[];
}

export function readOnnxMetadata(bytes: Uint8Array, options: ReadOptions = {}): OnnxMetadata {
  const model = decodeModel(bytes);
  const graph = model.graph;
  if (!graph) throw notOnnx('it has no graph');
  const external = externalTensors(model);
  if (external.length > 0) {
    throw new InvalidInputError(
      'external_data',
      `${describeExternal(external)}; warmpool serves only self-contained models: save the model with its weights inside it ` +
        '(onnx.save_model(model, path, save_as_external_data=False)), or convert_model_from_external_data first',
    );
  }
  // Older exporters (IR < 4) list initializers among the graph inputs; they are weights, not inputs.
  const initializers = new Set((graph.initializer ?? []).map((t) => t.name ?? ''));
  const declared = {
    inputs: (graph.input ?? []).filter((v) => !initializers.has(v.name ?? '')).map((v) => tensorSpec(v, 'input')),
    outputs: servedOutputs(graph.output ?? [], options.outputs),
  };
  if (declared.inputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no inputs');
  if (declared.outputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no outputs');
  const fixedBatch = fixedBatchOf(declared);
  // The first axis is the batch axis either way: a fixed-batch model's requests carry rows too.
  const batchAxis = (spec: TensorSpec): TensorSpec => ({ ...spec, shape: [-1, ...spec.shape.slice(1)] });
  const inputs = declared.inputs.map(batchAxis);
  const outputs = declared.outputs.map(batchAxis);
  const opset = defaultOpset(model.opsetImport ?? []);
  const producer = [model.producerName, model.producerVersion].filter(Boolean).join(' ');
  return {
    inputs,
    outputs,
    ...(fixedBatch !== undefined ? { fixedBatch } : {}),
    ...(opset !== undefined ? { opset } : {}),
    ...(producer ? { producer } : {}),
  };
}

/**
 * The outputs the manifest lists: the named ones, or all. A non-tensor output left unnamed is
 * refused with the `--outputs` that serves the rest (ONNX Runtime for Node returns tensors only:
 * a scikit-learn classifier's ZipMap failed every request with "Non tensor type is temporarily
 * not supported").
 */
function servedOutputs(all: ValueInfo[], wanted: readonly string[] | undefined): TensorSpec[] {
  if (wanted !== undefined) {
    if (wanted.length === 0) throw new InvalidInputError('invalid_outputs', 'name at least one output to serve');
    const byName = new Map(all.map((v) => [v.name ?? '', v]));
    const seen = new Set<string>();
    return wanted.map((name) => {
      const v = byName.get(name);
      if (!v) throw new InvalidInputError('invalid_outputs', `the model has no output "${name}"; its outputs are ${quoted(all)}`);
      if (seen.has(name)) throw new InvalidInputError('invalid_outputs', `output "${name}" is named twice`);
      seen.add(name);
      return tensorSpec(v, 'output');
    });
  }
  const others = all.filter((v) => !v.type?.tensorType);
  if (others.length > 0) {
    const tensors = all.filter((v) => v.type?.tensorType);
    const [first] = others as [ValueInfo];
    const kind = first.type ? describeType(first.type) : 'untyped';
    const fix =
      tensors.length > 0
        ? `serve only the tensor outputs: --outputs ${tensors.map((v) => v.name).join(',')}`
        : 'the model has no tensor output to serve; export it with tensor outputs (for scikit-learn: skl2onnx options={"zipmap": False})';
    throw new InvalidInputError(
      'invalid_model',
      `output "${first.name ?? ''}" is ${kind}, which ONNX Runtime for Node cannot return; ${fix}`,
    );
  }
  return all.map((v) => tensorSpec(v, 'output'));
}

function quoted(values: ValueInfo[]): string {
  return values.map((v) => `"${v.name ?? ''}"`).join(', ');
}

/** `a sequence of maps`, `a sequence`, `a map`, else `not a tensor (<kind>)`: what a non-tensor type is, in words. */
function describeType(type: import('onnx-proto').onnx.ITypeProto): string {
  if (type.sequenceType) return type.sequenceType.elemType?.mapType ? 'a sequence of maps (sequenceType)' : 'a sequence (sequenceType)';
  if (type.mapType) return 'a map (mapType)';
  const kind = Object.keys(type)[0] ?? 'unknown';
  return `not a tensor (${kind})`;
}

/** A tensor whose data is outside the model, and the file it names. */
export interface ExternalTensor {
  name: string;
  location: string;
}

/**
 * The tensors of an ONNX model (bytes) whose data lives in another file; empty for a
 * self-contained model. Throws InvalidInputError when the bytes are not an ONNX model.
 */
export function findExternalData(bytes: Uint8Array): ExternalTensor[] {
  return externalTensors(decodeModel(bytes));
}

/** `tensor "W" keeps its data in the external file "weights.bin"` (and how many more). */
export function describeExternal(found: readonly ExternalTensor[]): string {
  const [first] = found;
  if (!first) return 'no tensor keeps its data outside the model';
  const more = found.length > 1 ? ` (and ${found.length - 1} more tensor${found.length > 2 ? 's' : ''})` : '';
  return `tensor ${JSON.stringify(first.name)} keeps its data in the external file ${JSON.stringify(first.location)}${more}`;
}

function externalTensors(model: import('onnx-proto').onnx.IModelProto): ExternalTensor[] {
  const found: ExternalTensor[] = [];
  const tensor = (t: Tensor | null | undefined) => {
    // data_location EXTERNAL (1), or external_data entries even without it: ORT reads either.
    if (!t || (t.dataLocation !== 1 && (t.externalData ?? []).length === 0)) return;
    const location = (t.externalData ?? []).find((e) => e.key === 'location')?.value ?? '';
    found.push({ name: t.name ?? '', location });
  };
  const sparse = (s: SparseTensor | null | undefined) => {
    tensor(s?.values);
    tensor(s?.indices);
  };
  const nodes = (list: Node[] | null | undefined) => {
    for (const n of list ?? []) {
      for (const a of n.attribute ?? []) {
        tensor(a.t);
        for (const t of a.tensors ?? []) tensor(t);
        sparse(a.sparseTensor);
        for (const s of a.sparseTensors ?? []) sparse(s);
        graph(a.g);
        for (const g of a.graphs ?? []) graph(g);
      }
    }
  };
  const graph = (g: Graph | null | undefined) => {
    if (!g) return;
    for (const t of g.initializer ?? []) tensor(t);
    for (const s of g.sparseInitializer ?? []) sparse(s);
    nodes(g.node);
  };
  graph(model.graph);
  for (const f of model.functions ?? []) nodes(f.node);
  for (const t of model.trainingInfo ?? []) {
    graph(t.initialization);
    graph(t.algorithm);
  }
  return found;
}

function decodeModel(bytes: Uint8Array): import('onnx-proto').onnx.ModelProto {
  if (bytes.length === 0) throw notOnnx('the file is empty');
  try {
    return onnxLib().ModelProto.decode(bytes);
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
  const datatype = datatypeOfOnnxElem(elem);
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
  return { name, datatype, shape };
}

/**
 * undefined when every first dimension is dynamic (batched as any size); 1 when every input's is
 * 1 and every output's 1 or dynamic (an export with a fixed batch of 1: one row a pass). Any
 * other mix is refused, naming the first tensor that breaks it.
 */
function fixedBatchOf({ inputs, outputs }: { inputs: TensorSpec[]; outputs: TensorSpec[] }): number | undefined {
  const first = (t: TensorSpec) => t.shape[0] as number;
  if ([...inputs, ...outputs].every((t) => first(t) === -1)) return undefined;
  if (inputs.every((t) => first(t) === 1) && outputs.every((t) => first(t) === 1 || first(t) === -1)) return 1;
  const refuse = (role: string, t: TensorSpec, why: string) =>
    new InvalidInputError('invalid_model', `${role} "${t.name}" has a fixed first dimension (${first(t)}), ${why}`);
  const onlyOne = 'and warmpool serves a fixed batch of 1 only (one row a forward pass); export it with a dynamic batch axis';
  const odd = inputs.find((t) => first(t) !== -1 && first(t) !== 1);
  if (odd) throw refuse('input', odd, onlyOne);
  const dynamicIn = inputs.find((t) => first(t) === -1);
  const fixedIn = inputs.find((t) => first(t) === 1);
  if (dynamicIn && fixedIn) {
    throw refuse(
      'input',
      fixedIn,
      `while input "${dynamicIn.name}"'s is dynamic, so the model cannot be batched on its first axis; export it with one batch axis for every input`,
    );
  }
  const out = outputs.find((t) => first(t) !== -1 && (dynamicIn || first(t) !== 1)) as TensorSpec;
  throw refuse('output', out, dynamicIn ? 'so the model cannot be batched; export it with a dynamic batch axis' : onlyOne);
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
