/**
 * The objects the bench's bulk rows score, and the check of what they wrote (scripts/bench/bulk.ts).
 * One set of input objects per format, read by both sides (`warmpool bulk run` and the naive
 * script), laid out as a data team's files are:
 *
 *   jsonl    `{"id": 17, "<input>": row as nested arrays, …}` per line
 *   csv      `id,<input>_0,<input>_1,…` (a single-input model: one scalar feature a column)
 *   parquet  `id` INT64, then `<input>_<j>` FLOAT columns (a single input of at most 1,024
 *            features, a table) or one list column per input named like it (a tensor row);
 *            several row groups a file, SNAPPY (what pandas, Spark and DuckDB write by default)
 *
 * Objects hold at most ROWS_PER_OBJECT rows or VALUES_PER_OBJECT values, and one is built in
 * memory at a time. CSV and Parquet inputs are made for FP32 inputs only (as the naive script
 * feeds them); `inputLayout` says why not for any other model.
 */
import { parquetReadObjects } from 'hyparquet';
import { type ColumnSource, parquetWriteBuffer } from 'hyparquet-writer';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { ObjectStore } from '../../infra/registry/object-store.ts';
import { benchInputs, rowWidth } from './bench-models.ts';
import type { NaiveFormat, NaiveInput } from './naive-bulk.ts';

export const BULK_FORMATS: readonly NaiveFormat[] = ['jsonl', 'csv', 'parquet'];

const ROWS_PER_OBJECT = 10_000;
const VALUES_PER_OBJECT = 2_000_000;
/** A single input of at most this many values a row is a table of scalar columns in Parquet; wider, a list column. */
const SCALAR_COLUMNS_MAX = 1024;
/** Row groups per Parquet object. */
const PARQUET_ROW_GROUPS = 4;

type Inputs = Pick<ModelManifest, 'inputs'>;

/** How each input's values lie in `format`'s rows, or why the bench cannot lay them out. */
export function inputLayout(manifest: Inputs, format: NaiveFormat): NaiveInput[] | string {
  const single = manifest.inputs.length === 1;
  if (format !== 'jsonl' && manifest.inputs.some((i) => i.datatype !== 'FP32')) return `${format} inputs are made for FP32 inputs only`;
  if (format === 'csv' && !single) return 'a CSV row feeds a single-input model here';
  return manifest.inputs.map((spec) => {
    const dims = spec.shape.slice(1);
    const scalars = format === 'csv' || (format === 'parquet' && single && rowWidth(spec) <= SCALAR_COLUMNS_MAX);
    const axis = spec.batchAxis === undefined ? {} : { batchAxis: spec.batchAxis };
    return scalars
      ? { name: spec.name, dims, columns: featureColumns(spec.name, rowWidth(spec)), ...axis }
      : { name: spec.name, dims, ...axis };
  });
}

function featureColumns(input: string, width: number): string[] {
  return Array.from({ length: width }, (_, j) => `${input}_${j}`);
}

/** Rows in one input object of this model. */
export function rowsPerObject(manifest: Inputs): number {
  const width = manifest.inputs.reduce((n, spec) => n + rowWidth(spec), 0);
  return Math.max(1, Math.min(ROWS_PER_OBJECT, Math.floor(VALUES_PER_OBJECT / width)));
}

/** Writes rows 0…rows-1 (ids 0…rows-1) under `prefix` as `in-0000.<format>`, …; returns the objects written. */
export async function writeBulkInput(
  store: Pick<ObjectStore, 'put'>,
  prefix: string,
  manifest: Inputs,
  rows: number,
  format: NaiveFormat,
  layout: NaiveInput[],
): Promise<number> {
  const perObject = rowsPerObject(manifest);
  let objects = 0;
  for (let start = 0; start < rows; start += perObject, objects++) {
    const count = Math.min(perObject, rows - start);
    const tensors = benchInputs(manifest, count, start).map((t) => ({ data: t.data as number[], dims: t.shape.slice(1) }));
    const body = encodeObject(format, start, count, tensors, layout);
    await store.put(`${prefix}in-${String(objects).padStart(4, '0')}.${format}`, body);
  }
  return objects;
}

interface FlatInput {
  /** count × width values, row-major. */
  data: number[];
  dims: number[];
}

