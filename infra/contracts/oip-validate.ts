/**
 * Validates an Open Inference Protocol request body against a model's manifest, once, at submit,
 * so a bad request is a 4xx naming the tensor and never reaches a worker's batch (where one bad
 * job would fail the forward pass for every job beside it).
 *
 * Runs on every request over data arrays of 100k+ numbers: element checks are plain loops over
 * one predicate per datatype, no per-element allocation.
 *
 * It also bounds the work a request asks for (`limits`: MAX_ROWS_PER_JOB, MAX_ELEMENTS_PER_JOB),
 * the size of its `parameters` and `id`, and its list of outputs; the worker runs the same
 * checks again on every job it takes (worker/intake.ts).
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { BINARY_ITEM_BYTES } from './binary-tensor.ts';
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
  manifest: ModelManifest,
  limits: ValidateLimits = {},
  binary?: ReadonlyMap<string, Uint8Array>,
): ValidatedInferRequest {
  if (!isObject(body)) fail('invalid_body', 'request body must be a JSON object');
  if (!Array.isArray(body.inputs) || body.inputs.length === 0) {
    fail('invalid_body', '"inputs" must be a non-empty array of tensors');
  }
  const specs = new Map(manifest.inputs.map((s) => [s.name, s]));
  const seen = new Set<string>();
  const inputs: ValidatedInput[] = [];
  let rows = 0;
  for (let i = 0; i < body.inputs.length; i++) {
    const tensor = validateInput(body.inputs[i], i, specs, seen, limits, binary);
    const tensorRows = tensor.shape[0] as number;
    if (inputs.length > 0 && tensorRows !== rows) {
      fail(
        'shape_mismatch',
        `input "${tensor.name}": shape[0] is ${tensorRows} but "${inputs[0]?.name}" has ${rows}; all inputs must have the same number of rows`,
      );
    }
    rows = tensorRows;
    inputs.push(tensor);
  }
  const missing = manifest.inputs.filter((s) => !seen.has(s.name)).map((s) => s.name);
  if (missing.length > 0) fail('missing_input', `missing input${missing.length > 1 ? 's' : ''} ${quoteList(missing)}`);
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
  const shape = validateShape(name, raw.shape, spec.shape);
  checkShapeBounds(name, shape, limits);
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
 * (numeric), or exactly its shape's count of length-prefixed strings (BYTES); BOOL bytes 0 or 1.
 * Numeric data is one copy of the bytes into an aligned typed array, no per-element pass.
 */
function binaryData(name: string, datatype: Datatype, shape: number[], bytes: Uint8Array): TensorData {
  const elements = product(shape);
  if (datatype === 'BYTES') {
    return tensorData({ name, datatype, shape, offset: 0, length: bytes.byteLength }, bytes);
  }
  const item = BINARY_ITEM_BYTES[datatype];
  if (bytes.byteLength !== elements * item) {
    fail(
      'binary_size_mismatch',
      `input byte size mismatch for input '${name}': shape [${shape.join(', ')}] of ${datatype} needs ${elements * item} bytes, binary_data_size is ${bytes.byteLength}`,
    );
  }
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  if (datatype === 'BOOL') {
    const bad = copy.findIndex((b) => b > 1);
    if (bad >= 0) fail('invalid_value', `input "${name}": element ${bad} is byte ${copy[bad]}; a BOOL element is one byte, 0 or 1`);
  }
  return tensorData({ name, datatype, shape, offset: 0, length: copy.byteLength }, copy);
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

/** The product of the axes, each at least 1; stops as soon as it passes `cap` (so it never overflows). */
export function shapeExtent(shape: readonly number[], cap = Number.MAX_SAFE_INTEGER): number {
  let n = 1;
  for (const d of shape) {
    n *= Math.max(1, d);
    if (n > cap) return n;
  }
  return n;
}

function validateShape(name: string, raw: unknown, expected: number[]): number[] {
  if (!Array.isArray(raw)) fail('shape_mismatch', `input "${name}": "shape" must be an array of integers`);
  if (raw.length !== expected.length) {
    fail('shape_mismatch', `input "${name}": expected rank ${expected.length} (shape [${expected.join(', ')}]), got rank ${raw.length}`);
  }
  const rows = raw[0];
  if (!Number.isSafeInteger(rows) || (rows as number) < 1) {
    fail('shape_mismatch', `input "${name}": shape[0] (rows) must be an integer >= 1, got ${JSON.stringify(rows ?? null)}`);
  }
  for (let axis = 1; axis < raw.length; axis++) {
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

type Check = (v: unknown) => boolean;

const intRange =
  (min: number, max: number): Check =>
  (v) =>
    typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const UINT64_MAX = 2n ** 64n - 1n;
const DECIMAL = /^-?\d{1,20}$/;

/** 64-bit integers: a safe-integer number, or a decimal string for values JSON numbers cannot hold. */
const int64Check = (min: bigint, max: bigint): Check => {
  const signed = min < 0n;
  return (v) => {
    // Every safe integer fits INT64; UINT64 only needs the sign checked. No BigInt on this path.
    if (typeof v === 'number') return Number.isSafeInteger(v) && (signed || v >= 0);
    if (typeof v !== 'string' || !DECIMAL.test(v)) return false;
    const n = BigInt(v);
    return n >= min && n <= max;
  };
};

const CHECKS: Record<Datatype, Check> = {
  BOOL: (v) => v === true || v === false || v === 0 || v === 1,
  UINT8: intRange(0, 255),
  UINT16: intRange(0, 65_535),
  UINT32: intRange(0, 4_294_967_295),
  UINT64: int64Check(0n, UINT64_MAX),
  INT8: intRange(-128, 127),
  INT16: intRange(-32_768, 32_767),
  INT32: intRange(-2_147_483_648, 2_147_483_647),
  INT64: int64Check(INT64_MIN, INT64_MAX),
  // FP16 travels as numbers and is rounded to half precision by the worker.
  FP16: (v) => typeof v === 'number' && Number.isFinite(v),
  FP32: (v) => typeof v === 'number' && Number.isFinite(v),
  FP64: (v) => typeof v === 'number' && Number.isFinite(v),
  BYTES: (v) => typeof v === 'string',
};

const EXPECTED: Record<Datatype, string> = {
  BOOL: 'true, false, 0 or 1',
  UINT8: 'an integer in [0, 255]',
  UINT16: 'an integer in [0, 65535]',
  UINT32: 'an integer in [0, 4294967295]',
  UINT64: 'a non-negative integer (a decimal string above 2^53)',
  INT8: 'an integer in [-128, 127]',
  INT16: 'an integer in [-32768, 32767]',
  INT32: 'an integer in [-2147483648, 2147483647]',
  INT64: 'an integer (a decimal string beyond ±2^53)',
  FP16: 'a finite number',
  FP32: 'a finite number',
  FP64: 'a finite number',
  BYTES: 'a string',
};

function checkValues(name: string, datatype: Datatype, data: unknown[]): void {
  const check = CHECKS[datatype];
  for (let i = 0; i < data.length; i++) {
    if (!check(data[i])) {
      fail('invalid_value', `input "${name}": data[${i}] must be ${EXPECTED[datatype]} for ${datatype}, got ${describe(data[i])}`);
    }
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

/** A short rendering of a bad value; NaN and undefined print as themselves, not as JSON null. */
function describe(v: unknown): string {
  const s = typeof v === 'string' || isObject(v) || Array.isArray(v) ? JSON.stringify(v) : String(v);
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

function fail(code: string, message: string, status?: 413): never {
  throw new InvalidInputError(code, message, status ? { status } : undefined);
}
