/**
 * Reads what a manifest records about a model (DESIGN §3) from the ONNX ModelProto itself:
 * input and output names, OIP datatypes and shapes, opset and producer.
 *
 * The batching plan (issue 30; infra/contracts/batch-axes.ts): where each tensor keeps its rows.
 * - Every first dimension dynamic: axis 0 throughout, as every model before the plan (no
 *   `batchAxis` in its specs).
 * - A fixed batch of 1 (every input's first dimension 1, every output's 1 or dynamic): served one
 *   row a forward pass (`fixedBatch: 1`), its first axis still the requests' batch axis.
 * - Otherwise read from the symbolic dimension names: the name the inputs' first dimensions share
 *   (or, when none is symbolic, one name on one axis of several inputs) is the batch symbol, and
 *   each tensor's batch axis is the axis that carries it (a VAD's `state [2, batch, 128]`: axis
 *   1); a tensor without it and with only fixed dimensions (a scalar `sr`) has none ('none'). A
 *   tensor with dynamic dimensions none of which is the symbol, or the symbol twice, is refused.
 * - `batchAxes` (`--batch-axis state:1,sr:none`) says it for the tensors named, inputs or outputs,
 *   over what was read; `noBatching` (`--no-batching`) serves every tensor whole, one request a
 *   pass (Triton's `max_batch_size: 0`).
 * - The inputs decide: when some input has a batch axis every output needs one (an output with
 *   none would be one value shared by all the pass's rows: refused); when none has, each request
 *   runs whole, one a pass (`fixedBatch: 1`), and every output is served whole too ('none').
 * The specs returned are in row layout (batch-axes.ts's rowShape: the batch axis first, -1; a
 * tensor with none gets -1 in front of its whole shape). What cannot be served is refused at
 * publish time with a message naming the tensor and what to say, rather than failing later
 * inside a worker.
 *
 * A model must also carry all its weights (issue 20). ONNX external data names a file that ONNX
 * Runtime opens relative to the model's own folder: in the workers' shared, content-addressed
 * cache that folder holds every other model, so a publisher could make a model whose weights are
 * another model's file (or any file the worker can read) and serve what it computes from them.
 * Every tensor is looked at, wherever it hides: initializers, sparse initializers, Constant and
 * other node attributes, subgraphs (If, Loop, Scan), functions and training graphs.
 */
