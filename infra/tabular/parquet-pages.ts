/**
 * Parquet's bytes for a bulk worker: the file as ranged GETs of the object store (`objectBuffer`)
 * and flat (scalar) columns decoded page by page into typed arrays (`readFlatColumns`).
 *
 * Why not hyparquet's own column reader for flat columns: it rebuilds every value of an OPTIONAL
 * column (what Spark, pandas and DuckDB write, nulls or not) through its nested-list assembler
 * into a JS array, which was two thirds of the time of reading 64 FLOAT columns, and most of
 * the garbage. Here a page's values stay the typed array hyparquet's page decoder made, and nulls
 * become a mask beside them. Page headers, decompression, encodings and dictionaries are still
 * hyparquet's (its src/ modules, public in its package exports; the version is pinned exactly).
 *
 * Reads are narrow: only the row groups that hold the rows asked for, and inside a group, with
 * an offset index, only the pages that hold them (plus the dictionary page).
 */
import type { Readable } from 'node:stream';
import {
  type AsyncBuffer,
  type Compressors,
  type DecodedArray,
  type FileMetaData,
  type PageHeader,
  parquetSchema,
  readOffsetIndex,
  type SchemaTree,
} from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { convert, convertWithDictionary, DEFAULT_PARSERS } from 'hyparquet/src/convert.js';
import { decompressPage, readDataPage, readDataPageV2 } from 'hyparquet/src/datapage.js';
import { readPlain } from 'hyparquet/src/plain.js';
import { InvalidInputError } from '../kernel/errors.ts';
import { ObjectChangedError, type ReadOptions } from '../registry/object-store.ts';
import { MAX_PAGE_BYTES, PageBoundError, PageBounds } from './parquet-bounds.ts';

/** What this module needs from an object store (infra/registry/object-store.ts has it). */
export interface RangeReader {
  getRange(key: string, start: number, endExclusive: number, options?: ReadOptions): Promise<Readable | null>;
}

/** One column's values for a row range: `values[i]` is row i's, unless `nulls[i]` is 1. */
export interface FlatColumn {
  values: DecodedArray;
  nulls?: Uint8Array;
}

/** A GET that failed: transient (a retry may succeed), unlike a fault in the file's bytes. */
export class StoreReadError extends Error {
  override readonly name = 'StoreReadError';
}

/** Parse and decode failures are the file's (no retry); a failed GET is kept as it is (transient). */
export function asInputError(err: unknown, what: string): unknown {
  if (err instanceof InvalidInputError || err instanceof StoreReadError) return err;
  const detail = err instanceof Error ? err.message : String(err);
  return new InvalidInputError('invalid_parquet', `${what}: ${detail}`, { status: 422, cause: err });
}

export type Decoder = Parameters<typeof readDataPage>[2] &
  Parameters<typeof convert>[1] & { codec: string; compressors: Compressors; bounds: PageBounds; where: string };

/** Slices asked for in one turn are merged into one GET across gaps up to this… */
const MERGE_GAP_BYTES = 64 * 1024;
/** …while the merged GET stays under this. */
const MAX_GET_BYTES = 32 * 1024 * 1024;

/** Flat columns `names` over the file's rows [start, end). */
export async function readFlatColumns(
  file: AsyncBuffer,
  metadata: FileMetaData,
  names: readonly string[],
  start: number,
  end: number,
  compressors: Compressors,
): Promise<Map<string, FlatColumn>> {
  const tree = new Map(parquetSchema(metadata).children.map((node) => [node.element.name, node] as const));
  const pieces = new Map<string, Piece[]>(names.map((n) => [n, []]));
  const reads: Array<Promise<void>> = [];
  for (const { group, index, select } of groupSelections(metadata, start, end)) {
    for (const name of names) {
      const node = tree.get(name);
      const chunk = group.columns.find((c) => c.meta_data?.path_in_schema.length === 1 && c.meta_data.path_in_schema[0] === name);
      if (!node || !chunk?.meta_data) throw new Error(`parquet column "${name}" is not a flat column of this file`);
      const decoder = decoderFor([{ children: [node], count: 1, element: { name: 'root' }, path: [] }, node], chunk, compressors, {
        group: index,
        groupRows: select.groupRows,
      });
      reads.push(readChunk(file, chunk, decoder, select).then((p) => void (pieces.get(name) as Piece[]).push(...p)));
    }
  }
  await Promise.all(reads);
  return new Map(names.map((n) => [n, joinPieces(pieces.get(n) as Piece[], start, end, n)]));
}

