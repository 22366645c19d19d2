/**
 * One verdict per value, whatever path it comes in by (issue 27): the same values — out of range
 * for each integer type, FP16 and FP32 overflow, NaN, -0, 64-bit integers past 2^53, BOOL given
 * numbers, strings given to numeric types — go to
 *   json     a JSON submit: the body's text parsed, then validateInferRequest and fromJsonData
 *            (what the API stores);
 *   binary   a binary tensor submit (the OIP binary extension: joinBinaryBody → splitBinaryBody →
 *            validateInferRequest), the bytes a client's native array makes of the value;
 *   grpc     a ModelInferRequest through api/grpc/convert.ts and validation, in the datatype's
 *            contents field (FP16: raw_input_contents, it has no typed field);
 *   jsonl, csv, parquet   the bulk row readers (infra/tabular), a file of one row;
 * and each path that can express the value must give the case's verdict: accepted with the same
 * stored element, or rejected with a message naming the datatype.
 *
 * Some paths cannot say some values, and are left out for them: binary data cannot hold an
 * integer outside its type (nor a string for a number); gRPC's typed fields are int32, uint32,
 * float and so on; CSV cells are untyped text (the string "1" and the number 1 are one cell);
 * JSON text has no NaN. What binary can say that JSON cannot — NaN and ±inf bits, a BOOL byte
 * of 2 — follows JSON's rule: refused.
 */
import { Readable } from 'node:stream';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { fromModelInferRequest } from '../api/grpc/convert.ts';
import type { InferInputTensorMessage, TensorContentsMessage } from '../api/grpc/messages.ts';
import {
  DATATYPE_INFO,
  type Datatype,
  grpcContentsField,
  isNumericDatatype,
  type PackedArray,
  typedArrayFor,
} from '../infra/contracts/datatypes.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import { joinBinaryBody, splitBinaryBody } from '../infra/contracts/oip-binary.ts';
import { type ValidatedInput, validateInferRequest } from '../infra/contracts/oip-validate.ts';
import { fromJsonData, type TensorData, wireBytes } from '../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { decodeHalf, encodeHalf } from '../infra/kernel/half-float.ts';
import { createLineRows } from '../infra/tabular/line-rows.ts';
import { readParquetRows } from '../infra/tabular/parquet-input.ts';

/** A value as a typed array stores it, read back: FP16 decoded, BOOL 0/1, 64-bit as bigint. */
type Stored = number | bigint | string;
type Verdict = { accepted: Stored } | { rejected: Datatype };

interface Case {
  datatype: Datatype;
  /** The value as JS has it (what a client's native array, a Parquet column or a gRPC field holds). */
  value: number | bigint | boolean | string;
  /** The value's JSON text; absent when JSON cannot say it (NaN). Defaults to JSON.stringify(value). */
  json?: string | null;
  verdict: Verdict;
}

const ok = (accepted: Stored): Verdict => ({ accepted });
const no = (datatype: Datatype): Verdict => ({ rejected: datatype });

