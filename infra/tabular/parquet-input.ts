/**
 * Parquet bulk input (issue 18): a chunk is a range of a file's rows, read by the worker that
 * scores it with ranged GETs of only what it needs: the footer, then the pages of the columns
 * that feed the model (with an offset index, only the pages of the chunk's rows), so a worker's
 * memory follows its chunk, not the file (a group without offset indexes: its column chunks).
 *
 *   readParquetRows    a chunk's rows as typed tensors (ChunkRows), bad rows apart
 *
 * The footer, the layout and the chunk plan are parquet-layout.ts's; which columns feed which
 * input is parquet-mapping.ts's. A row is checked as a
 * JSONL row is (row-table.ts): an id that is a non-empty string or a finite number, the input's
 * rank and fixed dims, each value by its datatype's rule (contracts/datatypes.ts: in range, floats
 * finite and not rounding to ±inf, with the words a submitted job's values get). A row that fails is a
 * ChunkBadRow with its 1-based row number in the file; a file that cannot feed the model at all
 * (a missing column, a string column for a numeric input) is an InvalidInputError, and the run
 * fails with it. Columns are decoded page by page with hyparquet's decoders (parquet-pages.ts
 * for scalar columns, parquet-lists.ts for list columns) into typed arrays, and go to tensors in
 * loops over those, never through per-row objects: a list row is one native copy.
 */
import type { AsyncBuffer, Compressors, DecodedArray, FileMetaData } from 'hyparquet';
import type { ChunkBadRow, ChunkRows, RowGroup, RowsTensor } from '../contracts/bulk.ts';
import { MAX_CHUNK_BAD_SAMPLES } from '../contracts/bulk.ts';
import { type Datatype, elementWriter, newElements, type PackedArray, refusal } from '../contracts/datatypes.ts';
import { BOUNDED_DECOMPRESSORS } from './parquet-codecs.ts';
import { cachedFooter, layoutOf, type ParquetColumn } from './parquet-layout.ts';
import { type ListColumn, NULL_OR_EMPTY, RAGGED, readListColumns } from './parquet-lists.ts';
import { type ColumnMapping, fitDims, type InputPlan, type InputSpec, mapColumns } from './parquet-mapping.ts';
import { asInputError, type FlatColumn, objectBuffer, type RangeReader, readFlatColumns } from './parquet-pages.ts';

export type { RangeReader } from './parquet-pages.ts';

export interface ParquetRowsOptions extends ColumnMapping {
  /**
   * The object's etag as listed: every read is pinned to it (`input_changed` when the object is
   * another version now), and the footer is decoded once per file per process, not per chunk.
   */
  etag?: string;
  /** PARQUET_FOOTER_MAX_BYTES (config.ts's default when absent). */
  footerMaxBytes?: number;
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
  const file = objectBuffer(store, key, sizeBytes, options.etag);
  const metadata = await cachedFooter(store, file, key, sizeBytes, {
    ...(options.etag !== undefined ? { etag: options.etag } : {}),
    ...(options.footerMaxBytes !== undefined ? { footerMaxBytes: options.footerMaxBytes } : {}),
  });
  const layout = layoutOf(metadata);
  const plans = mapColumns(layout.columns, inputs, options, key);
  const start = Math.max(0, Math.min(range.start, layout.rows));
  const end = Math.max(start, Math.min(range.end, layout.rows));
  const values =
    end > start ? await readColumns(file, metadata, plans, options.idColumn, start, end, key) : { scalars: new Map(), lists: new Map() };
  return toChunkRows(plans, values, options.idColumn, start, end - start);
}

// ---- reading ----------------------------------------------------------------------------------

/** Decompressors with every page's output bounded by its declared size (parquet-codecs.ts). */
const DECOMPRESSORS: Compressors = BOUNDED_DECOMPRESSORS;

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

// ---- rows -------------------------------------------------------------------------------------

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
        const put = elementWriter(spec.datatype);
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
      const put = elementWriter(spec.datatype);
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

function allocate(datatype: Datatype, n: number): PackedArray | string[] {
  return newElements(datatype, n);
}

function isNumberArray(a: DecodedArray): a is Float32Array | Float64Array | Int32Array | Uint32Array {
  return a instanceof Float32Array || a instanceof Float64Array || a instanceof Int32Array || a instanceof Uint32Array;
}

function valueMessage(column: string, v: unknown, datatype: Datatype): string {
  return `column "${column}": ${refusal(datatype, v ?? null)}`;
}
