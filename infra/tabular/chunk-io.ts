/**
 * A chunk's rows in, its part out, whatever the formats: what a worker calls (worker/bulk-chunk.ts)
 * to read the chunk its job names and to encode the part it writes. The formats' own modules do
 * the work: line-range.ts + line-rows.ts (JSONL, CSV), parquet-input.ts, text-part.ts,
 * parquet-part.ts.
 */
import type { BulkChunkSpec, ChunkRows, RowsTensor } from '../contracts/bulk.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { DEFAULT_MAX_LINE_BYTES, readOwnedLines } from './line-range.ts';
import { createLineRows } from './line-rows.ts';
import { readParquetRows } from './parquet-input.ts';
import { parquetPart } from './parquet-part.ts';
import { csvPart, jsonlPart } from './text-part.ts';

/** What a worker's reads may cost, from its config. */
export interface ChunkReadLimits {
  /** PARQUET_FOOTER_MAX_BYTES: the largest footer decoded (config.ts's default when absent). */
  parquetFooterMaxBytes?: number;
}

/**
 * The rows of the chunk `spec` names, read from `store` (the input's bucket). Every read is
 * pinned to the etag the run listed (`input_changed` when the object is another version now).
 */
export async function readChunkRows(
  spec: BulkChunkSpec,
  store: ObjectStore,
  inputs: readonly TensorSpec[],
  limits: ChunkReadLimits = {},
): Promise<ChunkRows> {
  const { source } = spec;
  const etag = source.etag ? { etag: source.etag } : {};
  const options = { idColumn: spec.idColumn, ...(spec.columns ? { columns: spec.columns } : {}) };
  if (source.format === 'parquet') {
    const footer = limits.parquetFooterMaxBytes !== undefined ? { footerMaxBytes: limits.parquetFooterMaxBytes } : {};
    const parquet = { ...options, ...etag, ...footer };
    return readParquetRows(store, source.key, source.sizeBytes, { start: source.start, end: source.end }, inputs, parquet);
  }
  const rows = createLineRows(inputs, source.format, {
    ...options,
    ...(source.header ? { header: source.header } : {}),
    skipFirstLineIfHeader: source.start === 0 && source.header !== undefined,
    maxLineBytes: DEFAULT_MAX_LINE_BYTES,
  });
  for await (const lines of readOwnedLines(store, source.key, source, source.sizeBytes, etag)) rows.push(lines);
  return rows.finish();
}

/** The part's bytes in the run's output format. */
export function encodePart(spec: BulkChunkSpec, ids: ReadonlyArray<string | number>, outputs: RowsTensor[]): Uint8Array {
  if (spec.outputFormat === 'parquet') return parquetPart(ids, outputs, spec.idColumn);
  if (spec.outputFormat === 'csv') return csvPart(ids, outputs, spec.idColumn);
  return jsonlPart(ids, outputs, spec.idColumn);
}
