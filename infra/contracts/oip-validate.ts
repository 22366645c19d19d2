/**
 * Validates an Open Inference Protocol request body against a model's manifest, once, at submit,
 * so a bad request is a 4xx naming the tensor and never reaches a worker's batch (where one bad
 * job would fail the forward pass for every job beside it).
 *
 * Runs on every request over data arrays of 100k+ numbers: element checks are plain loops over
 * the datatype's rule (datatypes.ts, the one table every other reader shares), no per-element
 * allocation.
 *
 * It also bounds the work a request asks for (`limits`: MAX_ROWS_PER_JOB, MAX_ELEMENTS_PER_JOB,
 * and MAX_BYTES_ELEMENTS_PER_JOB over all its BYTES inputs, counted from the shapes before a
 * string is read), the size of its `parameters` and `id`, and its list of outputs; the worker
 * runs the same checks again on every job it takes (worker/entry-inputs.ts).
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { type BatchAxis, isMoved, type LayoutData, modelShape, rowShape, toRowLayout } from './batch-axes.ts';
import { elementOf, itemBytes, type PackedArray, refusal, refusedElement } from './datatypes.ts';
import type { ModelManifest, TensorSpec } from './manifest.ts';
import type { Datatype, OipRequestedOutput, OipTensor } from './oip.ts';
import { type TensorData, tensorData } from './packed-tensors.ts';

/**
 * A checked input. `data` is flat and row-major: JSON values as sent, or — for an input that came
 * as binary tensor data (oip-binary.ts, gRPC raw contents) — its typed elements (strings for BYTES).
 */
export interface ValidatedInput {
  name: string;
  shape: number[];
  datatype: Datatype;
  data: OipTensor['data'] | TensorData;
}

export interface ValidatedInferRequest {
  /** In the order the caller sent them. */
  inputs: ValidatedInput[];
  outputs?: OipRequestedOutput[];
  parameters?: Record<string, unknown>;
  id?: string;
  /** shape[0], the same for every input. */
  rows: number;
}

export interface ValidateLimits {
  /** Rows (shape[0]) a request may carry (MAX_ROWS_PER_JOB); unlimited when absent. */
  maxRows?: number;
  /** Elements an input's shape may declare, a zero-length axis counted as 1 (MAX_ELEMENTS_PER_JOB); unlimited when absent. */
  maxElements?: number;
  /**
   * BYTES elements (strings) all of a request's inputs may carry together (MAX_BYTES_ELEMENTS_PER_JOB);
   * unlimited when absent. Each string is work per element wherever it is decoded, packed or
   * handed to ONNX Runtime, which bytes alone do not bound: 8 MB of empty strings are 2 Mi of them.
   */
  maxBytesElements?: number;
}

/**
 * `parameters` (the request's, and each tensor's) serialised as JSON: KServe's own parameters
 * (`content_type`, `binary_data_size`, …) are a handful of short keys, far below it. No worker
 * reads them (they are not stored with the job), so the bound only keeps a request from carrying
 * megabytes of them through validation and hashing.
 */
export const MAX_PARAMETERS_BYTES = 4096;
/** The OIP request `id` echoed back: room for any UUID, trace id or client key, not for a payload. */
export const MAX_REQUEST_ID_LENGTH = 256;

type Json = Record<string, unknown>;

/**
 * `binary`: the bytes of the inputs sent as binary tensor data, by name (oip-binary.ts's
 * splitBinaryBody, or gRPC's raw_input_contents); such an input has no `data`.
 */
export function validateInferRequest(
  body: unknown,
  manifest: Pick<ModelManifest, 'inputs' | 'outputs'>,
  limits: ValidateLimits = {},
  binary?: ReadonlyMap<string, Uint8Array>,
): ValidatedInferRequest {
  if (!isObject(body)) fail('invalid_body', 'request body must be a JSON object');
  if (!Array.isArray(body.inputs) || body.inputs.length === 0) {
    fail('invalid_body', '"inputs" must be a non-empty array of tensors');
  }
  const specs = new Map(manifest.inputs.map((s) => [s.name, s]));
  const seen = new Set<string>();
  const strings = { counted: 0 };
  const checked = (body.inputs as unknown[]).map((raw, i) => validateInput(raw, i, specs, seen, limits, binary, strings));
  const missing = manifest.inputs.filter((s) => !seen.has(s.name)).map((s) => s.name);
  if (missing.length > 0) fail('missing_input', `missing input${missing.length > 1 ? 's' : ''} ${quoteList(missing)}`);
  const { inputs, rows } = manifest.inputs.some((s) => isMoved(s.batchAxis))
    ? inRowLayout(checked, specs, limits)
    : {
        inputs: checked,
        rows: sameRows(
          checked,
          (t) => t.shape[0] as number,
          () => 'shape[0]',
        ),
      };
  const result: ValidatedInferRequest = { inputs, rows };
  if (body.outputs !== undefined) result.outputs = validateOutputs(body.outputs, manifest.outputs);
  if (body.parameters !== undefined) result.parameters = validateParameters(body.parameters, '"parameters"');
  if (body.id !== undefined) {
    if (typeof body.id !== 'string') fail('invalid_body', '"id" must be a string');
    if (body.id.length > MAX_REQUEST_ID_LENGTH) {
      fail('id_too_long', `"id" has ${body.id.length} characters; at most ${MAX_REQUEST_ID_LENGTH} are allowed`, 413);
    }
    result.id = body.id;
  }
  return result;
}