const CASES: Case[] = [
  // 8–32-bit integers: each end, and one past it.
  { datatype: 'UINT8', value: 255, verdict: ok(255) },
  { datatype: 'UINT8', value: 256, verdict: no('UINT8') },
  { datatype: 'UINT8', value: -1, verdict: no('UINT8') },
  { datatype: 'UINT16', value: 65_536, verdict: no('UINT16') },
  { datatype: 'UINT32', value: 4_294_967_295, verdict: ok(4_294_967_295) },
  { datatype: 'UINT32', value: 4_294_967_296, verdict: no('UINT32') },
  { datatype: 'INT8', value: -128, verdict: ok(-128) },
  { datatype: 'INT8', value: 128, verdict: no('INT8') },
  { datatype: 'INT8', value: -129, verdict: no('INT8') },
  { datatype: 'INT8', value: -0, json: '-0', verdict: ok(0) },
  { datatype: 'INT16', value: 32_768, verdict: no('INT16') },
  { datatype: 'INT32', value: 2_147_483_648, verdict: no('INT32') },
  { datatype: 'INT32', value: 1.5, verdict: no('INT32') },
  // 64-bit integers: past 2^53 as decimal strings (exact), as numbers (JSON cannot hold them exactly), out of range.
  { datatype: 'INT64', value: '9007199254740993', verdict: ok(9_007_199_254_740_993n) },
  { datatype: 'INT64', value: '9223372036854775807', verdict: ok(2n ** 63n - 1n) },
  { datatype: 'INT64', value: '9223372036854775808', verdict: no('INT64') },
  { datatype: 'INT64', value: 2 ** 53, json: '9007199254740993', verdict: no('INT64') },
  { datatype: 'UINT64', value: '18446744073709551615', verdict: ok(2n ** 64n - 1n) },
  { datatype: 'UINT64', value: '18446744073709551616', verdict: no('UINT64') },
  { datatype: 'UINT64', value: -1, verdict: no('UINT64') },
  // FP16: 65519 rounds to 65504; 65520 and past round to infinity.
  { datatype: 'FP16', value: 65_519, verdict: ok(65_504) },
  { datatype: 'FP16', value: 65_520, verdict: no('FP16') },
  { datatype: 'FP16', value: 70_000, verdict: no('FP16') },
  { datatype: 'FP16', value: -70_000, verdict: no('FP16') },
  { datatype: 'FP16', value: 0.1, verdict: ok(decodeHalf(encodeHalf(0.1))) },
  { datatype: 'FP16', value: -0, json: '-0', verdict: ok(-0) },
  { datatype: 'FP16', value: Number.NaN, json: null, verdict: no('FP16') },
  // FP32: past FLT_MAX's rounding, NaN, -0.
  { datatype: 'FP32', value: 3.4028234663852886e38, verdict: ok(3.4028234663852886e38) },
  { datatype: 'FP32', value: 1e39, verdict: no('FP32') },
  { datatype: 'FP32', value: -1e39, verdict: no('FP32') },
  { datatype: 'FP32', value: -0, json: '-0', verdict: ok(-0) },
  { datatype: 'FP32', value: Number.NaN, json: null, verdict: no('FP32') },
  { datatype: 'FP64', value: 1e308, verdict: ok(1e308) },
  { datatype: 'FP64', value: -0, json: '-0', verdict: ok(-0) },
  { datatype: 'FP64', value: Number.NaN, json: null, verdict: no('FP64') },
  // BOOL: booleans and 0/1; other numbers and strings refused.
  { datatype: 'BOOL', value: true, verdict: ok(1) },
  { datatype: 'BOOL', value: 0, verdict: ok(0) },
  { datatype: 'BOOL', value: 1, verdict: ok(1) },
  { datatype: 'BOOL', value: 2, verdict: no('BOOL') },
  { datatype: 'BOOL', value: 0.5, verdict: no('BOOL') },
  { datatype: 'BOOL', value: 'true', verdict: no('BOOL') },
  // Strings to numeric types, numbers to BYTES.
  { datatype: 'FP32', value: '1', verdict: no('FP32') },
  { datatype: 'INT32', value: 'abc', verdict: no('INT32') },
  { datatype: 'FP16', value: 'x', verdict: no('FP16') },
  { datatype: 'BYTES', value: 'hé', verdict: ok('hé') },
  { datatype: 'BYTES', value: 5, verdict: no('BYTES') },
];

const spec = (datatype: Datatype): TensorSpec => ({ name: 'x', datatype, shape: [-1, 1] });
const manifest = (datatype: Datatype) => ({ inputs: [spec(datatype)], outputs: [] }) as unknown as ModelManifest;

/** The first element as stored: FP16 half bits decoded, everything else as the typed array (or strings) holds it. */
function stored(datatype: Datatype, data: TensorData): Stored {
  const e = data[0] as Stored;
  return datatype === 'FP16' ? decodeHalf(e as number) : e;
}