/**
 * What hyparquet's page decoders take: the column's schema path (root to leaf) and its codec;
 * and what its pages may declare (parquet-bounds.ts), from the chunk's row group `group`.
 */
export function decoderFor(
  schemaPath: SchemaTree[],
  chunk: ColumnChunk,
  compressors: Compressors,
  group: { group: number; groupRows: number },
): Decoder {
  const meta = chunk.meta_data as NonNullable<ColumnChunk['meta_data']>;
  const leaf = (schemaPath[schemaPath.length - 1] as SchemaTree).element;
  const bounds = new PageBounds({
    group: group.group,
    column: meta.path_in_schema.join('.'),
    type: meta.type,
    ...(leaf.type_length !== undefined ? { typeLength: leaf.type_length } : {}),
    groupRows: group.groupRows,
    flat: schemaPath.every((n) => n.element.repetition_type !== 'REPEATED'),
    totalUncompressed: Number(meta.total_uncompressed_size),
  });
  return {
    bounds,
    where: `row group ${group.group}, column "${meta.path_in_schema.join('.')}"`,
    type: meta.type,
    element: (schemaPath[schemaPath.length - 1] as SchemaTree).element,
    schemaPath,
    codec: meta.codec,
    compressors,
    parsers: DEFAULT_PARSERS,
    utf8: true,
    pathInSchema: meta.path_in_schema,
  } as unknown as Decoder;
}

/** A page's rows: `values` (and `nulls`) from file row `rowStart` on. */
export interface Piece {
  rowStart: number;
  values: DecodedArray;
  nulls?: Uint8Array;
}

export interface Select {
  /** Rows of the group to read: [from, to), group-relative. */
  from: number;
  to: number;
  groupStart: number;
  groupRows: number;
}

export type ColumnChunk = FileMetaData['row_groups'][number]['columns'][number];

/** The row groups holding rows of the file's [start, end), each with the rows of it selected. */
export function groupSelections(
  metadata: FileMetaData,
  start: number,
  end: number,
): Array<{ group: FileMetaData['row_groups'][number]; index: number; select: Select }> {
  const out: Array<{ group: FileMetaData['row_groups'][number]; index: number; select: Select }> = [];
  let groupStart = 0;
  for (const [index, group] of metadata.row_groups.entries()) {
    const groupRows = Number(group.num_rows);
    const select = { from: Math.max(start - groupStart, 0), to: Math.min(end - groupStart, groupRows), groupStart, groupRows };
    if (select.from < select.to) out.push({ group, index, select });
    groupStart += groupRows;
  }
  return out;
}

/** One column chunk's pages that hold rows [from, to) of its group. */
async function readChunk(file: AsyncBuffer, chunk: ColumnChunk, decoder: Decoder, select: Select): Promise<Piece[]> {
  const pages = await fetchPages(file, chunk, decoder, select);
  return inChunk(decoder, () => decodePages(pages.bytes, decoder, select, pages.row, pages.dictionary));
}