/** The rows every input brings (`rowsOf`), which must agree; the first input's name in the message. */
function sameRows(inputs: readonly ValidatedInput[], rowsOf: (t: ValidatedInput) => number, where: (t: ValidatedInput) => string): number {
  const [first] = inputs;
  if (!first) return 1;
  const rows = rowsOf(first);
  for (const t of inputs) {
    if (rowsOf(t) !== rows) {
      fail(
        'shape_mismatch',
        `input "${t.name}": ${where(t)} is ${rowsOf(t)} but "${first.name}" has ${rows}${where(first) === where(t) ? '' : ` (its ${where(first)})`}; all inputs must have the same number of rows`,
      );
    }
  }
  return rows;
}

/**
 * A request for a model that keeps its rows elsewhere than axis 0 (batch-axes.ts), checked in the
 * model's own layout, into warmpool's row layout: each batched input's rows moved to the front,
 * each input with no batch axis repeated once a row (its bounds checked again at that size, as
 * the worker will see it). With no batched input at all the request is one row.
 */
function inRowLayout(
  checked: readonly ValidatedInput[],
  specs: ReadonlyMap<string, TensorSpec>,
  limits: ValidateLimits,
): { inputs: ValidatedInput[]; rows: number } {
  const axisOf = (t: ValidatedInput) => (specs.get(t.name) as TensorSpec).batchAxis ?? 0;
  const batched = checked.filter((t) => axisOf(t) !== 'none');
  const rows = sameRows(
    batched,
    (t) => t.shape[axisOf(t) as number] as number,
    (t) => `shape[${axisOf(t)}]`,
  );
  const inputs = checked.map((t) => {
    const axis = axisOf(t);
    const shape = rowShape(t.shape, axis, rows);
    if (axis === 'none') checkShapeBounds(t.name, shape, limits);
    return { ...t, shape, data: toRowLayout(t.data as LayoutData, t.shape, axis, rows) as ValidatedInput['data'] };
  });
  return { inputs, rows };
}

/**
 * A `parameters` object within MAX_PARAMETERS_BYTES. Neither the request's nor a tensor's are
 * kept with the job: no worker reads them (they cannot change the outputs), so they are
 * checked and dropped.
 */
function validateParameters(raw: unknown, what: string): Record<string, unknown> {
  if (!isObject(raw)) fail('invalid_body', `${what} must be an object`);
  const bytes = Buffer.byteLength(JSON.stringify(raw));
  if (bytes > MAX_PARAMETERS_BYTES) {
    fail('parameters_too_large', `${what} is ${bytes} bytes as JSON; at most ${MAX_PARAMETERS_BYTES} are allowed`, 413);
  }
  return raw;
}

