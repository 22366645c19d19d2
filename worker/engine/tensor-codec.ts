/**
 * Tensor conversion between the wire form (OIP tensors: flat JSON data, infra/contracts/oip.ts) and the
 * engine form (typed arrays, engine.ts), and the row operations the batcher needs: concatenate
 * many jobs along axis 0 into one forward pass, and split the outputs back.
 *
 * Pure: no I/O. Values the target type cannot hold are refused (InvalidInputError) by the
 * datatype's rule (infra/contracts/datatypes.ts, the one table), rather than wrapped or rounded
 * silently, because a typed array would store 300 as 44 in int8 and 70000 as Infinity in FP16.
 */

import {
  DATATYPE_INFO,
  type Datatype,
  datatypeOfOnnxName,
  elementOf,
  isNumericDatatype,
  type PackedArrayConstructor,
  typedArrayFor,
} from '../../infra/contracts/datatypes.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { jsonValues } from '../../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { decodeHalf, encodeHalf } from '../../infra/kernel/half-float.ts';
import type { EngineData, EngineDtype, EngineTensor } from './engine.ts';

export { decodeHalf, encodeHalf };

type NumericData = Exclude<EngineData, string[]>;

/** ONNX Runtime's name for a datatype (the table's, contracts/datatypes.ts). */
export function datatypeToDtype(datatype: Datatype): EngineDtype {
  if (!Object.hasOwn(DATATYPE_INFO, datatype))
    throw new InvalidInputError('unsupported_datatype', `unsupported datatype ${String(datatype)}`);
  return DATATYPE_INFO[datatype].onnx.name;
}

export function dtypeToDatatype(dtype: EngineDtype): Datatype {
  const datatype = datatypeOfOnnxName(dtype);
  if (!datatype) throw new Error(`unsupported engine dtype ${String(dtype)}`);
  return datatype;
}

/** The typed array of a numeric engine dtype. */
function arrayOf(type: Exclude<EngineDtype, 'string'>): PackedArrayConstructor {
  const datatype = dtypeToDatatype(type);
  if (!isNumericDatatype(datatype)) throw new Error(`engine dtype ${type} has no typed array`);
  return typedArrayFor(datatype);
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

/** JSON values into the dtype's typed array by the datatype's rule (contracts/datatypes.ts): refused, never wrapped. */
function encodeNumeric(type: Exclude<EngineDtype, 'string'>, t: OipTensor): NumericData {
  const out = new (arrayOf(type))(t.data.length);
  const rule = elementOf(dtypeToDatatype(type));
  // Index writes through a widened view: the rule yields the element kind (number or bigint)
  // that matches the datatype's typed array.
  const sink = out as unknown as { [i: number]: number | bigint };
  for (let i = 0; i < t.data.length; i++) {
    const value = rule(t.data[i]);
    if (value === undefined) throw invalidElement(t, i);
    sink[i] = value as number | bigint;
  }
  return out;
}

/** Throws when the data is not the array kind `type` calls for, or its length does not match `dims`. */
export function checkTensor(t: EngineTensor): void {
  const kindOk = t.type === 'string' ? Array.isArray(t.data) : t.data instanceof arrayOf(t.type);
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
  const out = new (arrayOf(type))(length);
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
  const out = new (arrayOf(t.type))(elementCount(dims));
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

/** Buffers whose bytes their owner reads again after a run: forTransfer copies them rather than detach them. */
const keptBuffers = new WeakSet<ArrayBufferLike>();

/**
 * `data`, its buffer marked as still needed by the caller, so that a run copies it only if it
 * would otherwise hand the buffer itself to the inference thread (a batch of one slice that spans
 * it); a batch that concatenates slices copies into its own buffer anyway, and then nothing more is.
 */
export function keptOnTransfer(data: EngineData): EngineData {
  if (!Array.isArray(data)) keptBuffers.add(data.buffer);
  return data;
}

/**
 * Makes every typed array own its whole, non-shared buffer (copying the ones that are views on
 * a larger or shared buffer, or kept: keptOnTransfer) and lists the buffers to transfer through
 * postMessage. Transferring a view's buffer would detach bytes the caller still uses elsewhere,
 * e.g. Node's Buffer pool.
 */
export function forTransfer(tensors: Record<string, EngineTensor>): { tensors: Record<string, EngineTensor>; transfer: ArrayBuffer[] } {
  const out: Record<string, EngineTensor> = {};
  const transfer = new Set<ArrayBuffer>();
  for (const [name, t] of Object.entries(tensors)) {
    let data = t.data;
    if (!Array.isArray(data)) {
      const whole = data.buffer instanceof ArrayBuffer && data.byteOffset === 0 && data.byteLength === data.buffer.byteLength;
      if (!whole || keptBuffers.has(data.buffer) || transfer.has(data.buffer as ArrayBuffer)) data = data.slice();
      transfer.add(data.buffer as ArrayBuffer);
    }
    out[name] = { type: t.type, dims: [...t.dims], data };
  }
  return { tensors: out, transfer: [...transfer] };
}
