/**
 * Output parts as Parquet (issue 18): one id column and one column per model output, one row per
 * scored input row, in one row group (a part is one chunk, at most MAX_CHUNK_ROWS rows).
 *
 *   id      INT64 when every id is an integer, else STRING (numbers written as their decimal text)
 *   output  a scalar column when a row of it is a scalar (rank 0 per row), else a LIST column
 *           (nested lists for rank ≥ 2 rows) of the output's type:
 *           FP32 → FLOAT, FP64 → DOUBLE, FP16 → FLOAT, INT8/16/32, UINT8/16 → INT32 (annotated
 *           with its width and sign), UINT32 → INT64, INT64 → INT64, UINT64 → INT64 (UINT_64),
 *           BOOL → BOOLEAN, BYTES → STRING
 *
 * Every column is REQUIRED (a scored row has every output). Scalar numeric columns go to the
 * writer as typed arrays, which it writes without converting them; a LIST column needs one JS
 * array per row (the writer's Dremel encoder walks arrays), made with Array.from over subarrays.
 *
 * Encodings and codecs, chosen for speed first (100,000 rows, this machine): integer ids are
 * DELTA_BINARY_PACKED and uncompressed (sequential ids shrink to a few KB; faster than snappy
 * over PLAIN, 28 vs 34 ms, and half its size), string ids DELTA_BYTE_ARRAY with snappy (ids
 * share prefixes: 0.4 MB instead of 2.4 MB PLAIN, in less time than PLAIN). Float outputs are
 * PLAIN and uncompressed: a model's scores are close to random bytes (snappy saved 0.01 %) and
 * a dictionary never pays. Other outputs (labels, flags, text) take the writer's dictionary
 * choice, text with snappy. Statistics are kept: min/max let DuckDB, Spark and Athena skip parts
 * when they filter on id. Every reader named here reads these encodings (the tests read parts
 * back with hyparquet and DuckDB).
 */
import { type FileMetaData, parquetMetadata, type SchemaElement } from 'hyparquet';
import { type ColumnSource, parquetWriteBuffer } from 'hyparquet-writer';
import type { RowsTensor } from '../contracts/bulk.ts';
import { DEFAULT_ID_COLUMN } from '../contracts/bulk.ts';
import { DATATYPE_INFO, type Datatype, itemBytes, type NumericDatatype } from '../contracts/datatypes.ts';
import type { TensorData } from '../contracts/packed-tensors.ts';
import { decodeHalf } from '../kernel/half-float.ts';

type Values = ColumnSource['data'];

