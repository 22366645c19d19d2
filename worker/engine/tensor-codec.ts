/**
 * Tensor conversion between the wire form (OIP tensors: flat JSON data, infra/contracts/oip.ts) and the
 * engine form (typed arrays, engine.ts), and the row operations the batcher needs: concatenate
 * many jobs along axis 0 into one forward pass, and split the outputs back.
 *
 * Pure: no I/O. Values the target type cannot hold exactly are refused (InvalidInputError)
 * rather than wrapped or rounded silently, because a typed array would store 300 as 44 in int8.
 */

import { type BinaryTensor, binaryBytes } from '../../infra/contracts/binary-tensor.ts';
import type { Datatype, OipTensor } from '../../infra/contracts/oip.ts';
import { jsonValues } from '../../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { decodeHalf, encodeHalf } from '../../infra/kernel/half-float.ts';
import type { EngineData, EngineDtype, EngineTensor } from './engine.ts';

export { decodeHalf, encodeHalf };

const DTYPE_OF: Record<Datatype, EngineDtype> = {
  BOOL: 'bool',
  UINT8: 'uint8',
  UINT16: 'uint16',
  UINT32: 'uint32',
  UINT64: 'uint64',
  INT8: 'int8',
  INT16: 'int16',
  INT32: 'int32',
  INT64: 'int64',
  FP16: 'float16',
  FP32: 'float32',
  FP64: 'float64',
  BYTES: 'string',
};

const DATATYPE_OF = Object.fromEntries(Object.entries(DTYPE_OF).map(([k, v]) => [v, k])) as Record<EngineDtype, Datatype>;

type NumericData = Exclude<EngineData, string[]>;
type NumericCtor = new (length: number) => NumericData;

const ARRAY_OF: Record<Exclude<EngineDtype, 'string'>, NumericCtor> = {
  float32: Float32Array,
  float64: Float64Array,
  float16: Uint16Array,
  int8: Int8Array,
  uint8: Uint8Array,
  int16: Int16Array,
  uint16: Uint16Array,
  int32: Int32Array,
  uint32: Uint32Array,
  int64: BigInt64Array,
  uint64: BigUint64Array,
  bool: Uint8Array,
};

/** Ranges of the integer types a JS number can hold exactly. */
const INT_RANGE: Partial<Record<EngineDtype, [number, number]>> = {
  int8: [-128, 127],
  uint8: [0, 255],
  int16: [-32768, 32767],
  uint16: [0, 65535],
  int32: [-2147483648, 2147483647],
  uint32: [0, 4294967295],
};

const BIG_RANGE: Partial<Record<EngineDtype, [bigint, bigint]>> = {
  int64: [-(2n ** 63n), 2n ** 63n - 1n],
  uint64: [0n, 2n ** 64n - 1n],
};

export function datatypeToDtype(datatype: Datatype): EngineDtype {
  const dtype = DTYPE_OF[datatype];
  if (!dtype) throw new InvalidInputError('unsupported_datatype', `unsupported datatype ${String(datatype)}`);
  return dtype;
}

export function dtypeToDatatype(dtype: EngineDtype): Datatype {
  const datatype = DATATYPE_OF[dtype];
  if (!datatype) throw new Error(`unsupported engine dtype ${String(dtype)}`);
  return datatype;
}

/** Number of elements a shape holds. */
export function elementCount(dims: readonly number[]): number {
  return dims.reduce((n, d) => n * d, 1);
}

export function oipToEngine(t: OipTensor): EngineTensor {
  const type = datatypeToDtype(t.datatype);
  const dims = checkedShape(t);
  const data = type === 'string' ? encodeStrings(t) : encodeNumeric(type, t);
  return { type, dims, data };
}

/**
 * A bulk chunk's packed input (infra/contracts/binary-tensor.ts) as an engine tensor: a typed array over
 * the decoded bytes, no number arrays. Invalid input when the bytes do not fit the shape, a BOOL
 * byte is not 0/1, or a float is not finite (the same values a JSON request is refused for).
 */
export function decodeBinaryTensor(t: BinaryTensor): EngineTensor {
  const type = datatypeToDtype(t.datatype);
  if (type === 'string') throw new InvalidInputError('invalid_data', `input "${t.name}": BYTES has no binary form`);
  const bytes = binaryBytes(t);
  const Ctor = ARRAY_OF[type] as unknown as new (buffer: ArrayBuffer) => NumericData;
  const data = new Ctor(bytes.buffer as ArrayBuffer);
  const bad = badBinaryElement(type, data);
  if (bad >= 0) throw new InvalidInputError('invalid_data', `input "${t.name}": element ${bad} is not a valid ${t.datatype}`);
  return { type, dims: [...t.shape], data };
}

