/**
 * BullMQ intake: takes jobs from the model version's queue and feeds their rows to the
 * micro-batcher. The BullMQ worker keeps enough jobs in flight (`concurrency`) to fill batches;
 * each job's processor waits on its rows' forward passes, so BullMQ renews its lock on the main
 * thread meanwhile and a crashed worker's jobs go back to the queue as stalled (at-least-once).
 *
 * An entry's members end with outcomes of their own (entry-intake.ts: the entry completes even
 * when some fail). For an `infer` job, errors become BullMQ decisions here and nowhere else: a
 * job past its start deadline (`timeoutMs`) → UnrecoverableError (`deadline_exceeded: …`, never
 * run late); invalid input → UnrecoverableError (`invalid_input: …`, no retry); a forward pass
 * that fails for this job alone (the batcher bisected it out) → UnrecoverableError,
 * `invalid_input` when ORT found an index out of range in
 * the job's data and `inference_failed` otherwise, with our words, never ORT's (its message
 * names graph nodes: it goes to `onRejected`, the worker's log; engine/rejections.ts); anything
 * else is thrown as is and retried with back-off.
 *
 * Bounded work: every job is checked against MAX_ROWS_PER_JOB and MAX_ELEMENTS_PER_JOB again
 * here, before anything is allocated for it, whatever its producer (an older API, a crafted
 * queue entry): a shape like `[1e9, 0]` is invalid input, not a billion rows to slice.
 *
 * Poison pills: a job whose worker dies or freezes while holding it (its lock expires, BullMQ's
 * stalled check puts it back) gets one more worker. After MAX_WORKER_CRASHES such stalls BullMQ
 * marks it, and the next worker to fetch it fails it at once without running it (BullMQ's
 * "job stalled more than allowable limit", shown as `worker_crashed`: infra/queue/job-view.ts).
 *
 * Two kinds of job: queue entries (`entry`: many requests, packed tensors; entry-intake.ts), how
 * the API sends online requests; bulk chunks (the worker reads their rows itself: bulk-chunk.ts); and
 * online jobs an older API queued. Only entries fill the result cache (infra/redis/result-cache.ts,
 * which holds packed outputs); an `infer` job's outputs are its returnvalue alone.
 */
