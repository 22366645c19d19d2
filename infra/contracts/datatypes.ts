/**
 * The one table of Open Inference Protocol (KServe v2) datatypes: for each, the typed array its
 * elements live in (and so its item bytes), which values it holds, its ONNX element type and the
 * gRPC `contents` field its elements travel in. Every reader and writer derives from it: the
 * API's validation (oip-validate.ts), the packed and binary layouts (packed-tensors.ts,
 * oip-binary.ts), the tabular readers (JSONL, CSV, Parquet), the worker's tensor codec, the
 * gRPC conversion and the ONNX metadata reader. So a value gets one verdict on every path.
 *
 * The value rule (`elementOf`): a value is accepted when the datatype holds it as given, and
 * stored as exactly that element; anything else is refused, never wrapped or rounded to ±inf.
 *   BOOL       true, false, 0 or 1 (-0 too: it is 0)
 *   8–32-bit   an integer number in [min, max]
 *   64-bit     a safe integer number, a decimal string (exact past 2^53) or a bigint, in range
 *   FP16/FP32  a finite number whose rounding to the type is finite (|x| < 65520, |x| < 2^128 −
 *              2^103); rounding to the nearest representable value is the type's own business
 *   FP64       a finite number
 *   BYTES      a string
 * NaN and ±Infinity are refused for every float: JSON cannot carry them and the API has always
 * refused them there, so the binary paths refuse them too (their bits are checked by
 * `badElement`). -0 is a float like any other and kept. A bigint (Parquet INT64 columns) is an
 * exact integer: for the narrower types it is read as a number first.
 *
 * Pure, no I/O; imports only kernel/.
 */
import { decodeHalf, encodeHalf } from '../kernel/half-float.ts';

export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
] as const;
export type Datatype = (typeof DATATYPES)[number];
/** The datatypes with a fixed-size element (all but BYTES, whose elements are strings). */
export type NumericDatatype = Exclude<Datatype, 'BYTES'>;

/** Every typed array a numeric tensor's elements live in (FP16: half bits in a Uint16Array; BOOL: bytes 0/1). */
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

export interface PackedArrayConstructor {
  new (length: number): PackedArray;
  new (buffer: ArrayBuffer, offset?: number, length?: number): PackedArray;
  readonly BYTES_PER_ELEMENT: number;
}

/** How a datatype's values are ruled and stored: the rows of the table share these. */
export type Kind = 'bool' | 'int' | 'int64' | 'half' | 'float' | 'bytes';

/** ONNX Runtime's tensor type names (its `Tensor.type`), as the worker's engine uses them. */
export type OnnxTypeName =
  | 'bool'
  | 'uint8'
  | 'uint16'
  | 'uint32'
  | 'uint64'
  | 'int8'
  | 'int16'
  | 'int32'
  | 'int64'
  | 'float16'
  | 'float32'
  | 'float64'
  | 'string';

/** The gRPC TensorContents fields (grpc_predict_v2.proto). */
export type GrpcContentsField =
  | 'bool_contents'
  | 'int_contents'
  | 'int64_contents'
  | 'uint_contents'
  | 'uint64_contents'
  | 'fp32_contents'
  | 'fp64_contents'
  | 'bytes_contents';

export interface DatatypeInfo {
  kind: Kind;
  /** The typed array of the elements; absent for BYTES. Its BYTES_PER_ELEMENT is the item size. */
  array?: PackedArrayConstructor;
  /** Integers: the least and greatest value held. Floats: `max` is the magnitude that rounds to ±inf (exclusive). */
  min?: number | bigint;
  max?: number | bigint;
  /** TensorProto.DataType: its number and ONNX Runtime's name for it. */
  onnx: { readonly elem: number; readonly name: OnnxTypeName };
  /** The TensorContents field its elements travel in; absent for FP16, which gRPC carries raw only. */
  grpc?: GrpcContentsField;
}

