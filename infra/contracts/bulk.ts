/**
 * Bulk scoring runs (DESIGN §7): the contract between the run coordinator (infra/bulk), the
 * workers that score chunks and write their parts, and the surfaces that start and watch runs
 * (the HTTP API, the `warmpool bulk run` CLI). Names here are used by people and tools outside
 * the code: the part and manifest object names, the statuses, the progress fields.
 */

export const BULK_RUN_STATUSES = ['running', 'succeeded', 'failed', 'canceled'] as const;
export type BulkRunStatus = (typeof BULK_RUN_STATUSES)[number];

export const BULK_FORMATS = ['jsonl', 'csv'] as const;
export type BulkFormat = (typeof BULK_FORMATS)[number];

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
  /** The run fails once more bad rows than this were seen (default: unlimited). */
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
  chunkRows: number;
  deadline?: number;
  webhook?: { url: string; events: BulkWebhookEvent[] };
  maxBadRows?: number;
  createdAt: number;
}

export interface BadRow {
  /** Input object key. */
  object: string;
  /** 1-based line number within the object. */
  line: number;
  message: string;
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
  /** Recent throughput (rows with written parts per second). */
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

/** Object names in the output prefix (contract). */
export function partKey(output: S3Location, chunk: number): string {
  return `${output.prefix}part-${String(chunk).padStart(6, '0')}.jsonl`;
}
export function manifestKey(output: S3Location): string {
  return `${output.prefix}_manifest.json`;
}

/**
 * A chunk job's extra data (JobData.bulk): the worker scores the rows and writes the part
 * itself, so results go to S3 rather than Redis and a retried chunk overwrites its part.
 */
export interface BulkChunkSpec {
  /** The run's ref, `<tenant>/<run id>` (run ids are per tenant): part of the chunk's job id. */
  runId: string;
  chunk: number;
  /** One id per row, in row order. */
  ids: Array<string | number>;
  output: S3Location;
}

/** What a chunk job returns once its part is written. */
export interface BulkPartResult {
  key: string;
  rows: number;
  bytes: number;
  sha256: string;
}
