/**
 * List columns (a tensor row each: a list, or lists of lists for rank ≥ 2) decoded from their
 * repetition and definition levels straight into one flat typed array of leaf values and per-row
 * offsets and dims. hyparquet's reader would build a JS array per row (and per inner list) and
 * spell every level out as a JS array: for 100,000 rows of 64 floats that was ~10 µs a row, most
 * of it garbage collection; a fixed-size list's leaves here are already the tensor, row-major.
 *
 * Levels (Dremel): each leaf slot has a repetition level (0: a new row; k: a new element of the
 * k-th list) and a definition level (the max: a value is there; lower: a null or an empty list
 * on the way). A row is well-formed when every slot has a value; its dims come from where the
 * repetition levels step, and must be rectangular.
 */
import type { AsyncBuffer, Compressors, DecodedArray, FileMetaData, PageHeader, SchemaTree } from 'hyparquet';
import { parquetSchema } from 'hyparquet';
import { parquetHeader } from 'hyparquet/src/column.js';
import { convertWithDictionary } from 'hyparquet/src/convert.js';
import { decompressPage, readDataPage, readDataPageV2 } from 'hyparquet/src/datapage.js';
import { readRleBitPackedHybrid } from 'hyparquet/src/encoding.js';
import { readPlain } from 'hyparquet/src/plain.js';
import {
  type ColumnChunk,
  type Decoder,
  decoderFor,
  fetchPages,
  groupSelections,
  inChunk,
  readDictionary,
  type Select,
} from './parquet-pages.ts';

/** A list column's rows [start, end) of the file. */
export interface ListColumn {
  /** Leaf values of the well-formed rows' slots and of the values in the others, in order. */
  values: DecodedArray;
  /** Row i's leaves are values[starts[i], starts[i + 1]). */
  starts: Int32Array;
  /** Row i's dims: dims[i * depth, (i + 1) * depth). */
  dims: Int32Array;
  depth: number;
  /** Per row: 0 well-formed, NULL_OR_EMPTY, or RAGGED. */
  problems: Uint8Array;
}

export const NULL_OR_EMPTY = 1;
export const RAGGED = 2;

/** List columns `names` (top-level names) over the file's rows [start, end). */
export async function readListColumns(
  file: AsyncBuffer,
  metadata: FileMetaData,
  names: readonly string[],
  start: number,
  end: number,
  compressors: Compressors,
): Promise<Map<string, ListColumn>> {
  const tree = parquetSchema(metadata);
  const out = new Map<string, ListColumn>();
  await Promise.all(
    names.map(async (name) => {
      const reads = groupSelections(metadata, start, end).map(({ group, index, select }) => {
        const chunk = group.columns.find((c) => c.meta_data?.path_in_schema[0] === name);
        if (!chunk?.meta_data) throw new Error(`parquet column "${name}" is not in this file`);
        const decoder = decoderFor(pathOf(tree, chunk), chunk, compressors, { group: index, groupRows: select.groupRows });
        return readListChunk(file, chunk, decoder, select);
      });
      out.set(name, joinLists(await Promise.all(reads)));
    }),
  );
  return out;
}

/** The schema nodes from the root to a column chunk's leaf. */
function pathOf(tree: SchemaTree, chunk: ColumnChunk): SchemaTree[] {
  const path = [tree];
  let node = tree;
  for (const part of chunk.meta_data?.path_in_schema ?? []) {
    const child = node.children.find((c) => c.element.name === part);
    if (!child) throw new Error(`parquet schema has no ${chunk.meta_data?.path_in_schema.join('.')}`);
    path.push(child);
    node = child;
  }
  return path;
}

interface Levels {
  rep: Uint8Array;
  /** Absent: every slot holds a value. */
  def?: Uint8Array;
  values: DecodedArray;
}

async function readListChunk(file: AsyncBuffer, chunk: ColumnChunk, decoder: Decoder, select: Select): Promise<ListColumn> {
  const { bytes, row, dictionary } = await fetchPages(file, chunk, decoder, select);
  const path = decoder.schemaPath as SchemaTree[];
  const maxRep = path.filter((n) => n.element.repetition_type === 'REPEATED').length;
  const maxDef = path.slice(1).filter((n) => n.element.repetition_type !== 'REQUIRED').length;
  const pages = inChunk(decoder, () => decodeLevelPages(bytes, decoder, select.to - row, maxRep, maxDef, dictionary));
  return rowsOf(concatLevels(pages), select.from - row, select.to - row, maxRep, maxDef);
}

