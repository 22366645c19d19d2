/**
 * A Parquet file's layout and its chunk plan, from the footer alone (issue 18): the rows, row
 * groups and top-level columns the driver plans from, and the row ranges it cuts. Apart from
 * reading rows (parquet-input.ts) because the planner never reads a row: it needs only the
 * footer, and a worker reads the same footer, decoded once per file (cachedFooter), before its
 * chunk's pages.
 *
 *   parquetLayout      the footer: rows, row groups, columns (the driver plans from it)
 *   planParquetChunks  row ranges of about `chunkRows`: a small row group whole (neighbours
 *                      merged), a big one split
 */
import { type AsyncBuffer, type FileMetaData, parquetMetadata, parquetSchema, type SchemaTree } from 'hyparquet';
import { loadConfig } from '../kernel/config.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { asInputError, objectBuffer, type RangeReader } from './parquet-pages.ts';

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

/** How a footer is read: the version it must be (the listing's etag), and the most it may declare. */
export interface FooterOptions {
  /** The object's etag as listed: every read is pinned to it (`input_changed` when it is another). */
  etag?: string;
  /** PARQUET_FOOTER_MAX_BYTES; config.ts's default when absent. */
  footerMaxBytes?: number;
}

/**
 * Reads only the footer (one or two ranged GETs). InvalidInputError when the object is not
 * Parquet, or its footer declares more than `footerMaxBytes` (then after the first GET alone).
 */
export async function parquetLayout(
  store: RangeReader,
  key: string,
  sizeBytes: number,
  options: FooterOptions = {},
): Promise<ParquetLayout> {
  return layoutOf(await readFooter(objectBuffer(store, key, sizeBytes, options.etag), key, footerLimit(options.footerMaxBytes)));
}

let defaultFooterMaxBytes: number | undefined;

/** The limit given, else PARQUET_FOOTER_MAX_BYTES's default (config.ts's, as an empty environment has it). */
function footerLimit(given: number | undefined): number {
  if (given !== undefined) return given;
  defaultFooterMaxBytes ??= loadConfig({}).bulk.parquetFooterMaxBytes;
  return defaultFooterMaxBytes;
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

/** Footers kept per store: a worker scores a file's chunks one after another, and each read and decoded it again. */
const FOOTERS_KEPT = 32;
const footers = new WeakMap<RangeReader, Map<string, Promise<FileMetaData>>>();

/**
 * The file's footer, decoded once per (key, size, etag) and store while it stays among the last
 * FOOTERS_KEPT: the etag pins the bytes (a file rewritten under the same key has another), so
 * without one nothing is kept. A failed read is not kept.
 */
export function cachedFooter(
  store: RangeReader,
  file: AsyncBuffer,
  key: string,
  sizeBytes: number,
  options: FooterOptions,
): Promise<FileMetaData> {
  const { etag } = options;
  const limit = footerLimit(options.footerMaxBytes);
  if (!etag) return readFooter(file, key, limit);
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
  const read = readFooter(file, key, limit);
  kept.set(id, read);
  read.catch(() => kept.delete(id));
  while (kept.size > FOOTERS_KEPT) kept.delete(kept.keys().next().value as string);
  return read;
}

/** Bytes a Parquet file ends with: the footer's length (4, little-endian) and `PAR1`. */
const TRAILER_BYTES = 8;
const PAR1 = 0x31524150;

/**
 * The file's footer, its length checked against `maxBytes` from the trailer (in the first GET,
 * the file's last FOOTER_FETCH_BYTES) before any more of it is fetched or a byte decoded: a
 * footer of 17 MB took the driver 4 s to decode (issue 33).
 */
export async function readFooter(file: AsyncBuffer, key: string, maxBytes: number): Promise<FileMetaData> {
  const notParquet = (detail: string) =>
    new InvalidInputError('invalid_parquet', `${key} is not a Parquet file we can read: ${detail}`, { status: 422 });
  const size = file.byteLength;
  if (size < 4 + TRAILER_BYTES) throw notParquet(`it is ${size} bytes, too short for a Parquet file`);
  const tailStart = Math.max(0, size - FOOTER_FETCH_BYTES);
  const tail = new Uint8Array(await file.slice(tailStart, size));
  const view = new DataView(tail.buffer, tail.byteOffset, tail.byteLength);
  if (view.getUint32(tail.length - 4, true) !== PAR1) throw notParquet('it does not end with PAR1');
  const length = view.getUint32(tail.length - TRAILER_BYTES, true);
  if (length > maxBytes) {
    throw new InvalidInputError(
      'parquet_footer_too_large',
      `${key}: its footer (file metadata) is ${length} bytes, more than the ${maxBytes} (PARQUET_FOOTER_MAX_BYTES) a run decodes; ` +
        'write the file with fewer row groups or columns (or without large statistics), or split it',
      { status: 422 },
    );
  }
  if (length + TRAILER_BYTES + 4 > size) throw notParquet(`its footer declares ${length} bytes, more than the file holds`);
  let footer = tail;
  const footerStart = size - length - TRAILER_BYTES;
  if (footerStart < tailStart) {
    footer = new Uint8Array(length + TRAILER_BYTES);
    footer.set(new Uint8Array(await file.slice(footerStart, tailStart)));
    footer.set(tail, tailStart - footerStart);
  } else footer = tail.subarray(footerStart - tailStart);
  try {
    return parquetMetadata(footer);
  } catch (err) {
    throw asInputError(err, `${key} is not a Parquet file we can read`);
  }
}

export function layoutOf(metadata: FileMetaData): ParquetLayout {
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