/** One object's bytes: rows `first`…`first + count - 1`, `tensors` in the layout's order. */
export function encodeObject(
  format: NaiveFormat,
  first: number,
  count: number,
  tensors: FlatInput[],
  layout: NaiveInput[],
): string | Uint8Array {
  const widths = tensors.map((t) => t.dims.reduce((a, d) => a * d, 1));
  const row = (k: number, r: number) => (tensors[k] as FlatInput).data.slice(r * (widths[k] ?? 0), (r + 1) * (widths[k] ?? 0));
  if (format === 'parquet') return parquetObject(first, count, layout, row);
  const lines: string[] = [];
  if (format === 'csv') lines.push(['id', ...layout.flatMap((i) => i.columns ?? [])].join(','));
  for (let r = 0; r < count; r++) {
    if (format === 'csv') lines.push([first + r, ...layout.flatMap((_, k) => row(k, r))].join(','));
    else {
      const o: Record<string, unknown> = { id: first + r };
      layout.forEach((input, k) => {
        o[input.name] = nest(row(k, r), input.dims);
      });
      lines.push(JSON.stringify(o));
    }
  }
  return `${lines.join('\n')}\n`;
}

function parquetObject(first: number, count: number, layout: NaiveInput[], row: (k: number, r: number) => number[]): Uint8Array {
  const columnData: ColumnSource[] = [
    { name: 'id', data: BigInt64Array.from({ length: count }, (_, r) => BigInt(first + r)), nullable: false },
  ];
  const schema: NonNullable<Parameters<typeof parquetWriteBuffer>[0]['schema']> = [{ name: 'root' }];
  schema.push({ name: 'id', type: 'INT64', repetition_type: 'REQUIRED' });
  layout.forEach((input, k) => {
    if (input.columns) {
      input.columns.forEach((name, j) => {
        columnData.push({ name, data: Float32Array.from({ length: count }, (_, r) => row(k, r)[j] ?? 0), nullable: false });
        schema.push({ name, type: 'FLOAT', repetition_type: 'REQUIRED' });
      });
    } else {
      columnData.push({ name: input.name, data: Array.from({ length: count }, (_, r) => row(k, r)) });
      schema.push(
        { name: input.name, repetition_type: 'REQUIRED', converted_type: 'LIST', num_children: 1 },
        { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
        { name: 'element', type: 'FLOAT', repetition_type: 'REQUIRED' },
      );
    }
  });
  schema[0] = { name: 'root', num_children: columnData.length };
  const rowGroupSize = Math.max(1, Math.ceil(count / PARQUET_ROW_GROUPS));
  return new Uint8Array(parquetWriteBuffer({ columnData, schema, rowGroupSize }));
}

/** Flat row-major values as nested arrays of `dims` (a scalar for no dims), as JSONL rows carry them. */
export function nest<T>(flat: readonly T[], dims: readonly number[]): unknown {
  const [first, ...rest] = dims;
  if (first === undefined) return flat[0];
  const size = rest.reduce((a, d) => a * d, 1);
  return Array.from({ length: first }, (_, i) => nest(flat.slice(i * size, (i + 1) * size), rest));
}

/** The ids of every row in the objects under `prefix` whose keys end `.<format>` (parts, or the naive script's outputs). */
export async function writtenIds(store: Pick<ObjectStore, 'list' | 'getBytes'>, prefix: string, format: NaiveFormat): Promise<unknown[]> {
  const ids: unknown[] = [];
  for (const o of await store.list(prefix)) {
    if (!o.key.endsWith(`.${format}`)) continue;
    const bytes = await store.getBytes(o.key);
    if (bytes) ids.push(...(await idsOf(bytes, format)));
  }
  return ids;
}

async function idsOf(bytes: Uint8Array, format: NaiveFormat): Promise<unknown[]> {
  if (format === 'parquet') {
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    return (await parquetReadObjects({ file, columns: ['id'] })).map((o) => o.id);
  }
  const lines = Buffer.from(bytes)
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  if (format === 'jsonl') return lines.map((line) => (JSON.parse(line) as { id?: unknown }).id);
  const at = (lines.shift() ?? '').split(',').map(unquote).indexOf('id');
  if (at < 0) throw new Error('a CSV part without an id column');
  return lines.map((line) => unquote(line.split(',')[at] ?? ''));
}

function unquote(field: string): string {
  const f = field.trim();
  return f.startsWith('"') && f.endsWith('"') ? f.slice(1, -1).replaceAll('""', '"') : f;
}

/** Why `ids` are not each of 0…rows-1 exactly once (numbers, bigints or their decimal text); undefined when they are. */
export function idsProblem(ids: readonly unknown[], rows: number): string | undefined {
  const seen = new Uint8Array(rows);
  let repeated = 0;
  let foreign = 0;
  for (const raw of ids) {
    const id = typeof raw === 'bigint' || typeof raw === 'string' ? Number(raw) : raw;
    if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= rows || (typeof raw === 'string' && raw.trim() === ''))
      foreign++;
    else if (seen[id] === 1) repeated++;
    else seen[id] = 1;
  }
  const missing = seen.reduce((n, s) => n + (s === 0 ? 1 : 0), 0);
  if (missing + repeated + foreign === 0) return undefined;
  return `${ids.length} ids for ${rows} rows: ${missing} missing, ${repeated} repeated, ${foreign} not an input id`;
}