/** Pages' levels and values until `rows` rows have started past the last one needed (a v1 row may run on into the next page). */
function decodeLevelPages(
  bytes: Uint8Array,
  decoder: Decoder,
  rows: number,
  maxRep: number,
  maxDef: number,
  dictionary?: DecodedArray,
): Levels[] {
  const reader = { view: new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength), offset: 0 };
  const pages: Levels[] = [];
  let dict = dictionary;
  let started = 0;
  while (started <= rows && reader.offset < bytes.byteLength) {
    const header = parquetHeader(reader);
    decoder.bounds.check(header);
    const body = bytes.subarray(reader.offset, reader.offset + header.compressed_page_size);
    reader.offset += header.compressed_page_size;
    if (header.type === 'DICTIONARY_PAGE') dict = readDictionary(body, header, decoder);
    else if (header.type === 'DATA_PAGE' || header.type === 'DATA_PAGE_V2') {
      const page = decodeLevels(body, header, decoder, maxRep, maxDef, dict);
      for (let i = 0; i < page.rep.length; i++) if (page.rep[i] === 0) started++;
      pages.push(page);
    }
  }
  return pages;
}

/** One data page's levels (typed) and values: PLAIN v1 pages here, the rest through hyparquet's decoders. */
function decodeLevels(body: Uint8Array, header: PageHeader, decoder: Decoder, maxRep: number, maxDef: number, dict?: DecodedArray): Levels {
  const v1 = header.data_page_header;
  if (header.type === 'DATA_PAGE' && v1 && v1.encoding === 'PLAIN' && decoder.type !== 'BOOLEAN') {
    const page = decompressPage(body, header.uncompressed_page_size, decoder.codec as never, decoder.compressors);
    const reader = { view: new DataView(page.buffer, page.byteOffset, page.byteLength), offset: 0 };
    const rep = new Uint8Array(v1.num_values);
    if (maxRep > 0) readRleBitPackedHybrid(reader, bitWidth(maxRep), rep);
    let def: Uint8Array | undefined;
    let defined = v1.num_values;
    if (maxDef > 0) {
      def = new Uint8Array(v1.num_values);
      readRleBitPackedHybrid(reader, bitWidth(maxDef), def);
      defined = 0;
      for (let i = 0; i < def.length; i++) if (def[i] === maxDef) defined++;
      if (defined === def.length) def = undefined;
    }
    return { rep, ...(def ? { def } : {}), values: readPlain(reader, decoder.type, defined, decoder.element.type_length) };
  }
  const page =
    header.type === 'DATA_PAGE'
      ? readDataPage(
          decompressPage(body, header.uncompressed_page_size, decoder.codec as never, decoder.compressors),
          v1 as NonNullable<typeof v1>,
          decoder,
        )
      : readDataPageV2(body, header, decoder);
  const encoding = (v1 ?? header.data_page_header_v2)?.encoding ?? 'PLAIN';
  const defs = page.definitionLevels;
  return {
    rep: Uint8Array.from(page.repetitionLevels),
    ...(defs && defs.length > 0 ? { def: Uint8Array.from(defs) } : {}),
    values: convertWithDictionary(page.dataPage, dict, encoding, decoder),
  };
}

function bitWidth(value: number): number {
  return 32 - Math.clz32(value);
}

function concatLevels(pages: Levels[]): Levels {
  if (pages.length === 1) return pages[0] as Levels;
  const slots = pages.reduce((n, p) => n + p.rep.length, 0);
  const rep = new Uint8Array(slots);
  const anyDef = pages.some((p) => p.def);
  const def = anyDef ? new Uint8Array(slots) : undefined;
  let at = 0;
  for (const p of pages) {
    rep.set(p.rep, at);
    if (def) {
      if (p.def) def.set(p.def, at);
      else def.fill(255, at, at + p.rep.length); // "every slot holds a value": marked apart from any real level
    }
    at += p.rep.length;
  }
  return { rep, ...(def ? { def } : {}), values: concatValues(pages.map((p) => p.values)) };
}

/**
 * Rows [from, to) of the levels (row 0: the first slot with repetition level 0): their leaves,
 * dims and problems.
 */