function validateInput(
  raw: unknown,
  index: number,
  specs: Map<string, TensorSpec>,
  seen: Set<string>,
  limits: ValidateLimits,
  binary: ReadonlyMap<string, Uint8Array> | undefined,
  strings: { counted: number },
): ValidatedInput {
  if (!isObject(raw) || typeof raw.name !== 'string') fail('invalid_body', `inputs[${index}] must be an object with a string "name"`);
  const name = raw.name;
  const spec = specs.get(name);
  if (!spec) fail('unknown_input', `unknown input "${name}"; the model expects ${quoteList([...specs.keys()])}`);
  if (seen.has(name)) fail('duplicate_input', `input "${name}" appears more than once`);
  seen.add(name);
  if (raw.datatype !== spec.datatype) {
    const got = typeof raw.datatype === 'string' ? raw.datatype : JSON.stringify(raw.datatype ?? null);
    fail('datatype_mismatch', `input "${name}": expected datatype ${spec.datatype}, got ${got}`);
  }
  const axis = spec.batchAxis ?? 0;
  const shape = validateShape(name, raw.shape, modelShape(spec.shape, axis), axis);
  // Bounded before any data is read: a batched input's rows first, one without a batch axis as one row.
  checkShapeBounds(name, rowShape(shape, axis, 1), limits);
  if (spec.datatype === 'BYTES') {
    strings.counted += product(shape);
    checkBytesElements(strings.counted, limits, `the request's BYTES inputs (through "${name}")`);
  }
  if (raw.parameters !== undefined) validateParameters(raw.parameters, `input "${name}": "parameters"`);
  const bytes = binary?.get(name);
  if (bytes !== undefined) return { name, shape, datatype: spec.datatype, data: binaryData(name, spec.datatype, shape, bytes) };
  if (isObject(raw.parameters) && raw.parameters.binary_data_size !== undefined) {
    fail(
      'invalid_body',
      `input "${name}" has parameters.binary_data_size but the body carries no binary data: send the JSON header's length in Inference-Header-Content-Length and the tensor bytes after it`,
    );
  }
  if (!Array.isArray(raw.data)) {
    fail(
      'invalid_body',
      `input "${name}": "data" must be an array (or send the input as binary tensor data with parameters.binary_data_size)`,
    );
  }
  const data = flatten(raw.data);
  const expected = product(shape);
  if (data.length !== expected) {
    fail('data_length_mismatch', `input "${name}": shape [${shape.join(', ')}] needs ${expected} values, got ${data.length}`);
  }
  checkValues(name, spec.datatype, data);
  return { name, shape, datatype: spec.datatype, data };
}

/**
 * A binary input's elements, checked as Triton checks them: exactly the bytes its shape needs
 * (numeric), or exactly its shape's count of length-prefixed strings (BYTES). Then the value rule
 * for what bytes can say and JSON cannot: BOOL bytes 0 or 1, floats finite (NaN and ±inf are
 * refused as in JSON). Numeric data is one copy of the bytes into an aligned typed array and,
 * for BOOL and floats, one scan.
 */
function binaryData(name: string, datatype: Datatype, shape: number[], bytes: Uint8Array): TensorData {
  const elements = product(shape);
  if (datatype === 'BYTES') {
    return tensorData({ name, datatype, shape, offset: 0, length: bytes.byteLength }, bytes);
  }
  const item = itemBytes(datatype);
  if (bytes.byteLength !== elements * item) {
    fail(
      'binary_size_mismatch',
      `input byte size mismatch for input '${name}': shape [${shape.join(', ')}] of ${datatype} needs ${elements * item} bytes, binary_data_size is ${bytes.byteLength}`,
    );
  }
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  const data = tensorData({ name, datatype, shape, offset: 0, length: copy.byteLength }, copy);
  // The JSON rule for the bits binary data can carry and JSON cannot: NaN, ±inf, BOOL bytes past 1.
  const bad = refusedElement(datatype, data as PackedArray);
  if (bad) fail('invalid_value', `input "${name}": element ${bad.index} ${bad.message}`);
  return data;
}

/**
 * The bounds on a shape, checked before its data is read. A shape declares its rows and the
 * extent of each axis; with a zero-length axis it carries no values at all, so the data length
 * alone cannot bound it (`[1e9, 0]` with `data: []` declares a billion rows). Hence the rows
 * are bounded on their own, and the extent (the product of the axes, a zero-length one counted
 * as 1) too: without a zero axis the extent is the element count, which the data must match.
 */
export function checkShapeBounds(name: string, shape: readonly number[], limits: ValidateLimits): void {
  const rows = shape[0] ?? 0;
  if (limits.maxRows !== undefined && rows > limits.maxRows) {
    fail('too_many_rows', `input "${name}": shape[0] declares ${rows} rows; at most ${limits.maxRows} are allowed in one request`, 413);
  }
  if (limits.maxElements !== undefined && shapeExtent(shape, limits.maxElements) > limits.maxElements) {
    fail(
      'too_many_elements',
      `input "${name}": shape [${shape.join(', ')}] declares more than ${limits.maxElements} elements (a zero-length axis counted as 1); at most ${limits.maxElements} are allowed in one request`,
      413,
    );
  }
}

/**
 * BYTES elements `count` (a request's strings over all its inputs, from their shapes) within
 * MAX_BYTES_ELEMENTS_PER_JOB: checked before any string is decoded, so a refused request costs
 * no work per element. `what` names the tensors counted.
 */
