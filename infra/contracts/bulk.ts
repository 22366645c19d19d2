/**
 * Bulk scoring runs (DESIGN §7): the contract between the run coordinator (infra/bulk), the
 * workers that score chunks and write their parts, and the surfaces that start and watch runs
 * (the HTTP API, the `warmpool bulk run` CLI). Names here are used by people and tools outside
 * the code: the part and manifest object names, the statuses, the progress fields.
 */

import type { Datatype } from './oip.ts';
import type { TensorData } from './packed-tensors.ts';

export const BULK_RUN_STATUSES = ['running', 'succeeded', 'failed', 'canceled'] as const;
export type BulkRunStatus = (typeof BULK_RUN_STATUSES)[number];

export const BULK_FORMATS = ['jsonl', 'csv', 'parquet'] as const;
export type BulkFormat = (typeof BULK_FORMATS)[number];

/** The id column (JSONL key, CSV header cell, Parquet column) unless a run names another. */
export const DEFAULT_ID_COLUMN = 'id';

/**
 * Which input columns feed which model input: input name → column names. One name: that column
 * is the input's row (a list or fixed-size list column, nested JSON arrays, or a scalar for a
 * one-element row). Several: one scalar feature each, in the order given. Unset (the default):
 * the column named like each input; for a single-input model without such a column, every
 * numeric column but the id, in file order.
 */
export type BulkColumns = Record<string, string[]>;

export const BULK_WEBHOOK_EVENTS = ['bulk.progress', 'bulk.succeeded', 'bulk.failed', 'bulk.canceled'] as const;
export type BulkWebhookEvent = (typeof BULK_WEBHOOK_EVENTS)[number];

/** `s3://bucket/prefix/` split: the prefix is used as given (normally ends with '/'). */
export interface S3Location {
  bucket: string;
  prefix: string;
}

/** What a caller asks for; validated by `parseBulkRunSpec` in infra/bulk (one place for CLI and API). */
export interface BulkRunRequest {
  model: string;
  version?: string;
  /** `s3://bucket/prefix/` */
  input: string;
  /** `s3://bucket/prefix/` */
  output: string;
  /** Unset: from each object's extension (`.jsonl`/`.json` or `.csv`). */
  format?: BulkFormat;
  chunkRows?: number;
  /** Finish-by time: epoch ms, or an ISO string / `HH:MM` (next occurrence, local time) resolved by the caller's clock. */
  deadline?: number | string;
  /** Progress and completion webhooks (signed like job webhooks). */
  webhook?: { url: string; events?: BulkWebhookEvent[] };
  /** Output part format; default the input's (the first object's when inputs mix formats). */
  outputFormat?: BulkFormat;
  /** Input columns per model input (see BulkColumns); default by name. */
  columns?: BulkColumns;
  /** Default `id`. */
  idColumn?: string;
  /**
   * The run fails once more bad rows than this were seen. Default: the bad-row budget, more
   * than 1 % of the run's rows and at least 100 (see `badRowBudget`).
   */
  maxBadRows?: number;
  /** Caller-chosen id: starting a run with an existing id resumes it (same spec required). */
  runId?: string;
}

/** A validated, resolved run spec, stored with the run. */
export interface BulkRunSpec {
  id: string;
  tenant: string;
  model: string;
  /** Resolved at creation (the deployment's version when not given) and fixed for the run. */
  version: string;
  input: S3Location;
  output: S3Location;
  format?: BulkFormat;
  outputFormat?: BulkFormat;
  columns?: BulkColumns;
  idColumn?: string;
  chunkRows: number;
  deadline?: number;
  webhook?: { url: string; events: BulkWebhookEvent[] };
  maxBadRows?: number;
  createdAt: number;
}

export interface BadRow {
  /** Input object key. */
  object: string;
  /** 1-based line number within the object (text), or 1-based row number (Parquet). */
  line: number;
  /** Text inputs: the byte offset of the line's start in the object. */
  byte?: number;
  message: string;
}

/** Bad rows the run tolerates before it fails with `too_many_bad_rows` (issue 18's default budget). */
export const BAD_ROW_BUDGET = { fraction: 0.01, atLeast: 100 } as const;

/**
 * The most bad rows a run of `rows` rows (good and bad) may have: `maxBadRows` when given, else
 * 1 % of the rows and at least 100. Whatever the budget, a run with bad rows and no good one fails.
 */
export function badRowBudget(rows: number, maxBadRows?: number): number {
  if (maxBadRows !== undefined) return maxBadRows;
  return Math.max(BAD_ROW_BUDGET.atLeast, Math.floor(rows * BAD_ROW_BUDGET.fraction));
}

export interface BulkProgress {
  /** Rows with a written part. */
  rowsDone: number;
  /** Exact once the inputs were read to the end; estimated from bytes read before (see `rowsTotalExact`). */
  rowsTotal: number;
  rowsTotalExact: boolean;
  chunksDone: number;
  /** Known once the inputs were read to the end. */
  chunksTotal?: number;
  badRows: number;
  /**
   * Rows with written parts per second: while running, the recent rate; once succeeded, rows ÷
   * the run's duration, the manifest's `timings.rowsPerSecond` (infra/bulk progress.ts
   * `runRowsPerSecond`); 0 once failed or canceled.
   */
  rowsPerSecond: number;
  /** Seconds left at the recent rate; absent until there is a rate. */
  etaSeconds?: number;
  /** Epoch ms. */
  etaAt?: number;
  /** With a deadline: whether the ETA is before it. */
  onTrack?: boolean;
}