/** The table. */
export const DATATYPE_INFO: { readonly [D in Datatype]: Readonly<DatatypeInfo> } = {
  BOOL: { kind: 'bool', array: Uint8Array, onnx: { elem: 9, name: 'bool' }, grpc: 'bool_contents' },
  UINT8: { kind: 'int', array: Uint8Array, min: 0, max: 255, onnx: { elem: 2, name: 'uint8' }, grpc: 'uint_contents' },
  UINT16: { kind: 'int', array: Uint16Array, min: 0, max: 65_535, onnx: { elem: 4, name: 'uint16' }, grpc: 'uint_contents' },
  UINT32: { kind: 'int', array: Uint32Array, min: 0, max: 4_294_967_295, onnx: { elem: 12, name: 'uint32' }, grpc: 'uint_contents' },
  UINT64: {
    kind: 'int64',
    array: BigUint64Array,
    min: 0n,
    max: 2n ** 64n - 1n,
    onnx: { elem: 13, name: 'uint64' },
    grpc: 'uint64_contents',
  },
  INT8: { kind: 'int', array: Int8Array, min: -128, max: 127, onnx: { elem: 3, name: 'int8' }, grpc: 'int_contents' },
  INT16: { kind: 'int', array: Int16Array, min: -32_768, max: 32_767, onnx: { elem: 5, name: 'int16' }, grpc: 'int_contents' },
  INT32: {
    kind: 'int',
    array: Int32Array,
    min: -2_147_483_648,
    max: 2_147_483_647,
    onnx: { elem: 6, name: 'int32' },
    grpc: 'int_contents',
  },
  INT64: {
    kind: 'int64',
    array: BigInt64Array,
    min: -(2n ** 63n),
    max: 2n ** 63n - 1n,
    onnx: { elem: 7, name: 'int64' },
    grpc: 'int64_contents',
  },
  // Half of the way from 65504 (the largest half) to 2^16 rounds to even: infinity.
  FP16: { kind: 'half', array: Uint16Array, max: 65_520, onnx: { elem: 10, name: 'float16' } },
  // Likewise from 2^128 − 2^104 (FLT_MAX) to 2^128.
  FP32: { kind: 'float', array: Float32Array, max: 2 ** 128 - 2 ** 103, onnx: { elem: 1, name: 'float32' }, grpc: 'fp32_contents' },
  FP64: { kind: 'float', array: Float64Array, max: Number.POSITIVE_INFINITY, onnx: { elem: 11, name: 'float64' }, grpc: 'fp64_contents' },
  BYTES: { kind: 'bytes', onnx: { elem: 8, name: 'string' }, grpc: 'bytes_contents' },
};

// ---- derived: arrays and sizes ----------------------------------------------------------------

export function isNumericDatatype(datatype: Datatype): datatype is NumericDatatype {
  return datatype !== 'BYTES';
}

/** The typed array a numeric datatype's elements live in. */
export function typedArrayFor(datatype: NumericDatatype): PackedArrayConstructor {
  return DATATYPE_INFO[datatype].array as PackedArrayConstructor;
}

/** Bytes per element of a numeric datatype (its typed array's). */
export function itemBytes(datatype: NumericDatatype): number {
  return typedArrayFor(datatype).BYTES_PER_ELEMENT;
}

/** `n` zeroed elements of a datatype: its typed array, or empty strings for BYTES. */
export function newElements(datatype: Datatype, n: number): PackedArray | string[] {
  return isNumericDatatype(datatype) ? new (typedArrayFor(datatype))(n) : new Array<string>(n).fill('');
}

// ---- derived: ONNX and gRPC -------------------------------------------------------------------

const BY_ELEM = new Map(DATATYPES.map((d) => [DATATYPE_INFO[d].onnx.elem, d]));
const BY_ONNX_NAME = new Map(DATATYPES.map((d) => [DATATYPE_INFO[d].onnx.name, d]));

/** The datatype of an ONNX TensorProto.DataType number; undefined for one warmpool cannot serve. */
export function datatypeOfOnnxElem(elem: number): Datatype | undefined {
  return BY_ELEM.get(elem);
}

/** The datatype of an ONNX Runtime tensor type name; undefined for one warmpool cannot serve. */
export function datatypeOfOnnxName(name: string): Datatype | undefined {
  return BY_ONNX_NAME.get(name as OnnxTypeName);
}

/** The gRPC contents field of a datatype; undefined for FP16 (raw contents only). */
export function grpcContentsField(datatype: Datatype): GrpcContentsField | undefined {
  return DATATYPE_INFO[datatype].grpc;
}

/** Every gRPC contents field, once each. */
export const GRPC_CONTENTS_FIELDS: readonly GrpcContentsField[] = [...new Set(DATATYPES.flatMap((d) => DATATYPE_INFO[d].grpc ?? []))];

// ---- derived: the value rule ------------------------------------------------------------------

/** An element as a typed array stores it (number, or bigint for 64-bit), or a string for BYTES. */
export type Element = number | bigint | string;
/** A value as JSON carries it (64-bit integers past 2^53 as decimal strings). */
export type JsonValue = number | boolean | string;

const DECIMAL = /^-?\d{1,20}$/;

/** The element `v` stores as in `datatype`, or undefined when the datatype cannot hold it (see the header). */
export type ElementOf = (v: unknown) => Element | undefined;

function elementRule(info: Readonly<DatatypeInfo>): ElementOf {
  switch (info.kind) {
    case 'bool':
      return (v) => {
        const n = typeof v === 'bigint' ? Number(v) : v;
        return n === true || n === 1 ? 1 : n === false || n === 0 ? 0 : undefined;
      };
    case 'int': {
      const min = info.min as number;
      const max = info.max as number;
      return (v) => {
        const n = typeof v === 'bigint' ? Number(v) : v;
        return typeof n === 'number' && Number.isInteger(n) && n >= min && n <= max ? n : undefined;
      };
    }
    case 'int64': {
      const min = info.min as bigint;
      const max = info.max as bigint;
      const signed = min < 0n;
      return (v) => {
        // Every safe integer fits INT64; UINT64 only needs the sign checked.
        if (typeof v === 'number') return Number.isSafeInteger(v) && (signed || v >= 0) ? BigInt(v) : undefined;
        const b = typeof v === 'bigint' ? v : typeof v === 'string' && DECIMAL.test(v) ? BigInt(v) : undefined;
        return b !== undefined && b >= min && b <= max ? b : undefined;
      };
    }
    case 'half':
    case 'float': {
      const limit = info.max as number;
      const half = info.kind === 'half';
      return (v) => {
        const n = typeof v === 'bigint' ? Number(v) : v;
        if (typeof n !== 'number' || !(n > -limit && n < limit)) return undefined; // NaN fails both
        return half ? encodeHalf(n) : n;
      };
    }
    case 'bytes':
      return (v) => (typeof v === 'string' ? v : undefined);
  }
}