function rowsOf(levels: Levels, from: number, to: number, maxRep: number, maxDef: number): ListColumn {
  const { rep, def } = levels;
  const n = to - from;
  const slotStart = new Int32Array(n + 1);
  const valueStart = new Int32Array(n + 1);
  let row = -1;
  let value = 0;
  let i = 0;
  for (; i < rep.length; i++) {
    if (rep[i] === 0) {
      row++;
      if (row >= to) break;
      if (row >= from) {
        slotStart[row - from] = i;
        valueStart[row - from] = value;
      }
    }
    if (!def || def[i] === maxDef || def[i] === 255) value++;
  }
  if (row < to - 1) throw new Error(`parquet list column: rows ${from}–${to} were not all found`);
  slotStart[n] = i;
  valueStart[n] = value;
  const depth = Math.max(1, maxRep);
  const dims = new Int32Array(n * depth);
  const problems = new Uint8Array(n);
  for (let r = 0; r < n; r++) {
    const slots = (slotStart[r + 1] as number) - (slotStart[r] as number);
    if ((valueStart[r + 1] as number) - (valueStart[r] as number) !== slots) problems[r] = NULL_OR_EMPTY;
    else if (depth === 1) dims[r] = slots;
    else if (!nestedDims(rep, slotStart[r] as number, slots, depth, dims, r * depth)) problems[r] = RAGGED;
  }
  const first = valueStart[0] as number;
  const starts = first === 0 ? valueStart : valueStart.map((v) => v - first);
  return { values: sliceValues(levels.values, first, valueStart[n] as number), starts, dims, depth, problems };
}

/**
 * The dims of a row of `depth` nested lists from its slots' repetition levels, written to
 * `out[at…]`; false when the row is not rectangular. The innermost dim is the run before the
 * first step back out of the innermost list; each outer one, the run before a step out of it,
 * divided by the inner sizes. Then every slot's level must be the one a rectangle of those dims
 * gives: slot j starts a new element of the outermost list whose inner sizes divide j.
 */
function nestedDims(rep: Uint8Array, start: number, slots: number, depth: number, out: Int32Array, at: number): boolean {
  const inner = new Array<number>(depth + 1).fill(1);
  for (let k = depth; k >= 1; k--) {
    let run = 1;
    while (run < slots && (rep[start + run] as number) >= k) run++;
    const dim = run / (inner[k] as number);
    if (!Number.isInteger(dim)) return false;
    out[at + k - 1] = dim;
    inner[k - 1] = (inner[k] as number) * dim; // inner[k]: slots in one element of the k-th list
  }
  for (let j = 1; j < slots; j++) {
    let k = 1;
    while (k < depth && j % (inner[k] as number) !== 0) k++;
    if (rep[start + j] !== k) return false;
  }
  return true;
}

function joinLists(parts: ListColumn[]): ListColumn {
  if (parts.length === 1) return parts[0] as ListColumn;
  const n = parts.reduce((s, p) => s + p.problems.length, 0);
  const depth = parts[0]?.depth ?? 1;
  const starts = new Int32Array(n + 1);
  const dims = new Int32Array(n * depth);
  const problems = new Uint8Array(n);
  let row = 0;
  let value = 0;
  for (const p of parts) {
    const m = p.problems.length;
    for (let r = 0; r < m; r++) starts[row + r] = value + (p.starts[r] as number);
    dims.set(p.dims, row * depth);
    problems.set(p.problems, row);
    row += m;
    value += p.starts[m] as number;
  }
  starts[n] = value;
  return { values: concatValues(parts.map((p) => p.values)), starts, dims, depth, problems };
}

function concatValues(parts: DecodedArray[]): DecodedArray {
  if (parts.length === 1) return parts[0] as DecodedArray;
  const first = parts[0];
  const total = parts.reduce((s, p) => s + p.length, 0);
  if (first && !Array.isArray(first) && parts.every((p) => p.constructor === first.constructor)) {
    const out = new (first.constructor as new (n: number) => Float64Array)(total);
    let at = 0;
    for (const p of parts) {
      out.set(p as Float64Array, at);
      at += p.length;
    }
    return out;
  }
  const out: unknown[] = new Array(total);
  let at = 0;
  for (const p of parts) for (let i = 0; i < p.length; i++) out[at++] = p[i];
  return out;
}

function sliceValues(values: DecodedArray, from: number, to: number): DecodedArray {
  if (from === 0 && to === values.length) return values;
  return Array.isArray(values) ? values.slice(from, to) : values.subarray(from, to);
}