/** The verdict of a run: its stored element, or the datatype named by the refusal (it must name it). */
function verdictOf(datatype: Datatype, run: () => TensorData | string): Verdict {
  let out: TensorData | string;
  try {
    out = run();
  } catch (err) {
    if (!(err instanceof InvalidInputError)) throw err;
    out = err.message;
  }
  if (typeof out !== 'string') return ok(stored(datatype, out));
  expect(out, 'a refusal names the datatype').toContain(datatype);
  return no(datatype);
}

/** What the API stores for a validated input (submit-job's rule: typed already, or JSON values converted). */
function submitted(input: ValidatedInput | undefined): TensorData {
  if (!input) throw new Error('no input');
  return ArrayBuffer.isView(input.data) ? (input.data as TensorData) : fromJsonData(input.datatype, input.data as never);
}

// ---- how each path says a value (undefined: it cannot) ------------------------------------------

function jsonText(c: Case): string | undefined {
  if (c.json === null) return undefined;
  return c.json ?? JSON.stringify(typeof c.value === 'bigint' ? c.value.toString() : c.value);
}

/** The bytes a client's native array of the datatype makes of the value. */
function nativeBytes(c: Case): Uint8Array | undefined {
  const { datatype, value } = c;
  if (!isNumericDatatype(datatype)) return typeof value === 'string' ? wireBytes('BYTES', [value]) : undefined;
  const kind = DATATYPE_INFO[datatype].kind;
  let element: number | bigint;
  if (kind === 'half' || kind === 'float') {
    if (typeof value !== 'number') return undefined;
    element = kind === 'half' ? encodeHalf(value) : value;
  } else if (kind === 'bool') {
    if (typeof value === 'boolean') element = value ? 1 : 0;
    else if (typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255)
      element = value; // a byte
    else return undefined;
  } else if (kind === 'int64') {
    const b =
      typeof value === 'bigint' ? value : typeof value === 'string' || Number.isSafeInteger(value) ? BigInt(value as string) : undefined;
    if (b === undefined || b < (DATATYPE_INFO[datatype].min as bigint) || b > (DATATYPE_INFO[datatype].max as bigint)) return undefined;
    element = b;
  } else {
    const { min, max } = DATATYPE_INFO[datatype] as { min: number; max: number };
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) return undefined;
    element = value;
  }
  const array = new (typedArrayFor(datatype))(1) as PackedArray & { [i: number]: number | bigint };
  array[0] = element;
  return new Uint8Array(array.buffer);
}

/** The value in the datatype's gRPC contents field, as the proto's field type holds it; undefined when it cannot. */
function grpcContents(c: Case): TensorContentsMessage | undefined {
  const field = grpcContentsField(c.datatype);
  const v = c.value;
  const int = (lo: number, hi: number) => typeof v === 'number' && Number.isInteger(v) && v >= lo && v <= hi;
  switch (field) {
    case 'bool_contents':
      return typeof v === 'boolean' ? { bool_contents: [v] } : undefined;
    case 'int_contents':
      return int(-(2 ** 31), 2 ** 31 - 1) ? { int_contents: [v as number] } : undefined;
    case 'uint_contents':
      return int(0, 2 ** 32 - 1) ? { uint_contents: [v as number] } : undefined;
    case 'int64_contents':
    case 'uint64_contents': {
      // proto-loader gives 64-bit values as decimal strings; the wire holds only the field's range.
      const text = typeof v === 'string' && /^-?\d+$/.test(v) ? v : Number.isSafeInteger(v) ? String(v) : undefined;
      if (text === undefined) return undefined;
      const b = BigInt(text);
      const fits = field === 'int64_contents' ? b >= -(2n ** 63n) && b < 2n ** 63n : b >= 0n && b < 2n ** 64n;
      return fits ? { [field]: [text] } : undefined;
    }
    case 'fp32_contents':
      return typeof v === 'number' ? { fp32_contents: [Math.fround(v)] } : undefined;
    case 'fp64_contents':
      return typeof v === 'number' ? { fp64_contents: [v] } : undefined;
    case 'bytes_contents':
      return typeof v === 'string' ? { bytes_contents: [Buffer.from(v)] } : undefined;
    default:
      return undefined;
  }
}