const RULES = Object.fromEntries(DATATYPES.map((d) => [d, elementRule(DATATYPE_INFO[d])])) as Record<Datatype, ElementOf>;

/** The rule of `datatype`, for loops over many values: the stored element, or undefined when refused. */
export function elementOf(datatype: Datatype): ElementOf {
  return RULES[datatype];
}

/** Writes `v` as `datatype` stores it into `out[at]`; false (and nothing written) when it is refused. */
export type ElementWriter = (out: PackedArray | string[], at: number, v: unknown) => boolean;

/** The rule of `datatype` as a typed write. */
export function elementWriter(datatype: Datatype): ElementWriter {
  const rule = RULES[datatype];
  return (out, at, v) => {
    const e = rule(v);
    if (e === undefined) return false;
    (out as { [i: number]: Element })[at] = e;
    return true;
  };
}

/** Whether `datatype` holds `v` (the same rule as elementOf). */
export function accepts(datatype: Datatype, v: unknown): boolean {
  return RULES[datatype](v) !== undefined;
}

/** What a datatype takes, in the words every refusal uses. */
function expectedValue(datatype: Datatype): string {
  const info = DATATYPE_INFO[datatype];
  switch (info.kind) {
    case 'bool':
      return 'true, false, 0 or 1';
    case 'int':
      return `an integer in [${info.min}, ${info.max}]`;
    case 'int64':
      return datatype === 'UINT64' ? 'a non-negative integer (a decimal string above 2^53)' : 'an integer (a decimal string beyond ±2^53)';
    case 'half':
    case 'float':
      return 'a finite number';
    case 'bytes':
      return 'a string';
  }
}

/**
 * Why `datatype` refused `v`: `must be <what it takes> for <DATATYPE>, got <v>`, and for a finite
 * number too large for FP16/FP32 the bound it passed. For callers that ran the rule themselves.
 */
export function refusal(datatype: Datatype, v: unknown): string {
  const info = DATATYPE_INFO[datatype];
  const base = `must be ${expectedValue(datatype)} for ${datatype}, got ${describe(v)}`;
  const n = typeof v === 'bigint' ? Number(v) : v;
  if ((info.kind === 'half' || info.kind === 'float') && typeof n === 'number' && Number.isFinite(n)) {
    return `${base}, which ${datatype} rounds to ${n < 0 ? '-' : ''}Infinity (|x| must be below ${info.max})`;
  }
  return base;
}

/** A short rendering of a value; NaN, bigint and undefined print as themselves, not as JSON. */
export function describe(v: unknown): string {
  const s = typeof v === 'string' || (typeof v === 'object' && v !== null) ? JSON.stringify(v) : String(v);
  return s.length > 40 ? `${s.slice(0, 40)}…` : s;
}

/**
 * Index of the first element of a typed array that the value rule would refuse (BOOL bytes other
 * than 0/1, float bits of NaN or ±inf), or -1: what binary data is checked by. Integer types
 * cannot carry a value out of their range, so they are not looked at.
 */
export function badElement(datatype: NumericDatatype, data: PackedArray): number {
  switch (DATATYPE_INFO[datatype].kind) {
    case 'bool':
      return (data as Uint8Array).findIndex((b) => b > 1);
    case 'half':
      // Exponent all ones: ±inf or NaN.
      return (data as Uint16Array).findIndex((bits) => (bits & 0x7c00) === 0x7c00);
    case 'float':
      return (data as Float64Array).findIndex((x) => x - x !== 0);
    default:
      return -1;
  }
}

/** The first element of binary data the value rule refuses, with refusal's message; undefined when none. */
export function refusedElement(datatype: NumericDatatype, data: PackedArray): { index: number; message: string } | undefined {
  const index = badElement(datatype, data);
  if (index < 0) return undefined;
  const raw = data[index] as number;
  return { index, message: refusal(datatype, datatype === 'BOOL' ? raw : jsonElement(datatype)(raw)) };
}

/** A stored element as JSON carries it: BOOL as a boolean, FP16 decoded, 64-bit past 2^53 as decimal strings. */
export function jsonElement(datatype: Datatype): (element: number | bigint | string) => JsonValue {
  switch (DATATYPE_INFO[datatype].kind) {
    case 'bool':
      return (e) => e !== 0;
    case 'half':
      return (e) => decodeHalf(e as number);
    case 'int64':
      return (e) => bigToJson(e as bigint);
    default:
      return (e) => e as number | string;
  }
}

function bigToJson(v: bigint): number | string {
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
}