export interface BulkRunView {
  id: string;
  tenant: string;
  model: string;
  version: string;
  status: BulkRunStatus;
  input: string;
  output: string;
  chunkRows: number;
  deadline?: number;
  /** Where the run's webhooks go (bulk-core addition: `notify` needs it, and the caller may check it). */
  webhook?: { url: string; events: BulkWebhookEvent[] };
  /** `bulk` normally; `urgent` once the ETA said the deadline would be missed. */
  priority: 'bulk' | 'urgent';
  progress: BulkProgress;
  /** The first few bad rows, for the caller to fix their input. */
  badRowSamples: BadRow[];
  error?: { code: string; message: string };
  /** `s3://…/_manifest.json` once the run succeeded. */
  manifest?: string;
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
}

/** The use case the API routes and the CLI call. Errors: InvalidInputError (bad request), NotFoundError. */
export interface BulkRuns {
  /** Creates the run, or resumes the existing one with the same id and spec (409 on a different spec). */
  start(tenant: string, request: BulkRunRequest): Promise<BulkRunView>;
  /** null when there is no such run for this tenant. */
  get(tenant: string, id: string): Promise<BulkRunView | null>;
  /** Cancels a running run (its queued chunks are removed; written parts stay). Returns the new view, null when unknown. */
  cancel(tenant: string, id: string): Promise<BulkRunView | null>;
}

/** Object names in the output prefix (contract): `part-000042.jsonl` (or `.csv`, `.parquet`). */
export function partKey(output: S3Location, chunk: number, format: BulkFormat = 'jsonl'): string {
  return `${output.prefix}part-${String(chunk).padStart(6, '0')}.${format}`;
}
export function manifestKey(output: S3Location): string {
  return `${output.prefix}_manifest.json`;
}

/**
 * Where a chunk's rows are: one input object and a range of it. Text (JSONL, CSV): the chunk owns
 * every line whose first byte lies in [start, end), reading on past `end` to finish its last one.
 * Parquet: the file's rows [start, end) (0-based, across row groups).
 */
export interface BulkChunkSource {
  bucket: string;
  key: string;
  format: BulkFormat;
  start: number;
  end: number;
  /** The object's size in bytes: where a text chunk's last line must end, where Parquet's footer is. */
  sizeBytes: number;
  /** The object's etag as the run's pinned listing has it (when the store gave one). */
  etag?: string;
  /** CSV: the object's header cells when its first line is a header (only the chunk at byte 0 reads it). */
  header?: string[];
}

/**
 * Where a chunk job's rows are and its part goes (ChunkData.bulk, queue-job.ts): the worker reads its own rows from S3, scores them and
 * writes the part itself, so no row passes through Redis, and a retried chunk overwrites its part.
 */
export interface BulkChunkSpec {
  /** The run's ref, `<tenant>/<run id>` (run ids are per tenant): part of the chunk's job id. */
  runId: string;
  chunk: number;
  source: BulkChunkSource;
  output: S3Location;
  outputFormat: BulkFormat;
  columns?: BulkColumns;
  idColumn: string;
}

/** A bad row a chunk found, in chunk terms (the driver makes `line` the object's: BadRow). */
export interface ChunkBadRow {
  /** 1-based line within the chunk (text), or 1-based row number within the file (Parquet). */
  line: number;
  /** Text: the line's first byte in the object. */
  byte?: number;
  message: string;
}

/** What a chunk job returns once its part is written. */
export interface BulkPartResult {
  key: string;
  /** Rows scored (lines in the part). */
  rows: number;
  bytes: number;
  sha256: string;
  /** Bad rows the chunk skipped (absent: none, or a part read back without its job). */
  badRows?: number;
  /** The first few of them. */
  badSamples?: ChunkBadRow[];
  /** Text: the lines the chunk owns (good, bad and blank): turns its local line numbers into the object's. */
  lines?: number;
}

/**
 * Rows of one model input (or output) stacked along a first axis: shape `[rows, ...row dims]`,
 * data flat row-major in the datatype's typed array (packed-tensors.ts; BOOL as 0/1 bytes,
 * BYTES as strings). What chunk readers produce and part writers take: no JSON numbers.
 */
export interface RowsTensor {
  name: string;
  datatype: Datatype;
  shape: number[];
  data: TensorData;
}

/** Good rows of one shape: one forward pass. `rows` are their positions in ChunkRows.ids, ascending. */
export interface RowGroup {
  rows: number[];
  inputs: RowsTensor[];
}

/**
 * What a chunk reader made of a chunk's rows: every good row's id in chunk order, the rows as
 * groups of one shape each (nearly always one group), and the bad rows apart.
 */
export interface ChunkRows {
  ids: Array<string | number>;
  groups: RowGroup[];
  /** Every bad row counted; `bad` keeps only the first MAX_CHUNK_BAD_SAMPLES. */
  badRows: number;
  bad: ChunkBadRow[];
  /** Text: lines the chunk owns (good, bad and blank); Parquet: rows read. */
  lines: number;
}

/** Bad rows a chunk keeps with their messages (the rest are counted). */
export const MAX_CHUNK_BAD_SAMPLES = 20;
