/**
 * Packed tensors: how online requests' tensors travel between the API and the workers (DESIGN
 * §4, issue 15's "binary inside"). Many tensors share one byte buffer, stored in Redis as a
 * binary string (never base64 inside job JSON), and described by small specs in the job's JSON:
 *
 *   spec  { name, datatype, shape, offset, length }   shape[0] = rows; offset 8-byte aligned
 *   bytes numeric: the elements little-endian, row-major (FP16 as IEEE half bits, BOOL one byte 0/1)
 *         BYTES:   per element a 4-byte little-endian length, then that many bytes (the KServe
 *                  binary extension's layout for BYTES)
 *
 * Readers build typed arrays over the bytes (`tensorData`: no per-element loop; one copy of the
 * whole buffer at most, when Redis handed it back unaligned), so a worker goes from a Redis
 * reply to ONNX Runtime tensors in O(1) JS work per tensor. JSON numbers exist only at the HTTP
 * edge: `fromJsonData` (after oip-validate has checked every value) and `rowsTensor`'s `data`.
 *
 * Pure, no I/O. This module is the one place that knows byte layouts; what each datatype's
 * element is (its typed array, its value rule) is datatypes.ts's.
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { type BatchAxis, isMoved, modelShape, toModelLayout } from './batch-axes.ts';
import {
  DATATYPE_INFO,
  type Datatype,
  elementOf,
  isNumericDatatype,
  itemBytes,
  jsonElement,
  type PackedArray,
  typedArrayFor,
} from './datatypes.ts';
import type { OipTensor } from './oip.ts';

export interface PackedSpec {
  name: string;
  datatype: Datatype;
  /** shape[0] is the rows. */
  shape: number[];
  /** An output the model keeps its rows elsewhere for (batch-axes.ts): shown to callers in the model's layout. */
  batchAxis?: BatchAxis;
  /** Where the tensor's bytes start in the shared buffer (a multiple of 8). */
  offset: number;
  length: number;
}

/**
 * A tensor's elements: a typed array (numeric) or strings (BYTES). The one in-memory form of
 * elements from the HTTP edge to ONNX Runtime: the engine's EngineData, the bulk readers'
 * RowsTensor data and a validated binary input are all this.
 */
export type TensorData = PackedArray | readonly string[];

export interface TensorToPack {
  name: string;
  datatype: Datatype;
  shape: number[];
  data: TensorData;
  batchAxis?: BatchAxis;
}

export interface PackedSet {
  specs: PackedSpec[];
  bytes: Buffer;
}