/** A CSV cell for the value; undefined when a cell cannot tell it apart (a numeric string for a number, a number for BYTES). */
function csvCell(c: Case): string | undefined {
  const v = c.value;
  if (typeof v === 'string') {
    const numeric = v.trim() !== '' && Number.isFinite(Number(v));
    const word = v === 'true' || v === 'false';
    if (c.datatype === 'BYTES') return v;
    if (DATATYPE_INFO[c.datatype].kind === 'int64' && /^-?\d+$/.test(v)) return v; // a CSV cell keeps the digits
    return numeric || (word && c.datatype === 'BOOL') ? undefined : v;
  }
  if (c.datatype === 'BYTES') return undefined;
  // A cell keeps an integer's digits exactly: it cannot be the JSON number that lost them.
  if (DATATYPE_INFO[c.datatype].kind === 'int64' && !Number.isSafeInteger(v)) return undefined;
  if (c.json !== undefined && c.json !== null) return c.json; // the literal text (-0, 2^53 + 1)
  if (typeof v === 'number' && Number.isNaN(v)) return 'NaN';
  return String(v);
}

type ParquetColumn = Parameters<typeof parquetWriteBuffer>[0]['columnData'][number];

/** A Parquet column of one value, of the type a writer would give it. */
function parquetColumn(c: Case): ParquetColumn | undefined {
  const v = c.value;
  const kind = DATATYPE_INFO[c.datatype].kind;
  if (typeof v === 'boolean') return { name: 'x', data: [v], type: 'BOOLEAN' };
  if (typeof v === 'string') {
    if (kind !== 'int64' || !/^-?\d+$/.test(v)) return { name: 'x', data: [v], type: 'STRING' };
    const b = BigInt(v);
    return b >= -(2n ** 63n) && b < 2n ** 63n ? { name: 'x', data: BigInt64Array.of(b), type: 'INT64' } : undefined;
  }
  if (typeof v === 'bigint') return { name: 'x', data: BigInt64Array.of(v), type: 'INT64' };
  if (kind === 'half' || kind === 'float' || !Number.isSafeInteger(v)) return { name: 'x', data: Float64Array.of(v), type: 'DOUBLE' };
  return { name: 'x', data: BigInt64Array.of(BigInt(v)), type: 'INT64' };
}

// ---- the paths ------------------------------------------------------------------------------------

type Path = (c: Case) => Promise<Verdict | undefined> | Verdict | undefined;