export function checkBytesElements(count: number, limits: ValidateLimits, what: string): void {
  if (limits.maxBytesElements === undefined || count <= limits.maxBytesElements) return;
  fail(
    'too_many_elements',
    `${what} declare ${count} BYTES elements (strings); at most ${limits.maxBytesElements} are allowed in one request (MAX_BYTES_ELEMENTS_PER_JOB): send fewer rows per request, or join short strings into longer ones`,
    413,
  );
}

/** The product of the axes, each at least 1; stops as soon as it passes `cap` (so it never overflows). */
export function shapeExtent(shape: readonly number[], cap = Number.MAX_SAFE_INTEGER): number {
  let n = 1;
  for (const d of shape) {
    n *= Math.max(1, d);
    if (n > cap) return n;
  }
  return n;
}

/** `expected` in the model's layout; `batchAxis` is where it keeps the rows (none: every axis is the model's own). */
function validateShape(name: string, raw: unknown, expected: number[], batchAxis: BatchAxis): number[] {
  if (!Array.isArray(raw)) fail('shape_mismatch', `input "${name}": "shape" must be an array of integers`);
  if (raw.length !== expected.length) {
    fail('shape_mismatch', `input "${name}": expected rank ${expected.length} (shape [${expected.join(', ')}]), got rank ${raw.length}`);
  }
  if (batchAxis !== 'none') {
    const rows = raw[batchAxis];
    if (!Number.isSafeInteger(rows) || (rows as number) < 1) {
      fail('shape_mismatch', `input "${name}": shape[${batchAxis}] (rows) must be an integer >= 1, got ${JSON.stringify(rows ?? null)}`);
    }
  }
  for (let axis = 0; axis < raw.length; axis++) {
    if (axis === batchAxis) continue;
    const dim: unknown = raw[axis];
    const want = expected[axis] as number;
    if (!Number.isSafeInteger(dim) || (dim as number) < 0) {
      fail('shape_mismatch', `input "${name}": shape[${axis}] must be a non-negative integer, got ${JSON.stringify(dim ?? null)}`);
    }
    if (want >= 0 && dim !== want) {
      fail('shape_mismatch', `input "${name}": axis ${axis} must be ${want} (shape [${expected.join(', ')}]), got ${String(dim)}`);
    }
  }
  return raw as number[];
}

function validateOutputs(raw: unknown, specs: TensorSpec[]): OipRequestedOutput[] {
  if (!Array.isArray(raw)) fail('invalid_body', '"outputs" must be an array of { name }');
  const known = new Set(specs.map((s) => s.name));
  const outputs: OipRequestedOutput[] = [];
  const named = new Set<string>();
  for (let i = 0; i < raw.length; i++) {
    const item: unknown = raw[i];
    if (!isObject(item) || typeof item.name !== 'string') fail('invalid_body', `outputs[${i}] must be an object with a string "name"`);
    if (!known.has(item.name)) fail('unknown_output', `unknown output "${item.name}"; the model has ${quoteList([...known])}`);
    // Each output once: the list is stored with the job, so it is no longer than the model's.
    if (named.has(item.name)) fail('duplicate_output', `output "${item.name}" is asked for more than once`);
    named.add(item.name);
    if (item.parameters !== undefined) validateParameters(item.parameters, `outputs[${i}].parameters`);
    outputs.push({ name: item.name });
  }
  return outputs;
}

/** OIP allows nested row-major data; the worker wants it flat. Flat input is returned as is. */
function flatten(data: unknown[]): Array<number | boolean | string> {
  let nested = false;
  for (let i = 0; i < data.length; i++) {
    if (Array.isArray(data[i])) {
      nested = true;
      break;
    }
  }
  if (!nested) return data as Array<number | boolean | string>;
  const out: unknown[] = [];
  pushFlat(data, out);
  return out as Array<number | boolean | string>;
}

function pushFlat(data: unknown[], out: unknown[]): void {
  for (let i = 0; i < data.length; i++) {
    const v = data[i];
    if (Array.isArray(v)) pushFlat(v, out);
    else out.push(v);
  }
}

function checkValues(name: string, datatype: Datatype, data: unknown[]): void {
  const rule = elementOf(datatype);
  for (let i = 0; i < data.length; i++) {
    if (rule(data[i]) === undefined) fail('invalid_value', `input "${name}": data[${i}] ${refusal(datatype, data[i])}`);
  }
}

function product(shape: number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

function isObject(v: unknown): v is Json {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function quoteList(names: string[]): string {
  return names.map((n) => `"${n}"`).join(', ');
}

function fail(code: string, message: string, status?: 413): never {
  throw new InvalidInputError(code, message, status ? { status } : undefined);
}