const ALIGN = 8;
/** Where rowsTensor keeps its rows' typed view (non-enumerable: JSON never sees it). */
const PACKED = Symbol('packedData');
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function elementsOf(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/**
 * The bytes `packTensors(tensors)` would take, without packing: numeric data as it is, BYTES as a
 * 4-byte length and the UTF-8 bytes per element, each tensor padded to the alignment. What a job
 * is charged against its tenant's stored-bytes budget before its entry is written.
 */
export function packedSize(tensors: readonly TensorToPack[]): number {
  let n = 0;
  for (const t of tensors) {
    const length = Array.isArray(t.data)
      ? (t.data as readonly string[]).reduce((sum, v) => sum + 4 + Buffer.byteLength(v, 'utf8'), 0)
      : (t.data as { byteLength: number }).byteLength;
    n = align(n + length);
  }
  return n;
}

/** One buffer holding every tensor, each at an 8-byte aligned offset. */
export function packTensors(tensors: readonly TensorToPack[]): PackedSet {
  const encoded = tensors.map((t) => wireBytes(t.datatype, t.data));
  const specs: PackedSpec[] = [];
  let at = 0;
  tensors.forEach((t, i) => {
    const length = (encoded[i] as Uint8Array).byteLength;
    const moved = isMoved(t.batchAxis) ? { batchAxis: t.batchAxis } : {};
    specs.push({ name: t.name, datatype: t.datatype, shape: [...t.shape], offset: at, length, ...moved });
    at = align(at + length);
  });
  // Buffer.alloc (not allocUnsafe): never a slice of Node's pool, so its start is aligned, and the padding is zeros.
  const bytes = Buffer.alloc(at);
  encoded.forEach((b, i) => {
    bytes.set(b, (specs[i] as PackedSpec).offset);
  });
  return { specs, bytes };
}

/**
 * A tensor's elements over `bytes` (as Redis returned them). Numeric: a typed array view, after
 * one copy of the whole buffer when it is not aligned (see `aligned`); BYTES: the decoded strings.
 * InvalidInputError when the spec does not fit the bytes or the shape.
 */
export function tensorData(spec: PackedSpec, bytes: Uint8Array): TensorData {
  const elements = elementsOf(spec.shape);
  if (!Number.isSafeInteger(spec.offset) || spec.offset < 0 || spec.offset + spec.length > bytes.byteLength) {
    throw new InvalidInputError('invalid_data', `tensor "${spec.name}": its bytes lie outside the packed data`);
  }
  if (spec.datatype === 'BYTES') return decodeStrings(spec, bytes.subarray(spec.offset, spec.offset + spec.length), elements);
  if (!Object.hasOwn(DATATYPE_INFO, spec.datatype) || !isNumericDatatype(spec.datatype))
    throw new InvalidInputError('unsupported_datatype', `tensor "${spec.name}": unsupported datatype ${String(spec.datatype)}`);
  const item = itemBytes(spec.datatype);
  if (spec.length !== elements * item) {
    throw new InvalidInputError(
      'data_length_mismatch',
      `tensor "${spec.name}": shape [${spec.shape.join(', ')}] of ${spec.datatype} needs ${elements * item} bytes, got ${spec.length}`,
    );
  }
  requireLittleEndian();
  if ((bytes.byteOffset + spec.offset) % item !== 0) {
    throw new Error('tensorData: unaligned bytes; pass them through aligned() first');
  }
  return new (typedArrayFor(spec.datatype))(bytes.buffer as ArrayBuffer, bytes.byteOffset + spec.offset, elements);
}

/** `bytes` itself when its start is 8-byte aligned, else one copy that is (a Redis reply may be a slice of a socket chunk). */
export function aligned(bytes: Buffer): Buffer {
  if (bytes.byteOffset % ALIGN === 0) return bytes;
  const copy = Buffer.alloc(bytes.byteLength);
  copy.set(bytes);
  return copy;
}

/**
 * Rows [start, end) of a tensor as the API shows an output: an OIP tensor whose `data` is the
 * JSON form, made only when something reads it (a JSON response, a webhook body, a test), while
 * `packedData` gives the same rows as a zero-copy view for a binary response (the OIP binary
 * tensor extension, gRPC's raw contents) without any per-element pass. `data` is an own,
 * enumerable accessor, so JSON.stringify and object spread see the JSON values as if plain.
 */
export function rowsTensor(
  name: string,
  datatype: Datatype,
  shape: readonly number[],
  data: TensorData,
  start?: number,
  end?: number,
  batchAxis?: BatchAxis,
): OipTensor {
  const rows = shape[0] ?? 1;
  const from = start ?? 0;
  const to = end ?? rows;
  const rowSize = shape.length === 0 ? 1 : elementsOf(shape.slice(1));
  const rowsPart = Array.isArray(data)
    ? (data as readonly string[]).slice(from * rowSize, to * rowSize)
    : (data as PackedArray).subarray(from * rowSize, to * rowSize);
  const partShape = shape.length === 0 ? [] : [to - from, ...shape.slice(1)];
  // In the model's own layout when it keeps the rows elsewhere (one copy of these rows).
  const part = toModelLayout(rowsPart, partShape, batchAxis);
  const outShape = modelShape(partShape, batchAxis);
  let json: OipTensor['data'] | undefined;
  const tensor = { name, datatype, shape: outShape } as OipTensor;
  Object.defineProperty(tensor, 'data', {
    enumerable: true,
    configurable: true,
    get: () => {
      json ??= jsonValues(datatype, part);
      return json;
    },
  });
  Object.defineProperty(tensor, PACKED, { value: part, enumerable: false });
  return tensor;
}

/**
 * A tensor's elements as typed data: the view `rowsTensor` keeps, or — for a tensor that went
 * through JSON (a result read back from a tombstone, a job from before packed outputs) — its
 * JSON values converted once.
 */
export function packedData(tensor: Pick<OipTensor, 'datatype' | 'data'>): TensorData {
  return packedView(tensor) ?? fromJsonData(tensor.datatype, tensor.data);
}

/** The typed view `rowsTensor` keeps, or undefined for a plain JSON tensor; never touches `data`. */
export function packedView(tensor: object): TensorData | undefined {
  return (tensor as { [PACKED]?: TensorData })[PACKED];
}

/**
 * Elements in the OIP binary layout (numeric: little-endian element bytes, a view, no copy;
 * BYTES: 4-byte little-endian length + bytes per element).
 */
export function wireBytes(datatype: Datatype, data: TensorData): Uint8Array {
  requireLittleEndian();
  return datatype === 'BYTES' ? encodeStrings(data as readonly string[]) : asBytes(data as PackedArray);
}

/**
 * Elements as JSON values: 64-bit integers beyond 2^53 as decimal strings, FP16 decoded, BOOL as
 * booleans (datatypes.ts's jsonElement; also the worker's engineToOip).
 */
export function jsonValues(datatype: Datatype, data: TensorData): OipTensor['data'] {
  if (Array.isArray(data)) return [...(data as readonly string[])];
  const typed = data as PackedArray;
  const kind = DATATYPE_INFO[datatype].kind;
  if (kind === 'float' || kind === 'int') return Array.from(typed as Float64Array);
  return Array.from(typed as Float64Array, jsonElement(datatype) as (e: number) => number);
}

/**
 * The typed array (or strings) for validated JSON data (oip-validate.ts has checked every
 * element by datatypes.ts's rule, which also gives the stored element). The one per-element
 * pass at the HTTP edge; plain numbers into float and 8–32-bit arrays go by the native copy.
 */
export function fromJsonData(datatype: Datatype, values: OipTensor['data']): TensorData {
  if (!isNumericDatatype(datatype)) return values as string[];
  const Ctor = typedArrayFor(datatype);
  const kind = DATATYPE_INFO[datatype].kind;
  if (kind === 'float' || kind === 'int') return (Ctor as unknown as { from(v: ArrayLike<number>): PackedArray }).from(values as number[]);
  const rule = elementOf(datatype);
  const out = new Ctor(values.length) as unknown as { [i: number]: number | bigint };
  for (let i = 0; i < values.length; i++) out[i] = rule(values[i]) as number | bigint;
  return out as unknown as PackedArray;
}

/** Bytes of `spec`'s rows [start, end) — numeric tensors only (fixed row size). */
export function rowBytes(spec: PackedSpec, start: number, end: number): { offset: number; length: number } {
  if (spec.datatype === 'BYTES') throw new Error('rowBytes: BYTES rows have no fixed size');
  const rowLength = spec.shape.length === 0 ? spec.length : spec.length / Math.max(1, spec.shape[0] ?? 1);
  return { offset: spec.offset + start * rowLength, length: (end - start) * rowLength };
}

function align(n: number): number {
  return Math.ceil(n / ALIGN) * ALIGN;
}

function asBytes(data: PackedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Strings in the 4-byte-length layout, in one pass and one allocation: a UTF-16 code unit is at
 * most 3 UTF-8 bytes (a lone surrogate becomes U+FFFD's 3; a pair, 4 bytes for 2 units), so
 * 4 + 3 × length per string always fits, and the unused tail is cut off. No Buffer per string:
 * 2 Mi empty strings took 2 Mi allocations before.
 */
function encodeStrings(values: readonly string[]): Uint8Array {
  let units = 0;
  for (const v of values) units += v.length;
  const out = Buffer.allocUnsafe(4 * values.length + 3 * units);
  let at = 0;
  for (const v of values) {
    const n = v.length === 0 ? 0 : out.write(v, at + 4, 'utf8');
    out.writeUInt32LE(n, at);
    at += 4 + n;
  }
  return out.subarray(0, at);
}

function decodeStrings(spec: PackedSpec, bytes: Uint8Array, elements: number): string[] {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const mismatch = () =>
    new InvalidInputError(
      'data_length_mismatch',
      `tensor "${spec.name}": its BYTES data does not hold the ${elements} elements its shape declares`,
    );
  // Every element takes 4 bytes at least: a shape that declares more cannot fit, and is refused before any string is made.
  if (elements * 4 > view.byteLength) throw mismatch();
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < elements; i++) {
    if (at + 4 > view.byteLength) break;
    const n = view.readUInt32LE(at);
    if (at + 4 + n > view.byteLength) break;
    out.push(n === 0 ? '' : view.toString('utf8', at + 4, at + 4 + n));
    at += 4 + n;
  }
  if (out.length !== elements || at !== view.byteLength) throw mismatch();
  return out;
}

function requireLittleEndian(): void {
  if (!LITTLE_ENDIAN) throw new Error('packed tensors need a little-endian host');
}
