/**
 * Parquet bulk input (issue 18): a chunk is a range of a file's rows, read by the worker that
 * scores it with ranged GETs of only what it needs: the footer, then the pages of the columns
 * that feed the model (with an offset index, only the pages of the chunk's rows), so a worker's
 * memory follows its chunk, not the file (a group without offset indexes: its column chunks).
 *
 *   parquetLayout      the footer: rows, row groups, columns (the driver plans from it)
 *   planParquetChunks  row ranges of about `chunkRows`: a small row group whole (neighbours
 *                      merged), a big one split
 *   readParquetRows    a chunk's rows as typed tensors (ChunkRows), bad rows apart
 *
 * Columns map to model inputs as BulkColumns says (contracts/bulk.ts). A row is checked as a
 * JSONL row is (row-reader.ts): an id that is a non-empty string or a finite number, the input's
 * rank and fixed dims, each value in its datatype's range (floats finite). A row that fails is a
 * ChunkBadRow with its 1-based row number in the file; a file that cannot feed the model at all
 * (a missing column, a string column for a numeric input) is an InvalidInputError, and the run
 * fails with it. Columns are decoded page by page with hyparquet's decoders (parquet-pages.ts
 * for scalar columns, parquet-lists.ts for list columns) into typed arrays, and go to tensors in
 * loops over those, never through per-row objects: a list row is one native copy.
 */
import * as zlib from 'node:zlib';
import {
  type AsyncBuffer,
  type Compressors,
  type DecodedArray,
  type FileMetaData,
  parquetMetadataAsync,
  parquetSchema,
  type SchemaTree,
} from 'hyparquet';
import { compressors as pureCompressors } from 'hyparquet-compressors';
import type { BulkColumns, ChunkBadRow, ChunkRows, RowGroup, RowsTensor } from '../contracts/bulk.ts';
import { MAX_CHUNK_BAD_SAMPLES } from '../contracts/bulk.ts';
import type { Datatype } from '../contracts/oip.ts';
import { arrayTypeOf, type TensorData } from '../contracts/packed-tensors.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { encodeHalf } from '../kernel/half-float.ts';
import { type ListColumn, NULL_OR_EMPTY, RAGGED, readListColumns } from './parquet-lists.ts';
import { type FlatColumn, objectBuffer, type RangeReader, readFlatColumns, StoreReadError } from './parquet-pages.ts';

export type { RangeReader } from './parquet-pages.ts';

/** A model input as the mapping sees it (a manifest's TensorSpec: shape[0] is the batch axis). */
export interface InputSpec {
  name: string;
  datatype: Datatype;
  shape: number[];
}

export interface ParquetColumn {
  name: string;
  /** The leaf's physical type (FLOAT, DOUBLE, INT32, INT64, BOOLEAN, BYTE_ARRAY, …); GROUP for a struct or map. */
  type: string;
  /** The leaf's logical (or converted) type when it has one: STRING, INTEGER, DECIMAL, DATE, … */
  logicalType?: string;
  /** Lists around the leaf: 0 a scalar, 1 a list, 2 a list of lists, … */
  listDepth: number;
  /** A scalar number column: one feature of the implicit mapping. */
  numeric: boolean;
}

export interface ParquetLayout {
  rows: number;
  /**
   * In file order; `start` is the group's first row in the file. `indexed`: its column chunks
   * have offset indexes (but for small ones), so a range of its rows reads only its pages
   * (DuckDB 1.5 writes none; hyparquet-writer, parquet-mr and Arrow do).
   */
  rowGroups: Array<{ start: number; rows: number; indexed: boolean }>;
  /** Top-level columns, in file order. */
  columns: ParquetColumn[];
}

export interface ParquetRowsOptions {
  columns?: BulkColumns;
  idColumn: string;
  /** The object's etag as listed: with it, the footer is decoded once per file per process, not per chunk. */
  etag?: string;
}

