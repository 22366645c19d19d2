/**
 * How one input object is cut into chunks, decided from a few bytes of it and never from reading
 * it whole: the driver only lists and plans; workers read their own chunks (issue 18).
 *
 * Text (JSONL, CSV): one ranged GET of the object's head gives the mean bytes per line, and the
 * object is cut into byte ranges of about `chunkRows` lines each, or smaller so the run has at
 * least MIN_CHUNKS_PER_RUN chunks (line-range.ts: a chunk owns
 * the lines that start inside its range, so any cut is correct and only sizes are estimated).
 * The head also gives a CSV object's header, which only the chunk at byte 0 would otherwise see.
 * Parquet: the footer gives the row groups, and chunks are row ranges that keep a small group
 * whole and split a big one (infra/tabular/parquet-layout.ts).
 *
 * The plan is a function of the object's bytes, `chunkRows` and the run's input size only
 * (the pinned listing's), so a resume (the listing is
 * pinned: same keys, sizes and etags) plans the same chunks under the same numbers.
 */
import { type BulkChunkSource, type BulkFormat, DEFAULT_ID_COLUMN } from '../contracts/bulk.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { parquetLayout, planParquetChunks, planTextChunks, sampleLines, splitCsv } from '../tabular/index.ts';

/** A chunk's byte span is never below this (a head with one huge line would otherwise plan crumbs). */
export const MIN_CHUNK_BYTES = 1024;
/** …nor above this, whatever the rows (a worker holds a chunk's text while it parses it). */
export const MAX_CHUNK_BYTES = 256 * 1024 * 1024;

/**
 * A run's input is cut into at least this many chunks when its rows allow (the driver passes
 * `maxChunkBytes` = input bytes / this): fewer, and the last chunks leave most workers idle while
 * one finishes (5 objects of one chunk each on 2 workers: 3 and 2, a fifth of the time lost).
 */
export const MIN_CHUNKS_PER_RUN = 16;

/** The largest chunk a run of `inputBytes` bytes should have: MIN_CHUNKS_PER_RUN of them at least. */
export function maxChunkBytesFor(inputBytes: number): number {
  return Math.max(MIN_CHUNK_BYTES, Math.ceil(inputBytes / MIN_CHUNKS_PER_RUN));
}

export interface ObjectPlan {
  /** Sources of the object's chunks in order (bucket and key filled in). */
  chunks: BulkChunkSource[];
  /** Rows in the object: exact for Parquet, estimated from the head's lines for text. */
  rows: number;
  rowsExact: boolean;
}

export async function planObject(
  store: ObjectStore,
  object: { bucket: string; key: string; sizeBytes: number; etag?: string },
  format: BulkFormat,
  options: { chunkRows: number; idColumn?: string; maxChunkBytes?: number; parquetFooterMaxBytes?: number },
): Promise<ObjectPlan> {
  const { key, sizeBytes, etag } = object;
  if (sizeBytes === 0) return { chunks: [], rows: 0, rowsExact: true };
  const sources = (ranges: Array<{ start: number; end: number }>, header?: string[]): BulkChunkSource[] =>
    ranges.map((r) => ({
      bucket: object.bucket,
      key,
      format,
      sizeBytes,
      ...(etag ? { etag } : {}),
      start: r.start,
      end: r.end,
      ...(header ? { header } : {}),
    }));
  const cap = Math.max(MIN_CHUNK_BYTES, options.maxChunkBytes ?? MAX_CHUNK_BYTES);
  if (format === 'parquet') {
    // Pinned to the listed etag, and the footer's size checked before it is fetched or decoded.
    const layout = await parquetLayout(store, key, sizeBytes, {
      ...(etag ? { etag } : {}),
      ...(options.parquetFooterMaxBytes !== undefined ? { footerMaxBytes: options.parquetFooterMaxBytes } : {}),
    });
    const rowsCap = Math.max(1, Math.floor((cap * layout.rows) / sizeBytes));
    const chunkRows = Math.min(options.chunkRows, rowsCap);
    return { chunks: sources(planParquetChunks(layout, chunkRows)), rows: layout.rows, rowsExact: true };
  }
  const head = await sampleLines(store, key, sizeBytes, undefined, etag);
  const bytesPerLine = head.bytesPerLine ?? sizeBytes;
  const chunkBytes = Math.min(MAX_CHUNK_BYTES, cap, Math.max(MIN_CHUNK_BYTES, Math.round(bytesPerLine * options.chunkRows)));
  const header = format === 'csv' ? csvHeader(head.firstLine, options.idColumn ?? DEFAULT_ID_COLUMN) : undefined;
  return {
    chunks: sources(planTextChunks(sizeBytes, chunkBytes), header),
    rows: Math.max(1, Math.round(sizeBytes / bytesPerLine)),
    rowsExact: false,
  };
}

/** A CSV object's header: its first line when that line's first cell is the id column's name. */
function csvHeader(firstLine: string | undefined, idColumn: string): string[] | undefined {
  if (firstLine === undefined) return undefined;
  const cells = splitCsv(firstLine);
  if (!cells || cells[0]?.trim().toLowerCase() !== idColumn.toLowerCase()) return undefined;
  return cells.map((c) => c.trim());
}