/** A page's fault named with its row group and column (a bound's refusal names them already). */
export function inChunk<T>(decoder: Decoder, decode: () => T): T {
  try {
    return decode();
  } catch (err) {
    if (err instanceof PageBoundError || err instanceof InvalidInputError || err instanceof StoreReadError) throw err;
    throw new Error(`${decoder.where}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

/**
 * The bytes of a column chunk's pages that hold rows [from, to) of its group: with an offset
 * index only those pages (and the dictionary, fetched beside them), else the whole chunk.
 * `row` is the group row the bytes' first page starts at.
 */
export async function fetchPages(
  file: AsyncBuffer,
  chunk: ColumnChunk,
  decoder: Decoder,
  select: Select,
): Promise<{ bytes: Uint8Array; row: number; dictionary?: DecodedArray }> {
  const meta = chunk.meta_data as NonNullable<ColumnChunk['meta_data']>;
  const chunkStart = Number(meta.dictionary_page_offset || meta.data_page_offset);
  const chunkEnd = chunkStart + Number(meta.total_compressed_size);
  const narrowed = select.from > 0 || select.to < select.groupRows;
  if (!narrowed || !chunk.offset_index_offset || !chunk.offset_index_length) {
    return { bytes: new Uint8Array(await file.slice(chunkStart, chunkEnd)), row: 0 };
  }
  if (chunk.offset_index_length > MAX_PAGE_BYTES) {
    throw new PageBoundError(
      `${decoder.where}: its offset index declares ${chunk.offset_index_length} bytes; the file is corrupt or hostile`,
    );
  }
  const at = Number(chunk.offset_index_offset);
  const pages = readOffsetIndex({ view: new DataView(await file.slice(at, at + chunk.offset_index_length)), offset: 0 }).page_locations;
  const rowOf = (i: number) => Number((pages[i] as (typeof pages)[number]).first_row_index);
  let first = 0;
  while (first + 1 < pages.length && rowOf(first + 1) <= select.from) first++;
  let last = first;
  while (last + 1 < pages.length && rowOf(last + 1) < select.to) last++;
  const lastPage = pages[last] as (typeof pages)[number];
  const dataStart = Number((pages[first] as (typeof pages)[number]).offset);
  const dataEnd = Number(lastPage.offset) + lastPage.compressed_page_size;
  const dictEnd = Number((pages[0] as (typeof pages)[number]).offset);
  const [dict, data] = await Promise.all([
    dictEnd > chunkStart ? file.slice(chunkStart, dictEnd) : new ArrayBuffer(0),
    file.slice(dataStart, dataEnd),
  ]);
  const dictionary = dict.byteLength > 0 ? inChunk(decoder, () => dictionaryOf(new Uint8Array(dict), decoder)) : undefined;
  return { bytes: new Uint8Array(data), row: rowOf(first), ...(dictionary ? { dictionary } : {}) };
}

/** The dictionary in the bytes before a chunk's data pages. */
function dictionaryOf(bytes: Uint8Array, decoder: Decoder): DecodedArray | undefined {
  const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
  const header = parquetHeader(reader);
  if (header.type !== 'DICTIONARY_PAGE') return undefined;
  decoder.bounds.check(header);
  return readDictionary(bytes.subarray(reader.offset, reader.offset + header.compressed_page_size), header, decoder);
}

export function readDictionary(compressed: Uint8Array, header: PageHeader, decoder: Decoder): DecodedArray {
  const page = decompressPage(compressed, header.uncompressed_page_size, decoder.codec as never, decoder.compressors);
  const count = header.dictionary_page_header?.num_values ?? 0;
  const reader = { view: new DataView(page.buffer, page.byteOffset, page.byteLength), offset: 0 };
  return convert(readPlain(reader, decoder.type, count, decoder.element.type_length), decoder);
}

/** Pages in `bytes` (starting at group row `row`), each kept as its typed values and a null mask. */
function decodePages(bytes: Uint8Array, decoder: Decoder, select: Select, row: number, dictionary?: DecodedArray): Piece[] {
  const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
  const pieces: Piece[] = [];
  const maxDefinition = decoder.element.repetition_type === 'REQUIRED' ? 0 : 1;
  let dict = dictionary;
  let at = row;
  while (at < select.to && reader.offset < bytes.byteLength) {
    const header = parquetHeader(reader);
    decoder.bounds.check(header);
    const body = bytes.subarray(reader.offset, reader.offset + header.compressed_page_size);
    reader.offset += header.compressed_page_size;
    if (header.type === 'DICTIONARY_PAGE') {
      dict = readDictionary(body, header, decoder);
      continue;
    }
    const rows = header.data_page_header?.num_values ?? header.data_page_header_v2?.num_rows;
    if (rows === undefined) continue; // an index page: nothing to read
    if (at + rows > select.from) {
      const page = header.type === 'DATA_PAGE' ? readPageV1(body, header, decoder, maxDefinition) : readDataPageV2(body, header, decoder);
      const encoding = (header.data_page_header ?? header.data_page_header_v2)?.encoding ?? 'PLAIN';
      const values = convertWithDictionary(page.dataPage, dict, encoding, decoder);
      pieces.push({ rowStart: select.groupStart + at, ...withNulls(values, page.definitionLevels, maxDefinition, rows) });
    }
    at += rows;
  }
  return pieces;
}

/**
 * A v1 data page. The common page of an OPTIONAL column without nulls (its definition levels one
 * run of 1s) and PLAIN values is read here, straight to a typed array: hyparquet's page reader
 * would first spell out every definition level as a JS array. Anything else is hyparquet's.
 */
function readPageV1(body: Uint8Array, header: PageHeader, decoder: Decoder, maxDefinition: number): ReturnType<typeof readDataPage> {
  const daph = header.data_page_header as NonNullable<PageHeader['data_page_header']>;
  const page = decompressPage(body, header.uncompressed_page_size, decoder.codec as never, decoder.compressors);
  const view = new DataView(page.buffer, page.byteOffset, page.byteLength);
  if (daph.encoding === 'PLAIN' && decoder.type !== 'BOOLEAN') {
    let offset = 0;
    if (maxDefinition === 1 && daph.definition_level_encoding === 'RLE' && page.byteLength >= 4) {
      const length = view.getUint32(0, true);
      const run = readVarInt(view, 4);
      // One RLE run (header's low bit 0) of num_values 1s (bit width 1: one byte): no nulls.
      if (run && (run.value & 1) === 0 && run.value >>> 1 === daph.num_values && view.getUint8(run.end) === 1) offset = 4 + length;
    }
    if (offset > 0 || maxDefinition === 0) {
      const reader = { view, offset };
      const dataPage = readPlain(reader, decoder.type, daph.num_values, decoder.element.type_length);
      return { definitionLevels: [], repetitionLevels: [], dataPage };
    }
  }
  return readDataPage(page, daph, decoder);
}

/** An unsigned LEB128 varint at `at` (at most 5 bytes); undefined past the end. */
function readVarInt(view: DataView, at: number): { value: number; end: number } | undefined {
  let value = 0;
  for (let i = 0, shift = 0; i < 5 && at + i < view.byteLength; i++, shift += 7) {
    const b = view.getUint8(at + i);
    value += (b & 0x7f) * 2 ** shift;
    if ((b & 0x80) === 0) return { value, end: at + i + 1 };
  }
  return undefined;
}

/** Dense values of a page: as decoded when it has no nulls, else spread over its rows with a mask. */
function withNulls(values: DecodedArray, levels: number[] | undefined, maxDefinition: number, rows: number): FlatColumn {
  if (!levels || levels.length === 0 || maxDefinition === 0) return { values };
  const nulls = new Uint8Array(rows);
  const dense: DecodedArray = Array.isArray(values)
    ? new Array(rows).fill(null)
    : new (values.constructor as new (n: number) => typeof values)(rows);
  for (let i = 0, v = 0; i < rows; i++) {
    if (levels[i] === maxDefinition) (dense as unknown[])[i] = values[v++];
    else nulls[i] = 1;
  }
  return { values: dense, nulls };
}

/** Pieces of one column clipped to [start, end) and joined: typed when every piece is the same typed array. */
export function joinPieces(pieces: readonly Piece[], start: number, end: number, column: string): FlatColumn {
  const parts: FlatColumn[] = [];
  let at = start;
  for (const p of [...pieces].sort((a, b) => a.rowStart - b.rowStart)) {
    const pEnd = p.rowStart + p.values.length;
    if (pEnd <= at || p.rowStart >= end) continue;
    if (p.rowStart > at) break;
    const from = at - p.rowStart;
    const to = Math.min(end, pEnd) - p.rowStart;
    parts.push({ values: slice(p.values, from, to), ...(p.nulls ? { nulls: p.nulls.subarray(from, to) } : {}) });
    at = Math.min(end, pEnd);
  }
  if (at !== end) throw new Error(`parquet column "${column}": rows ${at}–${end} were not found in the file`);
  if (parts.length === 1) return parts[0] as FlatColumn;
  const n = end - start;
  const nulls = parts.some((p) => p.nulls) ? new Uint8Array(n) : undefined;
  const first = parts[0]?.values;
  const typed = first !== undefined && !Array.isArray(first) && parts.every((p) => p.values.constructor === first.constructor);
  const values: DecodedArray = typed ? new (first.constructor as new (n: number) => Float64Array)(n) : new Array(n);
  let o = 0;
  for (const p of parts) {
    if (typed) (values as Float64Array).set(p.values as Float64Array, o);
    else for (let i = 0; i < p.values.length; i++) (values as unknown[])[o + i] = p.values[i];
    if (p.nulls) nulls?.set(p.nulls, o);
    o += p.values.length;
  }
  return nulls ? { values, nulls } : { values };
}

function slice(data: DecodedArray, from: number, to: number): DecodedArray {
  if (from === 0 && to === data.length) return data;
  return Array.isArray(data) ? data.slice(from, to) : data.subarray(from, to);
}

// ---- ranged reads -----------------------------------------------------------------------------

interface SliceRequest {
  start: number;
  end: number;
  resolve(bytes: ArrayBuffer): void;
  reject(err: unknown): void;
}

/**
 * hyparquet's file over ranged GETs. Slices asked for in one turn of the event loop (every
 * column's pages, every offset index, at once) are merged into as few GETs as their gaps allow,
 * so a chunk of 64 columns costs a few requests, not 128.
 */
export function objectBuffer(store: RangeReader, key: string, byteLength: number, etag?: string): AsyncBuffer {
  let queue: SliceRequest[] = [];
  const flush = (): void => {
    const batch = queue;
    queue = [];
    for (const run of mergeRuns(batch)) void readRun(store, key, run, etag);
  };
  return {
    byteLength,
    slice(start, end = byteLength) {
      if (end <= start) return new ArrayBuffer(0);
      return new Promise<ArrayBuffer>((resolve, reject) => {
        if (queue.length === 0) setImmediate(flush);
        queue.push({ start, end, resolve, reject });
      });
    },
  };
}

function mergeRuns(requests: SliceRequest[]): Array<{ start: number; end: number; requests: SliceRequest[] }> {
  const runs: Array<{ start: number; end: number; requests: SliceRequest[] }> = [];
  for (const q of [...requests].sort((a, b) => a.start - b.start)) {
    const last = runs[runs.length - 1];
    if (last && q.start <= last.end + MERGE_GAP_BYTES && Math.max(last.end, q.end) - last.start <= MAX_GET_BYTES) {
      last.end = Math.max(last.end, q.end);
      last.requests.push(q);
    } else runs.push({ start: q.start, end: q.end, requests: [q] });
  }
  return runs;
}

async function readRun(
  store: RangeReader,
  key: string,
  run: { start: number; end: number; requests: SliceRequest[] },
  etag: string | undefined,
): Promise<void> {
  try {
    const bytes = await readRange(store, key, run.start, run.end, etag);
    for (const q of run.requests) {
      const from = bytes.byteOffset + q.start - run.start;
      const whole = from === 0 && q.end - q.start === bytes.buffer.byteLength;
      q.resolve(whole ? (bytes.buffer as ArrayBuffer) : (bytes.buffer.slice(from, from + q.end - q.start) as ArrayBuffer));
    }
  } catch (err) {
    for (const q of run.requests) q.reject(err);
  }
}

/**
 * The bytes [start, end) of the version `etag` names (every read of a run is pinned to its
 * listing's etag: a file rewritten mid-run is `input_changed`, never a mix of two versions).
 */
async function readRange(store: RangeReader, key: string, start: number, end: number, etag: string | undefined): Promise<Buffer> {
  const what = `reading ${key} bytes ${start}–${end}`;
  let body: Readable | null;
  const chunks: Buffer[] = [];
  try {
    body = await store.getRange(key, start, end, etag !== undefined ? { ifMatch: etag } : undefined);
    if (body) for await (const c of body) chunks.push(c as Buffer);
  } catch (err) {
    if (err instanceof ObjectChangedError) throw inputChanged(key, err);
    throw new StoreReadError(`${what}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  if (body === null) throw new InvalidInputError('input_missing', `${key} is gone from the input location`, { status: 422 });
  const bytes = Buffer.concat(chunks);
  if (bytes.byteLength !== end - start) {
    throw new InvalidInputError('input_changed', `${what}: got ${bytes.byteLength} bytes; did the object change?`, { status: 422 });
  }
  return bytes;
}

/** The object is not the version the run listed: a retry reads the same, so the run fails. */
export function inputChanged(key: string, err: ObjectChangedError): InvalidInputError {
  return new InvalidInputError(
    'input_changed',
    `${key} changed since the run listed it (etag ${err.expectedEtag}): ${err.message}; start a new run to score the new input`,
    { status: 409, cause: err },
  );
}