/** The Parquet bytes of a part: `ids[i]` with row i of every output. */
export function parquetPart(ids: ReadonlyArray<string | number>, outputs: readonly RowsTensor[], idColumn = DEFAULT_ID_COLUMN): Uint8Array {
  const n = ids.length;
  const schema: SchemaElement[] = [{ name: 'root', num_children: 1 + outputs.length }];
  const columnData: ColumnSource[] = [];
  const integers = ids.every((id) => typeof id === 'number' && Number.isSafeInteger(id));
  schema.push(
    integers ? leaf(idColumn, 'INT64') : { name: idColumn, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' },
  );
  columnData.push(
    integers
      ? { name: idColumn, data: BigInt64Array.from(ids as number[], BigInt), encoding: 'DELTA_BINARY_PACKED', codec: 'UNCOMPRESSED' }
      : { name: idColumn, data: ids.map(String), encoding: 'DELTA_BYTE_ARRAY', codec: 'SNAPPY' },
  );
  for (const t of outputs) {
    if (t.name === idColumn) throw new Error(`parquetPart: output "${t.name}" has the id column's name`);
    const rows = t.shape[0] ?? 1;
    if (rows !== n) throw new Error(`parquetPart: output "${t.name}" has ${rows} rows for ${n} ids`);
    const dims = t.shape.slice(1);
    const { element, values } = physical(t.datatype, t.data);
    schema.push(...listWrappers(t.name, dims.length), { ...element, name: dims.length === 0 ? t.name : 'element' });
    const kind = DATATYPE_INFO[t.datatype].kind;
    const floats = kind === 'float' || kind === 'half';
    columnData.push({
      name: t.name,
      data: dims.length === 0 ? values : toRows(values, n, dims),
      codec: t.datatype === 'BYTES' ? 'SNAPPY' : 'UNCOMPRESSED',
      ...(floats ? { encoding: 'PLAIN' as const } : {}),
    });
  }
  const buffer = parquetWriteBuffer({ columnData, schema, rowGroupSize: Math.max(1, n), createdBy: 'warmpool' });
  return new Uint8Array(buffer);
}

/** Rows in a Parquet part (the footer's num_rows): counts a part read back without its job. */
export function parquetPartRows(bytes: Uint8Array): number {
  const metadata: FileMetaData = parquetMetadata(bytes);
  return Number(metadata.num_rows);
}

function leaf(name: string, type: SchemaElement['type'], extra: Partial<SchemaElement> = {}): SchemaElement {
  return { name, type, repetition_type: 'REQUIRED', ...extra };
}

/** The three-level LIST groups around a leaf, `depth` of them (the form Spark, Arrow and DuckDB write). */
function listWrappers(name: string, depth: number): SchemaElement[] {
  const out: SchemaElement[] = [];
  for (let d = 0; d < depth; d++) {
    out.push(
      { name: d === 0 ? name : 'element', repetition_type: 'REQUIRED', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    );
  }
  return out;
}

const INTEGER = (bitWidth: number, isSigned: boolean, converted: SchemaElement['converted_type']): Partial<SchemaElement> => ({
  converted_type: converted,
  logical_type: { type: 'INTEGER', bitWidth, isSigned },
});

/**
 * An output's leaf element and its values as the writer takes them, from the datatype's kind,
 * width and sign (contracts/datatypes.ts): integers narrower than 32 bits as annotated INT32,
 * UINT32 widened to INT64 (Parquet has no unsigned 32-bit physical type), FP16 as FLOAT.
 */
function physical(datatype: Datatype, data: TensorData): { element: SchemaElement; values: Values } {
  const info = DATATYPE_INFO[datatype];
  const d = data as ArrayLike<number>;
  switch (info.kind) {
    case 'half':
      return { element: leaf('', 'FLOAT'), values: Float32Array.from(data as Uint16Array, decodeHalf) };
    case 'float':
      return { element: leaf('', datatype === 'FP32' ? 'FLOAT' : 'DOUBLE'), values: data as Float32Array | Float64Array };
    case 'bool':
      return { element: leaf('', 'BOOLEAN'), values: Array.from(d, (v) => v !== 0) };
    case 'bytes':
      return { element: leaf('', 'BYTE_ARRAY', { converted_type: 'UTF8' }), values: [...(data as readonly string[])] };
    case 'int64':
      return (info.min as bigint) < 0n
        ? { element: leaf('', 'INT64'), values: data as BigInt64Array }
        : { element: leaf('', 'INT64', INTEGER(64, false, 'UINT_64')), values: data as BigUint64Array };
    case 'int': {
      const bits = itemBytes(datatype as NumericDatatype) * 8;
      const signed = (info.min as number) < 0;
      if (bits === 32)
        return signed
          ? { element: leaf('', 'INT32'), values: data as Int32Array }
          : { element: leaf('', 'INT64'), values: BigInt64Array.from(d, BigInt) };
      const converted = `${signed ? '' : 'U'}INT_${bits}` as SchemaElement['converted_type'];
      return { element: leaf('', 'INT32', INTEGER(bits, signed, converted)), values: Int32Array.from(d) };
    }
  }
}

/** n rows of `dims` each, as nested JS arrays over the flat values (the writer's form for LIST). */
function toRows(values: Values, n: number, dims: number[]): unknown[] {
  const size = dims.reduce((a, b) => a * b, 1);
  const out = new Array<unknown>(n);
  for (let r = 0; r < n; r++) out[r] = nest(values, r * size, dims, 0);
  return out;
}

function nest(values: Values, at: number, dims: number[], level: number): unknown[] {
  const count = dims[level] as number;
  if (level === dims.length - 1) {
    return Array.isArray(values) ? values.slice(at, at + count) : Array.from(values.subarray(at, at + count) as ArrayLike<unknown>);
  }
  const inner = dims.slice(level + 1).reduce((a, b) => a * b, 1);
  const out = new Array<unknown>(count);
  for (let j = 0; j < count; j++) out[j] = nest(values, at + j * inner, dims, level + 1);
  return out;
}