import { createRequire } from 'node:module';
import { type BatchAxis, rowShape } from '../contracts/batch-axes.ts';
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
  /** In row layout: every first dimension is the batch axis (-1), wherever the model keeps it (`batchAxis`). */
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
  /** Batch axes said at publish (`--batch-axis state:1,sr:none`), by input or output name, over the ones read from the model. */
  batchAxes?: Readonly<Record<string, BatchAxis>>;
  /** Every tensor served whole, one request a forward pass (`--no-batching`). */
  noBatching?: boolean;
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
    inputs: (graph.input ?? []).filter((v) => !initializers.has(v.name ?? '')).map((v) => declaredTensor(v, 'input')),
    outputs: servedOutputs(graph.output ?? [], options.outputs),
  };
  if (declared.inputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no inputs');
  if (declared.outputs.length === 0) throw new InvalidInputError('invalid_model', 'the ONNX model has no outputs');
  const { inputs, outputs, fixedBatch } = batchingPlan(declared, options);
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
function servedOutputs(all: ValueInfo[], wanted: readonly string[] | undefined): Declared[] {
  if (wanted !== undefined) {
    if (wanted.length === 0) throw new InvalidInputError('invalid_outputs', 'name at least one output to serve');
    const byName = new Map(all.map((v) => [v.name ?? '', v]));
    const seen = new Set<string>();
    return wanted.map((name) => {
      const v = byName.get(name);
      if (!v) throw new InvalidInputError('invalid_outputs', `the model has no output "${name}"; its outputs are ${quoted(all)}`);
      if (seen.has(name)) throw new InvalidInputError('invalid_outputs', `output "${name}" is named twice`);
      seen.add(name);
      return declaredTensor(v, 'output');
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
  return all.map((v) => declaredTensor(v, 'output'));
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

/** A tensor as the model declares it: its spec in the model's own shape, and each dimension's symbolic name. */
interface Declared {
  spec: TensorSpec;
  role: 'input' | 'output';
  /** The `dim_param` of each dimension, undefined where it has none. */
  names: Array<string | undefined>;
}

function declaredTensor(v: ValueInfo, role: 'input' | 'output'): Declared {
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
  const dims = tensorType.shape.dim ?? [];
  return { spec: { name, datatype, shape: dims.map(dimSize) }, role, names: dims.map(dimName) };
}

type Plan = { inputs: TensorSpec[]; outputs: TensorSpec[]; fixedBatch?: number };

/**
 * The plan and the specs in row layout (see the header). Without a plan to say (every first
 * dimension dynamic, or a fixed batch of 1 throughout) the specs are exactly what they were before
 * the plan, with no `batchAxis`.
 */
function batchingPlan(declared: { inputs: Declared[]; outputs: Declared[] }, options: ReadOptions): Plan {
  const all = [...declared.inputs, ...declared.outputs];
  const said = options.batchAxes ?? {};
  if (options.noBatching && Object.keys(said).length > 0) {
    throw new InvalidInputError(
      'invalid_batch_axis',
      'give --batch-axis or --no-batching, not both: --no-batching serves every tensor whole',
    );
  }
  const first = (d: Declared) => d.spec.shape[0];
  if (!options.noBatching && Object.keys(said).length === 0 && all.every((d) => d.spec.shape.length > 0)) {
    if (all.every((d) => first(d) === -1)) return firstAxis(declared);
    if (declared.inputs.every((d) => first(d) === 1) && declared.outputs.every((d) => first(d) === 1 || first(d) === -1))
      return { ...firstAxis(declared), fixedBatch: 1 };
  }
  const { axes, batched } = planAxes(all, declared.inputs, options);
  const row = (d: Declared): TensorSpec => {
    const axis = axes.get(d.spec.name) ?? 0;
    // The batch axis moved to the front (-1), or -1 put in front of a tensor that has none.
    const [, ...rest] = rowShape(d.spec.shape, axis, -1);
    return { ...d.spec, shape: [-1, ...rest], ...(axis === 0 ? {} : { batchAxis: axis }) };
  };
  return { inputs: declared.inputs.map(row), outputs: declared.outputs.map(row), ...(batched ? {} : { fixedBatch: 1 }) };
}

/** Every tensor on its first axis, as before the plan. */
function firstAxis(declared: { inputs: Declared[]; outputs: Declared[] }): Plan {
  const row = (d: Declared): TensorSpec => ({ ...d.spec, shape: [-1, ...d.spec.shape.slice(1)] });
  return { inputs: declared.inputs.map(row), outputs: declared.outputs.map(row) };
}

/**
 * Each tensor's axis: none for all (`noBatching`), else what was said, else what the names say.
 * The inputs decide whether the model batches at all: with none batched, each request runs whole
 * and the outputs read no axis either (what the model returns is the one row's).
 */
function planAxes(
  all: readonly Declared[],
  inputs: readonly Declared[],
  options: ReadOptions,
): { axes: Map<string, BatchAxis>; batched: boolean } {
  const axes = new Map<string, BatchAxis>();
  if (options.noBatching) {
    for (const d of all) axes.set(d.spec.name, 'none');
    return { axes, batched: false };
  }
  const said = new Map(Object.entries(options.batchAxes ?? {}).map(([name, axis]) => [name, checkedAxis(all, name, axis)]));
  // Where the inputs' names disagree, those said to have no batch axis (`sr:none`) are left out.
  const symbol = batchSymbol(inputs) ?? batchSymbol(inputs.filter((d) => said.get(d.spec.name) !== 'none'));
  const read = readAxis(symbol);
  const axisOf = (d: Declared) => said.get(d.spec.name) ?? readableAxis(d, read(d));
  for (const d of inputs) axes.set(d.spec.name, axisOf(d));
  const batched = inputs.some((d) => axes.get(d.spec.name) !== 'none');
  for (const d of all) {
    if (d.role !== 'output') continue;
    const axis = batched || said.has(d.spec.name) ? axisOf(d) : 'none';
    checkOutputAxis(d, axis, batched);
    axes.set(d.spec.name, axis);
  }
  return { axes, batched };
}

/** The axis read, or the refusal naming the tensor and the flags that say it. */
function readableAxis(d: Declared, axis: BatchAxis | string): BatchAxis {
  if (typeof axis === 'number' || axis === 'none') return axis;
  const name = d.spec.name;
  throw new InvalidInputError(
    'invalid_model',
    `${d.role} "${name}" (shape [${shapeText(d)}]): ${axis}; say where its rows are with --batch-axis ${name}:AXIS (or ${name}:none if it has no batch axis), or serve the model whole with --no-batching`,
  );
}

/** Outputs split by the pass's rows need an axis to split on; with no batched input there are no rows to split. */
function checkOutputAxis(d: Declared, axis: BatchAxis, batched: boolean): void {
  if (batched && axis === 'none')
    throw new InvalidInputError(
      'invalid_model',
      `output "${d.spec.name}" (shape [${shapeText(d)}]) has no batch axis while the inputs have one, so the rows of a forward pass could not be told apart in it; give its axis with --batch-axis ${d.spec.name}:AXIS, or serve the model whole with --no-batching`,
    );
  if (!batched && axis !== 'none')
    throw new InvalidInputError(
      'invalid_batch_axis',
      `--batch-axis ${d.spec.name}:${axis}: no input has a batch axis, so each request runs whole and output "${d.spec.name}" has none either; say --batch-axis ${d.spec.name}:none, or give the inputs' axes`,
    );
}

/**
 * Where a tensor keeps its rows, by the batch symbol: the axis that carries it; 'none' for a
 * tensor without it whose dimensions are all fixed; else why it cannot be read. With no symbol, a
 * tensor whose one dynamic dimension is its first batches on it.
 */
function readAxis(symbol: string | undefined): (d: Declared) => BatchAxis | string {
  return (d) => {
    const fixed = d.spec.shape.every((n) => n >= 0);
    if (fixed) return 'none';
    if (symbol === undefined) {
      const dynamic = d.spec.shape.flatMap((n, i) => (n < 0 ? [i] : []));
      return dynamic.length === 1 && dynamic[0] === 0 ? 0 : 'its batch axis cannot be told from its dimension names';
    }
    const at = d.names.flatMap((n, i) => (n === symbol ? [i] : []));
    if (at.length === 1) return at[0] as number;
    if (at.length > 1) return `the batch dimension "${symbol}" is on ${at.length} of its axes`;
    return `it has dynamic dimensions but none named "${symbol}", the inputs' batch dimension`;
  };
}

/**
 * The inputs' batch dimension name: the one their symbolic first dimensions share; when none is
 * symbolic, the one name found on exactly one axis of the most inputs (at least two, no tie).
 */
function batchSymbol(inputs: readonly Declared[]): string | undefined {
  const firsts = new Set(inputs.flatMap((d) => (d.names[0] === undefined ? [] : [d.names[0]])));
  if (firsts.size > 0) return firsts.size === 1 ? [...firsts][0] : undefined;
  const counts = new Map<string, number>();
  for (const d of inputs) {
    for (const n of new Set(d.names)) {
      if (n !== undefined && d.names.filter((x) => x === n).length === 1) counts.set(n, (counts.get(n) ?? 0) + 1);
    }
  }
  const ranked = [...counts].filter(([, c]) => c >= 2).sort((a, b) => b[1] - a[1]);
  if (ranked.length === 0 || (ranked.length > 1 && ranked[0]?.[1] === ranked[1]?.[1])) return undefined;
  return ranked[0]?.[0];
}

/** An axis said at publish, checked against the tensor it names. */
function checkedAxis(all: readonly Declared[], name: string, axis: BatchAxis): BatchAxis {
  const d = all.find((t) => t.spec.name === name);
  if (!d) {
    throw new InvalidInputError(
      'invalid_batch_axis',
      `--batch-axis names "${name}", which is neither an input nor an output of the model; its tensors are ${all.map((t) => `"${t.spec.name}"`).join(', ')}`,
    );
  }
  if (axis === 'none') return axis;
  const rank = d.spec.shape.length;
  if (!Number.isInteger(axis) || axis < 0 || axis >= rank) {
    const range = rank === 0 ? 'it is a scalar: give none' : `give 0 to ${rank - 1}, or none`;
    throw new InvalidInputError(
      'invalid_batch_axis',
      `--batch-axis ${name}:${axis}: ${d.role} "${name}" has shape [${shapeText(d)}]; ${range}`,
    );
  }
  const size = d.spec.shape[axis] as number;
  if (size >= 0) {
    throw new InvalidInputError(
      'invalid_batch_axis',
      `--batch-axis ${name}:${axis}: axis ${axis} of ${d.role} "${name}" is fixed at ${size} (shape [${shapeText(d)}]), so it cannot carry a batch`,
    );
  }
  return axis;
}

/** `2, batch, 128`: the shape as the model declares it. */
function shapeText(d: Declared): string {
  return d.spec.shape.map((n, i) => (n >= 0 ? String(n) : (d.names[i] ?? '?'))).join(', ');
}

/** A fixed size, or -1 for a symbolic (`dim_param`) or unknown dimension. */
function dimSize(d: Dim): number {
  const value = (d as { value?: string }).value; // protobufjs names the set member of the oneof
  if (value !== 'dimValue' || d.dimValue === null || d.dimValue === undefined) return -1;
  const n = Number(d.dimValue);
  return Number.isSafeInteger(n) && n >= 0 ? n : -1;
}

/** A dimension's symbolic name (`dim_param`), or undefined. */
function dimName(d: Dim): string | undefined {
  const value = (d as { value?: string }).value;
  return value === 'dimParam' && d.dimParam ? d.dimParam : undefined;
}

/** The default-domain ('' or 'ai.onnx') opset version, the one that says which operators mean what. */
function defaultOpset(imports: import('onnx-proto').onnx.IOperatorSetIdProto[]): number | undefined {
  const entry = imports.find((o) => !o.domain || o.domain === 'ai.onnx');
  return entry?.version === null || entry?.version === undefined ? undefined : Number(entry.version);
}