/** The footer's first read: most footers fit, and it stays clear of the last row group's pages. */
const FOOTER_FETCH_BYTES = 64 * 1024;
/**
 * A group without an offset index is cut in at most this many pieces, whatever `chunkRows`: each
 * piece GETs the group's whole column chunks (no index says where its pages are), so the cut
 * trades that many times the group's bytes for that many workers on it.
 */
export const MAX_UNINDEXED_PIECES = 4;
/** A group whose column chunks without an offset index hold no more than this counts as indexed: they are read whole, cheaply. */
const SMALL_UNINDEXED_BYTES = 1024 * 1024;
/** Columns named in an error before "and N more". */
const NAMED_COLUMNS = 40;

/** Reads only the footer (one or two ranged GETs). InvalidInputError when the object is not Parquet. */
export async function parquetLayout(store: RangeReader, key: string, sizeBytes: number): Promise<ParquetLayout> {
  return layoutOf(await readFooter(objectBuffer(store, key, sizeBytes), key));
}

/**
 * Row ranges [start, end) of about `chunkRows` rows: a row group that fits is never split and
 * neighbours that fit together are merged; a bigger group is cut into equal pieces of at most
 * `chunkRows` when it has an offset index, else into at most MAX_UNINDEXED_PIECES. Every row of
 * the file lies in exactly one range, in order.
 */
export function planParquetChunks(layout: Pick<ParquetLayout, 'rowGroups'>, chunkRows: number): Array<{ start: number; end: number }> {
  const limit = Math.max(1, Math.floor(chunkRows));
  const out: Array<{ start: number; end: number }> = [];
  let open: { start: number; end: number } | undefined;
  for (const group of layout.rowGroups) {
    if (group.rows <= 0) continue;
    if (group.rows > limit) {
      if (open) out.push(open);
      open = undefined;
      const pieces = Math.min(Math.ceil(group.rows / limit), group.indexed ? Number.POSITIVE_INFINITY : MAX_UNINDEXED_PIECES);
      for (let i = 0; i < pieces; i++) {
        out.push({
          start: group.start + Math.floor((i * group.rows) / pieces),
          end: group.start + Math.floor(((i + 1) * group.rows) / pieces),
        });
      }
    } else if (open && open.end === group.start && open.end - open.start + group.rows <= limit) {
      open.end += group.rows;
    } else {
      if (open) out.push(open);
      open = { start: group.start, end: group.start + group.rows };
    }
  }
  if (open) out.push(open);
  return out;
}

/** The file's rows [range.start, range.end) as model inputs; see the header for the rules. */
export async function readParquetRows(
  store: RangeReader,
  key: string,
  sizeBytes: number,
  range: { start: number; end: number },
  inputs: readonly InputSpec[],
  options: ParquetRowsOptions,
): Promise<ChunkRows> {
  const file = objectBuffer(store, key, sizeBytes);
  const metadata = await cachedFooter(store, file, key, sizeBytes, options.etag);
  const layout = layoutOf(metadata);
  const plans = mapColumns(layout.columns, inputs, options, key);
  const start = Math.max(0, Math.min(range.start, layout.rows));
  const end = Math.max(start, Math.min(range.end, layout.rows));
  const values =
    end > start ? await readColumns(file, metadata, plans, options.idColumn, start, end, key) : { scalars: new Map(), lists: new Map() };
  return toChunkRows(plans, values, options.idColumn, start, end - start);
}

// ---- footer and layout ------------------------------------------------------------------------

/** Footers kept per store: a worker scores a file's chunks one after another, and each read and decoded it again. */
const FOOTERS_KEPT = 32;
const footers = new WeakMap<RangeReader, Map<string, Promise<FileMetaData>>>();

/**
 * The file's footer, decoded once per (key, size, etag) and store while it stays among the last
 * FOOTERS_KEPT: the etag pins the bytes (a file rewritten under the same key has another), so
 * without one nothing is kept. A failed read is not kept.
 */