/** Index of the first element a JSON request would be refused for, or -1. */
function badBinaryElement(type: Exclude<EngineDtype, 'string'>, data: NumericData): number {
  if (type === 'bool') return (data as Uint8Array).findIndex((v) => v > 1);
  if (type === 'float32' || type === 'float64') return (data as Float32Array).findIndex((v) => !Number.isFinite(v));
  // Exponent all ones: ±inf or NaN.
  if (type === 'float16') return (data as Uint16Array).findIndex((v) => (v & 0x7c00) === 0x7c00);
  return -1;
}

export function engineToOip(name: string, t: EngineTensor): OipTensor {
  checkTensor(t);
  return { name, shape: [...t.dims], datatype: dtypeToDatatype(t.type), data: jsonValues(dtypeToDatatype(t.type), t.data) };
}

function checkedShape(t: OipTensor): number[] {
  if (!Array.isArray(t.shape) || t.shape.some((d) => !Number.isSafeInteger(d) || d < 0)) {
    throw new InvalidInputError('invalid_shape', `input "${t.name}": shape must be non-negative integers`);
  }
  if (!Array.isArray(t.data) || t.data.length !== elementCount(t.shape)) {
    throw new InvalidInputError(
      'invalid_shape',
      `input "${t.name}": shape [${t.shape.join(',')}] holds ${elementCount(t.shape)} elements, data has ${Array.isArray(t.data) ? t.data.length : 'none'}`,
    );
  }
  return [...t.shape];
}

function invalidElement(t: OipTensor, i: number): InvalidInputError {
  return new InvalidInputError(
    'invalid_data',
    `input "${t.name}": element ${i} (${JSON.stringify(t.data[i])}) is not a valid ${t.datatype}`,
  );
}

function encodeStrings(t: OipTensor): string[] {
  return t.data.map((v, i) => {
    if (typeof v !== 'string') throw invalidElement(t, i);
    return v;
  });
}

function encodeNumeric(type: Exclude<EngineDtype, 'string'>, t: OipTensor): NumericData {
  const out = new ARRAY_OF[type](t.data.length);
  const convert = elementEncoder(type);
  // Index writes through a widened view: each branch of elementEncoder yields the element
  // kind (number or bigint) that matches the array ARRAY_OF chose for the same type.
  const sink = out as unknown as { [i: number]: number | bigint };
  for (let i = 0; i < t.data.length; i++) {
    const value = convert(t.data[i]);
    if (value === undefined) throw invalidElement(t, i);
    sink[i] = value;
  }
  return out;
}

type ElementEncoder = (v: unknown) => number | bigint | undefined;

function elementEncoder(type: Exclude<EngineDtype, 'string'>): ElementEncoder {
  if (type === 'float32' || type === 'float64') return (v) => (typeof v === 'number' ? v : undefined);
  if (type === 'float16') return (v) => (typeof v === 'number' ? encodeHalf(v) : undefined);
  if (type === 'bool') return encodeBool;
  const big = BIG_RANGE[type];
  if (big) return (v) => encodeBigInt(v, big);
  const [min, max] = INT_RANGE[type] ?? [0, -1];
  return (v) => (typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max ? v : undefined);
}

function encodeBool(v: unknown): number | undefined {
  if (v === true || v === 1) return 1;
  if (v === false || v === 0) return 0;
  return undefined;
}

/** Integers only: a JS integer or a decimal string (64-bit values beyond 2^53 travel as strings). */
function encodeBigInt(v: unknown, [min, max]: [bigint, bigint]): bigint | undefined {
  let n: bigint;
  if (typeof v === 'number' && Number.isInteger(v)) n = BigInt(v);
  else if (typeof v === 'string' && /^-?\d{1,20}$/.test(v)) n = BigInt(v);
  else return undefined;
  return n >= min && n <= max ? n : undefined;
}

/** Throws when the data is not the array kind `type` calls for, or its length does not match `dims`. */
export function checkTensor(t: EngineTensor): void {
  const kindOk = t.type === 'string' ? Array.isArray(t.data) : t.data instanceof ARRAY_OF[t.type];
  if (!kindOk) throw new Error(`tensor data is ${t.data.constructor.name}, not the array for ${t.type}`);
  if (t.data.length !== elementCount(t.dims)) {
    throw new Error(`tensor dims [${t.dims.join(',')}] hold ${elementCount(t.dims)} elements, data has ${t.data.length}`);
  }
}

/**
 * Concatenates along axis 0. Always copies, so the parts stay intact for the caller (the
 * batcher re-runs sub-batches from them when a forward pass fails) while the result may be
 * transferred to the inference thread.
 */