import { DelayedError, type Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import { type EntryData, type EntryResult, isEntryData } from '../infra/contracts/entry.ts';
import type { JobData, JobResult } from '../infra/contracts/job.ts';
import { queueName } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { OipRequestedOutput, OipTensor } from '../infra/contracts/oip.ts';
import { validateInferRequest } from '../infra/contracts/oip-validate.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import type { OpenJobsReleaser } from '../infra/redis/open-jobs.ts';
import type { ResultCache } from '../infra/redis/result-cache.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { Slice, SliceResult } from './batch-runner.ts';
import type { Batcher } from './batcher.ts';
import { type ChunkFormats, scoreChunk } from './bulk-chunk.ts';
import { EngineRejectedError, type EngineTensor } from './engine/engine.ts';
import { rejectionOf } from './engine/rejections.ts';
import { concatRows, engineToOip, oipToEngine, sliceRows } from './engine/tensor-codec.ts';
import { type EntryDeps, entryEnded, processEntry } from './entry-intake.ts';

/** A forward pass failed for one slice alone: the job's data is what the model rejects. */
export class SliceFailedError extends Error {}

export interface IntakeOptions {
  connection: RedisClient;
  prefix: string;
  manifest: ModelManifest;
  batcher: Batcher<Slice, SliceResult>;
  /** Rows per slice: a big job spans several forward passes. */
  maxRows: number;
  /** What one job may declare (MAX_ROWS_PER_JOB, MAX_ELEMENTS_PER_JOB), checked before anything is allocated. */
  bounds: JobBounds;
  concurrency: number;
  lockDurationMs: number;
  stalledIntervalMs: number;
  workerId: string;
  /** The worker's clock: when a job without BullMQ's processedOn stamp was taken. */
  clock: Pick<Clock, 'now'>;
  /** JOB_RETENTION_S: how long an entry's outputs are kept. */
  retentionS: number;
  /** Where entries' successful results are stored for repeats; no caching when absent. */
  results?: Pick<ResultCache, 'putMany'>;
  /** Reads bulk chunks and writes their parts (worker/bulk-chunk.ts); bulk chunk jobs fail (and retry) without it. */
  bulk?: BulkChunkIo;
  /** A result that could not be stored (the job still succeeds). */
  onCacheError?: (err: unknown) => void;
  /** An ended entry's inputs that could not be deleted (they expire after JOB_RETENTION_S). */
  onCleanupError?: (err: unknown) => void;
  /** A forward pass ONNX Runtime rejected for this job alone: ORT's full message, for operators. */
  onRejected?: (e: { jobId: string; code: string; ortMessage: string }) => void;
  onJobDone?: (e: { outcome: 'succeeded' | 'failed' | 'retry'; queueMs: number; rows: number }) => void;
  /** Whether to run jobs now (see IntakeGate); every job runs when absent. */
  gate?: IntakeGate;
  /** Told of each online job that ended here for good, so it no longer counts among its tenant's open jobs. */
  openJobs?: Pick<OpenJobsReleaser, 'release'>;
}

/** A worker's way to bulk data: object stores by bucket, and the format readers and writers (loaded on first use). */
export interface BulkChunkIo {
  storeFor(bucket: string): ObjectStore;
  formats(): Promise<ChunkFormats>;
}

/** What the intake takes: entries, and `infer` jobs (bulk chunks, an older API's online jobs). */
export type IntakeData = JobData | EntryData;
export type IntakeResult = JobResult | EntryResult;
export type IntakeWorker = Worker<IntakeData, IntakeResult>;

export interface JobBounds {
  maxRows: number;
  maxElements: number;
}

/**
 * Workers that may die or freeze holding one job: after the second, the job is failed as
 * `worker_crashed` instead of being handed to a third (BullMQ's maxStalledCount is the stalls it
 * forgives). A job that kills every worker it meets would otherwise walk the whole pool.
 */
export const MAX_WORKER_CRASHES = 2;

/**
 * Says whether the intake may run a job it took. A standby worker's intake can still take a job
 * after it was told to stop — a fetch already under way (on a Redis Cluster, where BullMQ's
 * pause cannot cut it short) — and such a job goes back to the queue untouched: no attempt
 * counted, no event, `returned()` called instead. Jobs taken before the stop still run.
 */
export interface IntakeGate {
  /** `takenAt`: when BullMQ moved the job to active (its processedOn, this host's clock). */
  admit(takenAt: number): boolean;
  returned(): void;
}

/**
 * Returns when `job` may run; otherwise moves it back to wait and throws BullMQ's WaitingError (no
 * attempt is counted). `clock` stands in for BullMQ's processedOn when a job has none.
 */
export async function admitOrReturn(
  job: Job,
  token: string | undefined,
  gate: IntakeGate | undefined,
  clock: Pick<Clock, 'now'>,
): Promise<void> {
  if (!gate || gate.admit(job.processedOn ?? clock.now())) return;
  await job.moveToWait(token);
  gate.returned();
  throw new WaitingError();
}

/**
 * Bulk chunks one worker holds at once: one read and parsed on this thread while another is in
 * the engine. A BullMQ worker fetches up to its concurrency (sized for online micro-batches, up
 * to hundreds), so without a bound the first worker to fetch hoarded a run's queued chunks and
 * finished them alone while another idled (measured: 2 workers of a CNN ran at 0.6 of ONNX
 * Runtime). A chunk past the bound goes back to the queue for CHUNK_RETURN_DELAY_MS, no attempt
 * counted, where a worker with room takes it.
 */
export const MAX_CHUNKS_IN_HAND = 2;
export const CHUNK_RETURN_DELAY_MS = 200;

export function createIntake(options: IntakeOptions): IntakeWorker {
  const { manifest } = options;
  const queue = queueName(manifest.name, manifest.version);
  const entries: EntryDeps = { ...options, redis: options.connection, queue };
  let chunksInHand = 0;
  const process = async (job: Job<IntakeData, IntakeResult>, token?: string): Promise<IntakeResult> => {
    await admitOrReturn(job, token, options.gate, options.clock);
    const startedAt = job.processedOn ?? options.clock.now();
    const data = job.data;
    if (isEntryData(data)) return processEntry(entries, job.id ?? '', data, startedAt);
    if (!data.bulk) return processJob(job.id ?? '', data, startedAt);
    if (chunksInHand >= MAX_CHUNKS_IN_HAND) {
      await job.moveToDelayed(options.clock.now() + CHUNK_RETURN_DELAY_MS, token);
      throw new DelayedError();
    }
    chunksInHand++;
    try {
      return await processJob(job.id ?? '', data, startedAt);
    } finally {
      chunksInHand--;
    }
  };
  const processJob = async (jobId: string, data: JobData, startedAt: number): Promise<JobResult> => {
    const queueMs = Math.max(0, startedAt - data.submittedAt);
    const { timeoutMs } = data;
    if (timeoutMs !== undefined && queueMs > timeoutMs) {
      options.onJobDone?.({ outcome: 'failed', queueMs, rows: 0 });
      throw new UnrecoverableError(`deadline_exceeded: the job waited ${queueMs} ms for a worker; its deadline was ${timeoutMs} ms`);
    }
    try {
      if (data.bulk) return await runChunk(data.bulk, options, queueMs);
      const result = await runJob(data, options, queueMs);
      options.onJobDone?.({ outcome: 'succeeded', queueMs, rows: result.rows });
      return result.result;
    } catch (err) {
      const unrecoverable = err instanceof InvalidInputError || err instanceof SliceFailedError;
      options.onJobDone?.({ outcome: unrecoverable ? 'failed' : 'retry', queueMs, rows: 0 });
      if (err instanceof InvalidInputError) throw new UnrecoverableError(`invalid_input: ${err.message}`);
      if (err instanceof SliceFailedError) {
        const { code, message } = rejectionOf(err.message);
        options.onRejected?.({ jobId, code, ortMessage: err.message });
        throw new UnrecoverableError(`${code}: ${message}`);
      }
      throw err;
    }
  };
  const worker = new Worker<IntakeData, IntakeResult>(queue, process, {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    maxStalledCount: MAX_WORKER_CRASHES - 1,
    autorun: false,
    name: options.workerId,
  });
  const { openJobs } = options;
  const onCleanupError = options.onCleanupError ?? (() => undefined);
  // Every end, the stalled-job failure too (BullMQ fails it before the processor runs). A failed
  // attempt that will be retried has no finishedOn yet: the job is still open, its inputs needed.
  const ended = (job: Job<IntakeData, IntakeResult> | undefined) => {
    if (!job?.id || job.finishedOn === undefined) return;
    const data = job.data;
    if (isEntryData(data)) entryEnded({ redis: options.connection, prefix: options.prefix, queue, openJobs }, job.id, data, onCleanupError);
    else if (!data.bulk) openJobs?.release(data.tenant, job.id);
  };
  worker.on('completed', ended);
  worker.on('failed', ended);
  return worker;
}

/**
 * A bulk chunk: the worker reads its rows from S3 and writes its part (bulk-chunk.ts); the job
 * returns the part, never outputs. A chunk job from before workers read their own rows (its rows
 * in the job, no `source`) is refused: its run must be started again.
 */
async function runChunk(bulk: NonNullable<JobData['bulk']>, options: IntakeOptions, queueMs: number): Promise<JobResult> {
  if (!options.bulk) throw new Error('this worker has no object store for bulk chunks');
  if (!bulk.source) {
    throw new InvalidInputError('invalid_chunk', 'a chunk job from an older warmpool (rows inside the job); start the bulk run again');
  }
  let inferMs = 0;
  let batchRows = 0;
  const scored = await scoreChunk(bulk, {
    storeFor: options.bulk.storeFor,
    manifest: options.manifest,
    maxRows: options.maxRows,
    formats: await options.bulk.formats(),
    infer: async (inputs, rows) => {
      const result = await options.batcher.submit({ inputs, rows }).catch((err: unknown) => {
        throw err instanceof EngineRejectedError ? new SliceFailedError(err.message, { cause: err }) : err;
      });
      inferMs += result.inferMs;
      batchRows = Math.max(batchRows, result.batchRows);
      return result.outputs;
    },
  });
  options.onJobDone?.({ outcome: 'succeeded', queueMs, rows: scored.rows });
  return { outputs: [], part: scored.part, timings: { queueMs, inferMs: round(inferMs), batchRows }, workerId: options.workerId };
}

async function runJob(data: JobData, options: IntakeOptions, queueMs: number): Promise<{ result: JobResult; rows: number }> {
  const { manifest, batcher, maxRows } = options;
  // Jobs normally come validated from the API; validating again keeps any other producer
  // (or a stale job from an older model version) from crashing a forward pass for others.
  const request: DecodedJob = validated(data, manifest, options.bounds);
  const { tensors } = request;

  const slices: Slice[] = [];
  for (let start = 0; start < request.rows; start += maxRows) {
    const end = Math.min(request.rows, start + maxRows);
    const inputs: Record<string, EngineTensor> = {};
    for (const [name, t] of Object.entries(tensors)) inputs[name] = end - start === request.rows ? t : sliceRows(t, start, end);
    slices.push({ inputs, rows: end - start });
  }
  const results = await Promise.all(
    slices.map((s) =>
      batcher.submit(s).catch((err: unknown) => {
        throw err instanceof EngineRejectedError ? new SliceFailedError(err.message, { cause: err }) : err;
      }),
    ),
  );

  const wanted = request.outputs?.map((o) => o.name) ?? manifest.outputs.map((o) => o.name);
  const outputs: OipTensor[] = wanted.map((name) => {
    const parts = results.map((r) => r.outputs[name] as EngineTensor);
    return engineToOip(name, parts.length === 1 ? (parts[0] as EngineTensor) : concatRows(parts));
  });
  return {
    rows: request.rows,
    result: {
      outputs,
      timings: {
        queueMs,
        inferMs: round(results.reduce((sum, r) => sum + r.inferMs, 0)),
        batchRows: Math.max(...results.map((r) => r.batchRows)),
      },
      workerId: options.workerId,
    },
  };
}

interface DecodedJob {
  tensors: Record<string, EngineTensor>;
  rows: number;
  outputs?: OipRequestedOutput[];
}

function validated(data: JobData, manifest: ModelManifest, bounds: JobBounds): DecodedJob {
  const request = validateInferRequest({ inputs: data.inputs, outputs: data.outputs }, manifest, bounds);
  const tensors: Record<string, EngineTensor> = {};
  // Legacy jobs carry JSON data, never binary: no binary map is passed, so data is JSON values.
  for (const input of request.inputs) tensors[input.name] = oipToEngine(input as OipTensor);
  return { ...request, tensors };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