function cachedFooter(
  store: RangeReader,
  file: AsyncBuffer,
  key: string,
  sizeBytes: number,
  etag: string | undefined,
): Promise<FileMetaData> {
  if (!etag) return readFooter(file, key);
  let kept = footers.get(store);
  if (!kept) {
    kept = new Map();
    footers.set(store, kept);
  }
  const id = `${key}\u0000${sizeBytes}\u0000${etag}`;
  const hit = kept.get(id);
  if (hit) {
    kept.delete(id);
    kept.set(id, hit);
    return hit;
  }
  const read = readFooter(file, key);
  kept.set(id, read);
  read.catch(() => kept.delete(id));
  while (kept.size > FOOTERS_KEPT) kept.delete(kept.keys().next().value as string);
  return read;
}

async function readFooter(file: AsyncBuffer, key: string): Promise<FileMetaData> {
  try {
    return await parquetMetadataAsync(file, { initialFetchSize: FOOTER_FETCH_BYTES });
  } catch (err) {
    throw asInputError(err, `${key} is not a Parquet file we can read`);
  }
}

function layoutOf(metadata: FileMetaData): ParquetLayout {
  const rowGroups: ParquetLayout['rowGroups'] = [];
  let at = 0;
  for (const group of metadata.row_groups) {
    const rows = Number(group.num_rows);
    rowGroups.push({ start: at, rows, indexed: unindexedBytes(group) <= SMALL_UNINDEXED_BYTES });
    at += rows;
  }
  return { rows: at, rowGroups, columns: parquetSchema(metadata).children.map(describeColumn) };
}

/** Bytes of a group's column chunks that have no offset index (a writer leaves it out of a one-page chunk). */
function unindexedBytes(group: FileMetaData['row_groups'][number]): number {
  let bytes = 0;
  for (const c of group.columns) if (!c.offset_index_length) bytes += Number(c.meta_data?.total_compressed_size ?? 0);
  return bytes;
}

function describeColumn(node: SchemaTree): ParquetColumn {
  let leaf = node;
  let listDepth = 0;
  for (;;) {
    const e = leaf.element;
    const child = leaf.children[0];
    if ((e.converted_type === 'LIST' || e.logical_type?.type === 'LIST') && child) {
      // Three-level list: <list> (LIST) → repeated group → element; two-level: the repeated child is the element.
      listDepth++;
      leaf = child.children.length === 1 && child.children[0] ? child.children[0] : child;
    } else if (e.repetition_type === 'REPEATED' && leaf.children.length === 0) {
      listDepth++; // a bare repeated primitive: a list with no annotation
      break;
    } else break;
  }
  const e = leaf.element;
  const type = leaf.children.length > 0 || !e.type ? 'GROUP' : e.type;
  const logicalType = e.logical_type?.type ?? e.converted_type;
  const numeric =
    listDepth === 0 &&
    ['INT32', 'INT64', 'FLOAT', 'DOUBLE'].includes(type) &&
    !['DATE', 'TIME', 'TIMESTAMP', 'TIME_MILLIS', 'TIME_MICROS', 'TIMESTAMP_MILLIS', 'TIMESTAMP_MICROS', 'INTERVAL'].includes(
      logicalType ?? '',
    );
  return { name: node.element.name, type, ...(logicalType ? { logicalType } : {}), listDepth, numeric };
}

// ---- columns → inputs -------------------------------------------------------------------------

/** How one input is fed: one column per feature (scalars), or one list column holding the row. */
interface InputPlan {
  spec: InputSpec;
  columns: ParquetColumn[];
  /** Row dims when every row has the same (scalar columns); a list column's vary per row. */
  dims?: number[];
}

function mapColumns(columns: ParquetColumn[], inputs: readonly InputSpec[], options: ParquetRowsOptions, key: string): InputPlan[] {
  const byName = new Map(columns.map((c) => [c.name, c]));
  const missing = (what: string) =>
    new InvalidInputError('missing_columns', `${key}: ${what}; the file has columns ${columnList(columns)}`, { status: 422 });
  if (!byName.has(options.idColumn)) throw missing(`no id column "${options.idColumn}"`);
  return inputs.map((spec) => {
    const given = options.columns?.[spec.name];
    let names: string[];
    if (given) names = given;
    else if (byName.has(spec.name)) names = [spec.name];
    else if (inputs.length === 1) {
      names = columns.filter((c) => c.numeric && c.name !== options.idColumn).map((c) => c.name);
      if (names.length === 0) throw missing(`no column "${spec.name}" and no numeric column to use as features`);
    } else throw missing(`no column "${spec.name}" for input "${spec.name}"`);
    const absent = names.filter((n) => !byName.has(n));
    if (absent.length > 0) throw missing(`no column ${absent.map((n) => `"${n}"`).join(', ')} for input "${spec.name}"`);
    const plan = names.map((n) => byName.get(n) as ParquetColumn);
    for (const c of plan) checkColumnType(c, spec, key);
    return planInput(spec, plan, key);
  });
}

