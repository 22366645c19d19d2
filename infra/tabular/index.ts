/**
 * Tabular codecs: rows of JSONL, CSV and Parquet objects in, tensors out, and parts back
 * (DESIGN §7's formats). The one way in for the worker, which reads a chunk and writes its part,
 * and for the bulk runs' planner, which samples and splits inputs; neither knows the formats.
 *
 * - chunk-io.ts: a chunk's rows in, its part out, whatever the formats;
 * - line-range.ts + line-rows.ts + csv-rows.ts + row-table.ts: JSONL and CSV rows by byte range;
 * - parquet-layout.ts: a Parquet file's footer, layout and row-range chunk plan;
 * - parquet-input.ts (+ parquet-mapping.ts, parquet-pages.ts, parquet-lists.ts): Parquet rows by row range;
 * - text-part.ts, parquet-part.ts: the part writers;
 * - formats.ts: a key's format and each format's Content-Type.
 */
export { type ChunkReadLimits, encodePart, readChunkRows } from './chunk-io.ts';
export { formatOf, PART_CONTENT_TYPES } from './formats.ts';
export { planTextChunks, sampleLines } from './line-range.ts';
export { splitCsv } from './line-rows.ts';
export { parquetLayout, planParquetChunks } from './parquet-layout.ts';
export { parquetPartRows } from './parquet-part.ts';