export function concatRows(parts: EngineTensor[]): EngineTensor {
  const first = parts[0];
  if (!first) throw new Error('concatRows: no parts');
  let rows = 0;
  parts.forEach((p, i) => {
    checkTensor(p);
    if (p.type !== first.type) throw new Error(`concatRows: part ${i} is ${p.type}, part 0 is ${first.type}`);
    if (p.dims.length < 1 || p.dims.length !== first.dims.length || p.dims.some((d, k) => k > 0 && d !== first.dims[k])) {
      throw new Error(`concatRows: part ${i} has dims [${p.dims.join(',')}], part 0 has [${first.dims.join(',')}]`);
    }
    rows += p.dims[0] ?? 0;
  });
  const dims = [rows, ...first.dims.slice(1)];
  if (first.type === 'string') return { type: first.type, dims, data: parts.flatMap((p) => p.data as string[]) };
  return {
    type: first.type,
    dims,
    data: concatNumeric(
      first.type,
      parts.map((p) => p.data as NumericData),
      elementCount(dims),
    ),
  };
}

function concatNumeric(type: Exclude<EngineDtype, 'string'>, parts: NumericData[], length: number): NumericData {
  const out = new ARRAY_OF[type](length);
  // Byte copies: the same code for every element type, and no union-typed `set` overloads.
  const bytes = new Uint8Array(out.buffer);
  let offset = 0;
  for (const p of parts) {
    bytes.set(new Uint8Array(p.buffer, p.byteOffset, p.byteLength), offset);
    offset += p.byteLength;
  }
  return out;
}

/** Rows [start, end) as a new tensor with its own buffer. */
export function sliceRows(t: EngineTensor, start: number, end: number): EngineTensor {
  checkTensor(t);
  const rows = t.dims[0];
  if (rows === undefined) throw new Error('sliceRows: a scalar has no rows');
  if (!Number.isInteger(start) || !Number.isInteger(end) || start < 0 || end < start || end > rows) {
    throw new Error(`sliceRows: [${start}, ${end}) is outside 0..${rows}`);
  }
  const rowSize = elementCount(t.dims.slice(1));
  return { type: t.type, dims: [end - start, ...t.dims.slice(1)], data: t.data.slice(start * rowSize, end * rowSize) };
}

/**
 * A new tensor whose row k is row `indices[k]` of `t` (any order, repeats allowed): picks the
 * distinct rows of a batch, and copies each one's outputs back to its duplicates.
 */
export function gatherRows(t: EngineTensor, indices: ArrayLike<number>): EngineTensor {
  checkTensor(t);
  const rows = t.dims[0];
  if (rows === undefined) throw new Error('gatherRows: a scalar has no rows');
  const dims = [indices.length, ...t.dims.slice(1)];
  const rowSize = elementCount(t.dims.slice(1));
  const check = (r: number) => {
    if (!Number.isInteger(r) || r < 0 || r >= rows) throw new Error(`gatherRows: row ${r} is outside 0..${rows}`);
    return r;
  };
  if (t.type === 'string') {
    const data = t.data as string[];
    const out: string[] = [];
    for (let k = 0; k < indices.length; k++) {
      const r = check(indices[k] as number);
      for (let i = 0; i < rowSize; i++) out.push(data[r * rowSize + i] as string);
    }
    return { type: t.type, dims, data: out };
  }
  const data = t.data as NumericData;
  const out = new ARRAY_OF[t.type](elementCount(dims));
  // Byte copies, as in concatNumeric.
  const rowBytes = rowSize * data.BYTES_PER_ELEMENT;
  const from = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const to = new Uint8Array(out.buffer);
  for (let k = 0; k < indices.length; k++) {
    const r = check(indices[k] as number);
    to.set(from.subarray(r * rowBytes, (r + 1) * rowBytes), k * rowBytes);
  }
  return { type: t.type, dims, data: out };
}

/** Splits along axis 0 into consecutive parts of `rowCounts` rows; the counts must sum to dims[0]. */
export function splitRows(t: EngineTensor, rowCounts: number[]): EngineTensor[] {
  const total = rowCounts.reduce((a, b) => a + b, 0);
  if (total !== t.dims[0]) throw new Error(`splitRows: counts sum to ${total}, tensor has ${t.dims[0] ?? 0} rows`);
  const parts: EngineTensor[] = [];
  let start = 0;
  for (const count of rowCounts) {
    parts.push(sliceRows(t, start, start + count));
    start += count;
  }
  return parts;
}

/**
 * Makes every typed array own its whole, non-shared buffer (copying the ones that are views on
 * a larger or shared buffer) and lists the buffers to transfer through postMessage. Transferring
 * a view's buffer would detach bytes the caller still uses elsewhere, e.g. Node's Buffer pool.
 */
export function forTransfer(tensors: Record<string, EngineTensor>): { tensors: Record<string, EngineTensor>; transfer: ArrayBuffer[] } {
  const out: Record<string, EngineTensor> = {};
  const transfer = new Set<ArrayBuffer>();
  for (const [name, t] of Object.entries(tensors)) {
    let data = t.data;
    if (!Array.isArray(data)) {
      const whole = data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
      if (!whole || transfer.has(data.buffer as ArrayBuffer)) data = data.slice();
      transfer.add(data.buffer as ArrayBuffer);
    }
    out[name] = { type: t.type, dims: [...t.dims], data };
  }
  return { tensors: out, transfer: [...transfer] };
}