function planInput(spec: InputSpec, columns: ParquetColumn[], key: string): InputPlan {
  const rowDims = spec.shape.slice(1);
  const first = columns[0] as ParquetColumn;
  if (columns.length === 1 && first.listDepth > 0) {
    if (first.listDepth === rowDims.length || first.listDepth === 1) return { spec, columns };
    throw new InvalidInputError(
      'column_shape',
      `${key}: column "${first.name}" nests lists ${first.listDepth} deep; input "${spec.name}" takes rows of rank ${rowDims.length}`,
      { status: 422 },
    );
  }
  const nested = columns.find((c) => c.listDepth > 0);
  if (nested) {
    throw new InvalidInputError(
      'column_shape',
      `${key}: column "${nested.name}" is a list; several columns for input "${spec.name}" must each be one scalar feature`,
      { status: 422 },
    );
  }
  const dims = fitDims(rowDims, columns.length);
  if (!dims) {
    throw new InvalidInputError(
      'column_shape',
      `${key}: input "${spec.name}" takes rows of [${rowDims.join(', ')}]; ${columns.length} scalar column(s) cannot fill one`,
      { status: 422 },
    );
  }
  return { spec, columns, dims };
}

/** A column whose values can never be the input's datatype fails the file, not each row. */
function checkColumnType(column: ParquetColumn, spec: InputSpec, key: string): void {
  const strings = column.type === 'BYTE_ARRAY' && column.logicalType !== 'DECIMAL';
  const numbers =
    ['INT32', 'INT64', 'FLOAT', 'DOUBLE'].includes(column.type) || column.logicalType === 'FLOAT16' || column.logicalType === 'DECIMAL';
  const dated = ['DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_MILLIS', 'TIMESTAMP_MICROS', 'INTERVAL'].includes(column.logicalType ?? '');
  const ok =
    spec.datatype === 'BYTES' ? strings : spec.datatype === 'BOOL' ? column.type === 'BOOLEAN' || (numbers && !dated) : numbers && !dated;
  if (!ok) {
    const what = column.logicalType ? `${column.type} (${column.logicalType})` : column.type;
    throw new InvalidInputError(
      'column_type',
      `${key}: column "${column.name}" holds ${what}; input "${spec.name}" takes ${spec.datatype}`,
      {
        status: 422,
      },
    );
  }
}

/** Row dims holding `count` elements: the spec's, one dynamic dim taken from the count; undefined when none fits. */
function fitDims(rowDims: readonly number[], count: number): number[] | undefined {
  const fixed = rowDims.filter((d) => d >= 0).reduce((n, d) => n * d, 1);
  const dynamic = rowDims.filter((d) => d < 0).length;
  if (dynamic === 0) return fixed === count ? [...rowDims] : undefined;
  if (dynamic > 1) return rowDims.every((d) => d < 0 || d === 1) && count === 1 ? rowDims.map(() => 1) : undefined;
  if (fixed === 0 || count % fixed !== 0) return undefined;
  return rowDims.map((d) => (d < 0 ? count / fixed : d));
}

