/**
 * The binary tensor form of bulk chunk jobs (DESIGN §7): a numeric input's data as base64 of its
 * little-endian element bytes, marked `parameters: { encoding: 'base64' }`. A 1000-row chunk of
 * 256 floats is ~5 MB as JSON numbers, and stringifying it in the driver and parsing and
 * validating it in the worker cost far more than the forward pass; packed it is ~1.4 MB of one
 * string. Internal to job data only: the API refuses a string `data` (oip-validate.ts), and the
 * worker accepts this form on bulk chunk jobs alone. BYTES tensors keep JSON data.
 *
 * This module is the one place that knows the layout: the chunker encodes with
 * `encodeBinaryTensor`, the worker decodes with `binaryBytes` and `BINARY_ITEM_BYTES`.
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { encodeHalf } from '../kernel/half-float.ts';
import type { Datatype } from './oip.ts';

export type BinaryDatatype = Exclude<Datatype, 'BYTES'>;

export interface BinaryTensor {
  name: string;
  shape: number[];
  datatype: BinaryDatatype;
  /** base64 of the elements' little-endian bytes, row-major (FP16: half bits; BOOL: one byte 0/1). */
  data: string;
  parameters: { encoding: 'base64' };
}

/** Bytes per element of each packed datatype. */
export const BINARY_ITEM_BYTES: Record<BinaryDatatype, number> = {
  BOOL: 1,
  UINT8: 1,
  INT8: 1,
  UINT16: 2,
  INT16: 2,
  FP16: 2,
  UINT32: 4,
  INT32: 4,
  FP32: 4,
  UINT64: 8,
  INT64: 8,
  FP64: 8,
};

/** Every typed array a numeric tensor packs into (the engine's EngineData is these or string[]). */
export type PackedArray =
  | Float32Array
  | Float64Array
  | Int8Array
  | Uint8Array
  | Int16Array
  | Uint16Array
  | Int32Array
  | Uint32Array
  | BigInt64Array
  | BigUint64Array;

/** The typed array each packed datatype's elements live in (also packed-tensors.ts's). */
export const ARRAY_OF: Record<
  BinaryDatatype,
  { new (length: number): PackedArray; new (buffer: ArrayBuffer, offset: number, length: number): PackedArray }
> = {
  BOOL: Uint8Array,
  UINT8: Uint8Array,
  INT8: Int8Array,
  UINT16: Uint16Array,
  INT16: Int16Array,
  FP16: Uint16Array,
  UINT32: Uint32Array,
  INT32: Int32Array,
  FP32: Float32Array,
  UINT64: BigUint64Array,
  INT64: BigInt64Array,
  FP64: Float64Array,
};

/** Typed arrays use the host's byte order; the wire form is little-endian, so a big-endian host cannot use it. */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

export function isBinaryDatatype(datatype: Datatype): datatype is BinaryDatatype {
  return datatype !== 'BYTES';
}

/** A tensor in this form (the marker is what the worker looks at; the rest is checked on decode). */
export function isBinaryTensor(t: unknown): t is BinaryTensor {
  if (typeof t !== 'object' || t === null) return false;
  const params = (t as { parameters?: unknown }).parameters;
  return typeof params === 'object' && params !== null && (params as { encoding?: unknown }).encoding === 'base64';
}

type Element = number | boolean | string;

/**
 * Packs already-validated values (oip-validate's checks: in range for the datatype; 64-bit
 * integers may be decimal strings) into the binary form. `values` yields `shape`'s elements in
 * row-major order; its length must match the shape.
 */
export function encodeBinaryTensor(
  name: string,
  datatype: BinaryDatatype,
  shape: number[],
  values: Iterable<ArrayLike<Element>>,
): BinaryTensor {
  requireLittleEndian();
  const length = shape.reduce((n, d) => n * d, 1);
  const out = new ARRAY_OF[datatype](length);
  const sink = out as unknown as { [i: number]: number | bigint };
  const convert = elementConverter(datatype);
  let at = 0;
  for (const part of values) {
    if (at + part.length > length) break;
    for (let i = 0; i < part.length; i++) sink[at++] = convert(part[i] as Element);
  }
  if (at !== length) throw new Error(`input "${name}": shape [${shape.join(',')}] holds ${length} elements, got ${at}`);
  const data = Buffer.from(out.buffer, out.byteOffset, out.byteLength).toString('base64');
  return { name, shape, datatype, data, parameters: { encoding: 'base64' } };
}

/**
 * The packed bytes of a binary tensor, checked against its shape: byte length = elements × item
 * size. Invalid input (the job is refused, not retried) when they disagree. The bytes are a copy
 * in their own buffer, so typed-array views on them are aligned.
 */
export function binaryBytes(t: BinaryTensor): Uint8Array {
  requireLittleEndian();
  const item = BINARY_ITEM_BYTES[t.datatype];
  if (item === undefined)
    throw new InvalidInputError('invalid_data', `input "${t.name}": datatype ${String(t.datatype)} has no binary form`);
  if (!Array.isArray(t.shape) || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new InvalidInputError('invalid_shape', `input "${t.name}": shape must be non-negative integers`);
  }
  if (typeof t.data !== 'string') throw new InvalidInputError('invalid_data', `input "${t.name}": base64 data must be a string`);
  const decoded = Buffer.from(t.data, 'base64');
  const expected = t.shape.reduce((n, d) => n * d, 1) * item;
  if (decoded.byteLength !== expected) {
    throw new InvalidInputError(
      'data_length_mismatch',
      `input "${t.name}": shape [${t.shape.join(', ')}] of ${t.datatype} needs ${expected} bytes, the base64 data holds ${decoded.byteLength}`,
    );
  }
  const bytes = new Uint8Array(expected);
  bytes.set(decoded);
  return bytes;
}

function elementConverter(datatype: BinaryDatatype): (v: Element) => number | bigint {
  if (datatype === 'FP16') return (v) => encodeHalf(v as number);
  if (datatype === 'BOOL') return (v) => (v === true || v === 1 ? 1 : 0);
  if (datatype === 'INT64' || datatype === 'UINT64') return (v) => BigInt(v);
  return (v) => v as number;
}

function requireLittleEndian(): void {
  if (!LITTLE_ENDIAN) throw new Error('binary tensors need a little-endian host');
}