const PATHS: Record<string, Path> = {
  json(c) {
    const text = jsonText(c);
    if (text === undefined) return undefined;
    const body = JSON.parse(`{"inputs":[{"name":"x","datatype":"${c.datatype}","shape":[1,1],"data":[${text}]}]}`);
    return verdictOf(c.datatype, () => submitted(validateInferRequest(body, manifest(c.datatype)).inputs[0]));
  },
  binary(c) {
    const bytes = nativeBytes(c);
    if (!bytes) return undefined;
    const header = { inputs: [{ name: 'x', datatype: c.datatype, shape: [1, 1], parameters: { binary_data_size: bytes.byteLength } }] };
    const { body, headerLength } = joinBinaryBody(header, [bytes]);
    return verdictOf(c.datatype, () => {
      const split = splitBinaryBody(body, String(headerLength), JSON.parse);
      return submitted(validateInferRequest(split.header, manifest(c.datatype), {}, split.tensors).inputs[0]);
    });
  },
  grpc(c) {
    const input: InferInputTensorMessage = { name: 'x', datatype: c.datatype, shape: ['1', '1'] };
    let raw: Uint8Array[] = [];
    if (grpcContentsField(c.datatype)) {
      const contents = grpcContents(c);
      if (!contents) return undefined;
      input.contents = contents;
    } else {
      const bytes = nativeBytes(c);
      if (!bytes) return undefined;
      raw = [bytes];
    }
    return verdictOf(c.datatype, () => {
      const call = fromModelInferRequest({ model_name: 'm', model_version: '', inputs: [input], raw_input_contents: raw } as never);
      return submitted(validateInferRequest(call.body, manifest(c.datatype), {}, call.binary).inputs[0]);
    });
  },
  jsonl(c) {
    const text = jsonText(c);
    return text === undefined ? undefined : lineVerdict(c.datatype, 'jsonl', `{"id":1,"x":${text}}`);
  },
  csv(c) {
    const cell = csvCell(c);
    return cell === undefined ? undefined : lineVerdict(c.datatype, 'csv', `1,${/[",]/.test(cell) ? `"${cell}"` : cell}`);
  },
  async parquet(c) {
    const column = parquetColumn(c);
    if (!column) return undefined;
    const bytes = new Uint8Array(parquetWriteBuffer({ columnData: [{ name: 'id', data: BigInt64Array.of(1n), type: 'INT64' }, column] }));
    const store = {
      async getRange(_key: string, start: number, end: number) {
        return Readable.from([Buffer.from(bytes.subarray(start, Math.min(end, bytes.length)))]);
      },
    };
    let result: Awaited<ReturnType<typeof readParquetRows>> | string;
    try {
      result = await readParquetRows(store, 'in/v.parquet', bytes.length, { start: 0, end: 1 }, [spec(c.datatype)], { idColumn: 'id' });
    } catch (err) {
      if (!(err instanceof InvalidInputError)) throw err;
      result = err.message; // a column that can never feed the datatype fails the file
    }
    return verdictOf(c.datatype, () => (typeof result === 'string' ? result : rowsData(result)));
  },
};

function lineVerdict(datatype: Datatype, format: 'jsonl' | 'csv', line: string): Verdict {
  const reader = createLineRows([spec(datatype)], format, { idColumn: 'id', skipFirstLineIfHeader: false });
  reader.push([{ text: line, byte: 0, line: 1 }]);
  return verdictOf(datatype, () => rowsData(reader.finish()));
}

/** The one row's data, or its bad-row message. */
function rowsData(rows: { groups: Array<{ inputs: Array<{ data: TensorData }> }>; bad: Array<{ message: string }> }): TensorData | string {
  const data = rows.groups[0]?.inputs[0]?.data;
  if (data) return data;
  return rows.bad[0]?.message ?? 'no row and no bad row';
}

function label(c: Case): string {
  const shown = c.json ?? (typeof c.value === 'string' ? JSON.stringify(c.value) : String(c.value));
  return `${c.datatype} ${shown}`;
}

describe('one verdict per value on every path (datatypes.ts)', () => {
  it.each(CASES.map((c) => [label(c), c] as const))('%s', async (_label, c) => {
    const verdicts: Record<string, Verdict> = {};
    for (const [name, path] of Object.entries(PATHS)) {
      const v = await path(c);
      if (v) verdicts[name] = v;
    }
    // Every value is said by at least three paths, so no case passes by saying nothing.
    expect(Object.keys(verdicts).length).toBeGreaterThanOrEqual(3);
    for (const [name, v] of Object.entries(verdicts)) {
      if ('accepted' in c.verdict && 'accepted' in v) {
        // Object.is: -0 stays -0.
        expect(Object.is(v.accepted, c.verdict.accepted), `${name}: stored ${String(v.accepted)}`).toBe(true);
      } else {
        expect(v, name).toEqual(c.verdict);
      }
    }
  });
});