function columnList(columns: ParquetColumn[]): string {
  const named = columns.slice(0, NAMED_COLUMNS).map((c) => `"${c.name}"`);
  const more = columns.length - named.length;
  return `${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}

// ---- reading ----------------------------------------------------------------------------------

/** Decompressors: Node's own zlib where it has the codec (native), hyparquet-compressors' for the rest. */
const DECOMPRESSORS: Compressors = {
  ...pureCompressors,
  GZIP: (input) => zlib.gunzipSync(input),
  BROTLI: (input) => zlib.brotliDecompressSync(input),
  ...nativeZstd(),
};

function nativeZstd(): Compressors {
  const z = zlib as unknown as { zstdDecompressSync?: (input: Uint8Array) => Uint8Array };
  return z.zstdDecompressSync ? { ZSTD: (input) => (z.zstdDecompressSync as (i: Uint8Array) => Uint8Array)(input) } : {};
}

/** The chunk's columns: scalar ones (and the id) as typed arrays, list ones as flat leaves with row offsets. */
interface ColumnValues {
  scalars: Map<string, FlatColumn>;
  lists: Map<string, ListColumn>;
}

/**
 * Each column's values for rows [start, end), decoded page by page: scalar columns (and the id)
 * into typed arrays (parquet-pages.ts), list columns into flat leaves (parquet-lists.ts).
 */
async function readColumns(
  file: AsyncBuffer,
  metadata: FileMetaData,
  plans: InputPlan[],
  idColumn: string,
  start: number,
  end: number,
  key: string,
): Promise<ColumnValues> {
  const flat = new Set([idColumn]);
  const lists = new Set<string>();
  for (const p of plans) for (const c of p.columns) (p.dims ? flat : lists).add(c.name);
  try {
    const [scalars, listed] = await Promise.all([
      readFlatColumns(file, metadata, [...flat], start, end, DECOMPRESSORS),
      lists.size > 0 ? readListColumns(file, metadata, [...lists], start, end, DECOMPRESSORS) : new Map<string, ListColumn>(),
    ]);
    return { scalars, lists: listed };
  } catch (err) {
    throw asInputError(err, `${key}: rows ${start}–${end} could not be decoded`);
  }
}

/** Parse and decode failures are the file's (no retry); a failed GET is kept as it is (transient). */
function asInputError(err: unknown, what: string): unknown {
  if (err instanceof InvalidInputError || err instanceof StoreReadError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new InvalidInputError('invalid_parquet', `${what}: ${detail}`, { status: 422, cause: err });
}

// ---- rows -------------------------------------------------------------------------------------

/** Reads an element into a tensor slot; false when the value cannot be one of the datatype. */
type Put = (out: TensorData, at: number, value: unknown) => boolean;

function toChunkRows(plans: InputPlan[], values: ColumnValues, idColumn: string, first: number, n: number): ChunkRows {
  const bad = new BadRows(first);
  const idValues = values.scalars.get(idColumn)?.values ?? [];
  const ids: Array<string | number> = new Array(n);
  for (let r = 0; r < n; r++) {
    const id = rowId(idValues[r]);
    if (id === undefined) bad.add(r, `missing "${idColumn}" (a non-empty string or a number)`);
    else ids[r] = id;
  }
  const sources = plans.map((p) => sourceFor(p, values));
  const groups = shapeGroups(sources, n, bad);
  const out: RowGroup[] = [];
  for (const group of groups) {
    const tensors = sources.map((s, i) => s.fill(group.rows, group.dims[i] as number[], bad));
    const kept = group.rows.filter((r) => !bad.has(r));
    if (kept.length === 0) continue;
    out.push({ rows: kept, inputs: kept.length === group.rows.length ? tensors : tensors.map((t) => keepRows(t, group.rows, bad)) });
  }
  // Positions in ids: good rows in chunk order.
  const position = new Int32Array(n).fill(-1);
  const goodIds: Array<string | number> = [];
  for (let r = 0; r < n; r++) {
    if (bad.has(r)) continue;
    position[r] = goodIds.length;
    goodIds.push(ids[r] as string | number);
  }
  for (const g of out) g.rows = g.rows.map((r) => position[r] as number);
  out.sort((a, b) => (a.rows[0] ?? 0) - (b.rows[0] ?? 0));
  return { ids: goodIds, groups: out, badRows: bad.count, bad: bad.samples, lines: n };
}

function rowId(v: unknown): string | number | undefined {
  if (typeof v === 'string') return v === '' ? undefined : v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined;
  if (typeof v === 'bigint') return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : v.toString();
  return undefined;
}

/** Bad rows of a chunk: each counted once, the first few kept with their messages. */
class BadRows {
  private readonly rows = new Set<number>();
  readonly samples: ChunkBadRow[] = [];
  constructor(private readonly first: number) {}
  get count(): number {
    return this.rows.size;
  }
  has(r: number): boolean {
    return this.rows.has(r);
  }
  add(r: number, message: string): void {
    if (this.rows.has(r)) return;
    this.rows.add(r);
    if (this.samples.length < MAX_CHUNK_BAD_SAMPLES) this.samples.push({ line: this.first + r + 1, message });
  }
}

/** One input's rows: their dims (per row for a list column) and a fill into a tensor. */
interface RowSource {
  /** The dims of every row, when they cannot vary (scalar columns). */
  fixed?: number[];
  dims(r: number): number[] | string;
  /** A tensor of `rows` (all of one shape, `dims`); rows with a value out of range are marked bad. */
  fill(rows: number[], dims: number[], bad: BadRows): RowsTensor;
}

function sourceFor(plan: InputPlan, values: ColumnValues): RowSource {
  if (plan.dims)
    return scalarColumns(
      plan,
      plan.columns.map((c) => values.scalars.get(c.name) ?? { values: [] }),
      plan.dims,
    );
  const list = values.lists.get((plan.columns[0] as ParquetColumn).name);
  if (!list) throw new Error(`parquet list column "${(plan.columns[0] as ParquetColumn).name}" was not read`);
  return listColumn(plan, list);
}

/** Scalar columns, one feature each, interleaved row-major. */
function scalarColumns(plan: InputPlan, cols: FlatColumn[], dims: number[]): RowSource {
  const { spec } = plan;
  const k = cols.length;
  return {
    fixed: dims,
    dims: () => dims,
    fill(rows, _dims, bad) {
      const data = allocate(spec.datatype, rows.length * k);
      const onBad = (c: number, r: number) => {
        const { values, nulls } = cols[c] as FlatColumn;
        bad.add(r, valueMessage((plan.columns[c] as ParquetColumn).name, nulls?.[r] ? null : values[r], spec.datatype));
      };
      cols.forEach(({ nulls }, c) => {
        if (nulls) for (const r of rows) if (nulls[r]) onBad(c, r);
      });
      const sources = cols.map((c) => c.values);
      if ((data instanceof Float32Array || data instanceof Float64Array) && sources.every(isNumberArray)) {
        copyFloats(sources as Array<Float32Array | Float64Array | Int32Array | Uint32Array>, data, rows, onBad);
      } else {
        const put = PUT[spec.datatype];
        sources.forEach((src, c) => {
          for (let i = 0, o = c; i < rows.length; i++, o += k) {
            const r = rows[i] as number;
            if (!put(data, o, src[r])) onBad(c, r);
          }
        });
      }
      return { name: spec.name, datatype: spec.datatype, shape: [rows.length, ...dims], data };
    },
  };
}

/** Output bytes one block of copyFloats interleaves: small enough to stay in a core's L2. */
const INTERLEAVE_BLOCK_BYTES = 64 * 1024;

/**
 * The common case without a call per element: FLOAT, DOUBLE or INT32 columns into an FP32 or
 * FP64 tensor, row-major. Rows are interleaved a block at a time (column by column inside the
 * block), so the strided writes stay in cache: column by column over the whole chunk was 4×
 * slower at 64 columns. A value that is not finite once stored (NaN, ±inf, a DOUBLE beyond FP32's
 * range) makes its row bad.
 */
function copyFloats(
  sources: Array<Float32Array | Float64Array | Int32Array | Uint32Array>,
  out: Float32Array | Float64Array,
  rows: number[],
  onBad: (c: number, r: number) => void,
): void {
  const k = sources.length;
  const block = Math.max(16, Math.floor(INTERLEAVE_BLOCK_BYTES / (k * out.BYTES_PER_ELEMENT)));
  for (let from = 0; from < rows.length; from += block) {
    const to = Math.min(rows.length, from + block);
    for (let c = 0; c < k; c++) {
      const src = sources[c] as Float32Array;
      for (let i = from, o = from * k + c; i < to; i++, o += k) out[o] = src[rows[i] as number] as number;
    }
  }
  for (let o = 0; o < out.length; o++) {
    const w = out[o] as number;
    if (w - w !== 0) onBad(o % k, rows[Math.floor(o / k)] as number);
  }
}

/** One list column holding each row (nested lists for rank ≥ 2, or one flat list filling the row's dims). */
function listColumn(plan: InputPlan, col: ListColumn): RowSource {
  const { spec } = plan;
  const column = plan.columns[0] as ParquetColumn;
  const rowDims = spec.shape.slice(1);
  const flat = column.listDepth !== rowDims.length;
  const { depth, values, starts } = col;
  return {
    dims(r) {
      if (col.problems[r] === NULL_OR_EMPTY) return `column "${column.name}": a null or empty list, or a null element`;
      if (col.problems[r] === RAGGED) return `column "${column.name}": not a rectangular nested list`;
      const nested = Array.from(col.dims.subarray(r * depth, (r + 1) * depth));
      const dims = flat
        ? fitDims(
            rowDims,
            nested.reduce((a, b) => a * b, 1),
          )
        : nested;
      if (!dims || dims.some((d, i) => (rowDims[i] as number) >= 0 && d !== rowDims[i])) {
        return `column "${column.name}": a row of [${nested.join(', ')}] does not fit input "${spec.name}" [${rowDims.join(', ')}]`;
      }
      return dims;
    },
    fill(rows, dims, bad) {
      const size = dims.reduce((n, d) => n * d, 1);
      const data = allocate(spec.datatype, rows.length * size);
      const typed = (data instanceof Float32Array || data instanceof Float64Array) && isNumberArray(values);
      const put = PUT[spec.datatype];
      for (let i = 0; i < rows.length; i++) {
        const r = rows[i] as number;
        const from = starts[r] as number;
        const o = i * size;
        if (typed) {
          // A row's leaves are contiguous: one native copy (and conversion), then a finiteness scan.
          data.set(values.subarray(from, from + size), o);
          for (let j = 0; j < size; j++) {
            const w = data[o + j] as number;
            if (w - w !== 0) {
              bad.add(r, valueMessage(column.name, values[from + j], spec.datatype));
              break;
            }
          }
        } else {
          for (let j = 0; j < size; j++) {
            if (!put(data, o + j, values[from + j])) {
              bad.add(r, valueMessage(column.name, values[from + j], spec.datatype));
              break;
            }
          }
        }
      }
      return { name: spec.name, datatype: spec.datatype, shape: [rows.length, ...dims], data };
    },
  };
}

/** Rows grouped by shape (every input's dims); rows with a bad shape are marked and left out. */
function shapeGroups(sources: RowSource[], n: number, bad: BadRows): Array<{ dims: number[][]; rows: number[] }> {
  if (sources.every((s) => s.fixed)) {
    const rows: number[] = [];
    for (let r = 0; r < n; r++) if (!bad.has(r)) rows.push(r);
    return [{ dims: sources.map((s) => s.fixed as number[]), rows }];
  }
  const groups = new Map<string, { dims: number[][]; rows: number[] }>();
  for (let r = 0; r < n; r++) {
    if (bad.has(r)) continue;
    const dims: number[][] = [];
    let problem: string | undefined;
    for (const s of sources) {
      const d = s.dims(r);
      if (typeof d === 'string') {
        problem = d;
        break;
      }
      dims.push(d);
    }
    if (problem !== undefined) {
      bad.add(r, problem);
      continue;
    }
    const key = dims.map((d) => d.join('x')).join('|');
    const group = groups.get(key);
    if (group) group.rows.push(r);
    else groups.set(key, { dims, rows: [r] });
  }
  return [...groups.values()];
}

/** The tensor without the rows that turned out bad while it was filled. */
function keepRows(t: RowsTensor, rows: number[], bad: BadRows): RowsTensor {
  const size = t.shape.slice(1).reduce((n, d) => n * d, 1);
  const kept = rows.filter((r) => !bad.has(r)).length;
  const data = allocate(t.datatype, kept * size);
  let o = 0;
  rows.forEach((r, i) => {
    if (bad.has(r)) return;
    if (Array.isArray(data)) for (let j = 0; j < size; j++) data[o + j] = (t.data as string[])[i * size + j] as string;
    else (data as Float64Array).set((t.data as Float64Array).subarray(i * size, (i + 1) * size), o);
    o += size;
  });
  return { ...t, shape: [kept, ...t.shape.slice(1)], data };
}

function allocate(datatype: Datatype, n: number): TensorData & { [i: number]: unknown } {
  if (datatype === 'BYTES') return new Array<string>(n).fill('');
  return new (arrayTypeOf(datatype))(n) as TensorData & { [i: number]: unknown };
}

function isNumberArray(a: DecodedArray): a is Float32Array | Float64Array | Int32Array | Uint32Array {
  return a instanceof Float32Array || a instanceof Float64Array || a instanceof Int32Array || a instanceof Uint32Array;
}

const putFloat: Put = (out, at, v) => {
  const o = out as Float64Array;
  if (typeof v === 'number') o[at] = v;
  else if (typeof v === 'bigint') o[at] = Number(v);
  else return false;
  const w = o[at] as number;
  return w - w === 0;
};
const putHalf: Put = (out, at, v) => {
  const n = typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : Number.NaN;
  const h = encodeHalf(n);
  (out as Uint16Array)[at] = h;
  return (h & 0x7c00) !== 0x7c00;
};
const putInt: Put = (out, at, v) => {
  const n = typeof v === 'number' ? v : typeof v === 'bigint' ? Number(v) : Number.NaN;
  if (!Number.isInteger(n)) return false;
  const o = out as Int32Array;
  o[at] = n;
  return o[at] === n;
};
const putBig: Put = (out, at, v) => {
  let b: bigint;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number' && Number.isSafeInteger(v)) b = BigInt(v);
  else return false;
  const o = out as BigInt64Array;
  o[at] = b;
  return o[at] === b;
};
const putBool: Put = (out, at, v) => {
  if (v === true || v === 1) (out as Uint8Array)[at] = 1;
  else if (v === false || v === 0) (out as Uint8Array)[at] = 0;
  else return false;
  return true;
};
const putString: Put = (out, at, v) => {
  if (typeof v !== 'string') return false;
  (out as string[])[at] = v;
  return true;
};

const PUT: Record<Datatype, Put> = {
  BOOL: putBool,
  UINT8: putInt,
  UINT16: putInt,
  UINT32: putInt,
  UINT64: putBig,
  INT8: putInt,
  INT16: putInt,
  INT32: putInt,
  INT64: putBig,
  FP16: putHalf,
  FP32: putFloat,
  FP64: putFloat,
  BYTES: putString,
};

const EXPECTED: Record<Datatype, string> = {
  BOOL: 'true, false, 0 or 1',
  UINT8: 'an integer in [0, 255]',
  UINT16: 'an integer in [0, 65535]',
  UINT32: 'an integer in [0, 4294967295]',
  UINT64: 'an integer in [0, 2^64)',
  INT8: 'an integer in [-128, 127]',
  INT16: 'an integer in [-32768, 32767]',
  INT32: 'an integer in [-2147483648, 2147483647]',
  INT64: 'an integer in [-2^63, 2^63)',
  FP16: 'a finite number within FP16 range',
  FP32: 'a finite number within FP32 range',
  FP64: 'a finite number',
  BYTES: 'a string',
};

function valueMessage(column: string, v: unknown, datatype: Datatype): string {
  const shown = v === null || v === undefined ? 'null' : typeof v === 'string' ? JSON.stringify(v.slice(0, 40)) : String(v);
  return `column "${column}": ${shown} is not ${EXPECTED[datatype]}`;
}
