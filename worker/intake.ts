/**
 * BullMQ intake: takes jobs from the model version's queue and feeds their rows to the
 * micro-batcher. The BullMQ worker keeps enough jobs in flight (`concurrency`) to fill batches;
 * each job's processor waits on its rows' forward passes, so BullMQ renews its lock on the main
 * thread meanwhile and a crashed worker's jobs go back to the queue as stalled (at-least-once).
 *
 * One job path, by BullMQ job name (infra/contracts/queue-job.ts):
 *   `entry`  queue entries, how the API sends online requests (many requests, packed tensors):
 *            entry-intake.ts; each member ends with an outcome of its own (the entry completes
 *            even when some fail), and only entries fill the result cache (infra/redis/result-cache.ts);
 *   `bulk`   bulk chunks: the worker reads their rows itself and writes the part (bulk-chunk.ts);
 *   other    failed at once, never run (UnrecoverableError, OUTDATED_JOB_FAILURE: `start it again`):
 *            an online job an API from before queue entries queued (`infer`, rows inside) that
 *            was still queued when this worker came up. Its tenant's open-job slot is released.
 *
 * For a chunk, errors become BullMQ decisions here and nowhere else: invalid input →
 * UnrecoverableError (`invalid_input: …`, no retry); a forward pass that fails for this chunk
 * alone (the batcher bisected it out) → UnrecoverableError, `invalid_input` when ORT found an
 * index out of range in its data and `inference_failed` otherwise, with our words, never ORT's
 * (its message names graph nodes: it goes to `onRejected`, the worker's log;
 * engine/rejections.ts); anything else is thrown as is and retried with back-off.
 *
 * Bounded work: every entry is checked against MAX_ROWS_PER_JOB and MAX_ELEMENTS_PER_JOB again
 * here, before anything is allocated for it, whatever its producer (an older API, a crafted
 * queue entry): a shape like `[1e9, 0]` is invalid input, not a billion rows to slice.
 *
 * Poison pills: a job whose worker dies or freezes while holding it (its lock expires, BullMQ's
 * stalled check puts it back) gets one more worker. After MAX_WORKER_CRASHES such stalls BullMQ
 * marks it, and the next worker to fetch it fails it at once without running it (BullMQ's
 * "job stalled more than allowable limit", shown as `worker_crashed`: infra/queue/job-view.ts).
 */
import { type Job, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import { queueName } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import {
  asQueueJob,
  type ChunkData,
  type ChunkResult,
  isLegacyJobData,
  OUTDATED_JOB_FAILURE,
  type QueueJobData,
  type QueueJobResult,
} from '../infra/contracts/queue-job.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { createQueueWakeups } from '../infra/queue/index.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import type { OpenJobsReleaser } from '../infra/redis/open-jobs.ts';
import type { ResultCache } from '../infra/redis/result-cache.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { Slice, SliceResult } from './batch-runner.ts';
import type { Batcher } from './batcher.ts';
import { type ChunkFormats, scoreChunk } from './bulk-chunk.ts';
import { EngineRejectedError } from './engine/engine.ts';
import { rejectionOf } from './engine/rejections.ts';
import { type EntryDeps, entryEnded, processEntry, type StoredBytesLedger } from './entry-intake.ts';

/** A forward pass failed for one slice alone: the job's data is what the model rejects. */
export class SliceFailedError extends Error {}

export interface IntakeOptions {
  /** BullMQ's Worker's connection (its scripts are defined on it). */
  connection: RedisClient;
  /**
   * Where the entries' own reads and writes go (inputs, outputs, cleanup): a client without
   * BullMQ's scripts, since ioredis copies every script of a client onto each pipeline it makes
   * (issue 34: reading an entry was the worker's largest self-time entry). `connection` when absent.
   */
  entries?: RedisClient;
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
  /** The tenants' stored bytes (MAX_STORED_BYTES_PER_TENANT): outputs charged, ended entries' inputs released; none when absent. */
  storedBytes?: StoredBytesLedger;
}

/** A worker's way to bulk data: object stores by bucket, and the format readers and writers (loaded on first use). */
export interface BulkChunkIo {
  storeFor(bucket: string): ObjectStore;
  formats(): Promise<ChunkFormats>;
}

/** What the intake takes: entries and bulk chunks (anything else it fails: see the header). */
export type IntakeWorker = Worker<QueueJobData, QueueJobResult>;

export interface JobBounds {
  maxRows: number;
  maxElements: number;
  maxBytesElements: number;
}

/**
 * Workers that may die or freeze holding one job: after the second, the job is failed as
 * `worker_crashed` instead of being handed to a third (BullMQ's maxStalledCount is the stalls it
 * forgives). A job that kills every worker it meets would otherwise walk the whole pool.
 */
export const MAX_WORKER_CRASHES = 2;

/**
 * Says whether the intake may run a job it took, and when the intake stops holding it. A standby
 * worker's intake can still take a job after it was told to stop — a fetch already under way (on
 * a Redis Cluster, where BullMQ's pause cannot cut it short) — and such a job goes back to the
 * queue untouched: no attempt counted, no event. Jobs taken before the stop still run.
 *
 * `settled` is called once the processor is done with a job, however it ended: BullMQ emits
 * neither `completed` nor `failed` for a job whose lock was lost while it ran (its move to
 * completed and then to failed both fail on the lock, and only `error` is emitted), nor for one
 * sent back to wait, so a count kept from those events alone leaks, and a standby that waits on it
 * never ends (the worker stays active while the scaler tells it to stand by).
 */
export interface IntakeGate {
  /** `takenAt`: when BullMQ moved the job to active (its processedOn, this host's clock). */
  admit(takenAt: number): boolean;
  settled(jobId: string): void;
}

/**
 * `run` behind the gate: a job the gate refuses goes back to wait and BullMQ's WaitingError is
 * thrown (no attempt is counted); the gate hears `settled` however the job ended. `clock` stands
 * in for BullMQ's processedOn when a job has none.
 */
export function gated<J extends Job, R>(
  gate: IntakeGate | undefined,
  clock: Pick<Clock, 'now'>,
  run: (job: J, token?: string) => Promise<R>,
): (job: J, token?: string) => Promise<R> {
  if (!gate) return run;
  return async (job, token) => {
    try {
      if (!gate.admit(job.processedOn ?? clock.now())) {
        await job.moveToWait(token);
        throw new WaitingError();
      }
      return await run(job, token);
    } finally {
      if (job.id) gate.settled(job.id);
    }
  };
}

/**
 * Bulk chunks one worker holds at once: one read and parsed on this thread while another is in
 * the engine. A BullMQ worker fetches up to its concurrency (sized for online micro-batches, up
 * to hundreds), so without a bound the first worker to fetch hoarded a run's queued chunks and
 * finished them alone while another idled (measured: 2 workers of a CNN ran at 0.6 of ONNX
 * Runtime).
 *
 * A chunk fetched past the bound is held as the worker's one *waiter*, and the worker fetches
 * nothing more meanwhile (its concurrency is 1 while the waiter waits: BullMQ's loop fetches
 * only while fewer jobs than that are in hand). The waiter wakes on, and only on,
 *   - a chunk of this worker ending: it takes that slot and runs here, no Redis call at all;
 *   - an online job becoming waiting, or another worker finding the queue drained (it is idle),
 *     read from the queue's events stream (infra/queue queue-wakeups.ts): the waiter goes back
 *     to the queue (no attempt counted) and the worker fetches again, online jobs first;
 *   - the worker pausing or closing: it goes back.
 * And while it holds chunks, the worker fetches at most one job more than it holds (concurrency
 * MAX_CHUNKS_IN_HAND + 1): BullMQ fetches a whole round, up to its concurrency, before it starts
 * any of them, so a worker whose full concurrency came back when its waiter took a slot fetched
 * every chunk queued (up to its concurrency) and handed all but one straight back, two Redis
 * calls each (scripts/bench/chunk-handback.ts, one worker, chunks of 1,000 rows: 2.4 fetches
 * and 83 Redis commands per chunk with 8 queued, 4.7 and 135 with 64; capped, 1.0 and 46 at
 * both). Its full concurrency returns once no chunk is in hand, or when the waiter goes back
 * for an online job (those are fetched together, for the batcher; the chunks fetched behind
 * them go back, once per such wake-up).
 * So the Redis calls per chunk stay the same however many chunks are queued. (It used to go
 * back delayed by 200 ms, to be fetched again: with many chunks queued every worker cycled
 * its whole concurrency of them through Redis five times a second.)
 */
export const MAX_CHUNKS_IN_HAND = 2;

/** How the waiter's wait ended: it runs in a freed slot, or goes back (for an online job: `online`). */
type WaiterOutcome = 'slot' | 'back' | 'online';

export function createIntake(options: IntakeOptions): IntakeWorker {
  const { manifest } = options;
  const queue = queueName(manifest.name, manifest.version);
  const entriesRedis = options.entries ?? options.connection;
  const entries: EntryDeps = { ...options, redis: entriesRedis, queue };
  const wakeups = createQueueWakeups(options.connection, options.prefix, queue);
  let chunksInHand = 0;
  /** The one chunk fetched past the bound, told when a slot frees (or to go back). */
  let waiter: ((outcome: WaiterOutcome) => void) | undefined;
  /** BullMQ's concurrency for what is in hand (see MAX_CHUNKS_IN_HAND): none more while the waiter waits. */
  const fitConcurrency = (online = false) => {
    const held = chunksInHand > 0 && !online ? MAX_CHUNKS_IN_HAND + 1 : options.concurrency;
    worker.concurrency = waiter ? 1 : Math.min(held, options.concurrency);
  };
  const wait = async (): Promise<WaiterOutcome> => {
    const stop = new AbortController();
    const local = new Promise<WaiterOutcome>((resolve) => {
      waiter = resolve;
    });
    const remote = wakeups.next(stop.signal).then((w): WaiterOutcome | undefined => {
      if (w === 'aborted') return undefined;
      return w === 'entry' ? 'online' : 'back';
    });
    fitConcurrency();
    let outcome: WaiterOutcome = 'back';
    try {
      outcome = (await Promise.race([local, remote.then((o) => o ?? local)])) as WaiterOutcome;
      return outcome;
    } finally {
      waiter = undefined;
      stop.abort();
      fitConcurrency(outcome === 'online');
    }
  };
  const process = async (job: Job<QueueJobData, QueueJobResult>, token?: string): Promise<QueueJobResult> => {
    const startedAt = job.processedOn ?? options.clock.now();
    const typed = asQueueJob(job);
    if (!typed) return outdated(job.data, startedAt, options);
    if (typed.name === 'entry') return processEntry(entries, job.id ?? '', typed.data, startedAt);
    // A second one past the bound (a fetch already under way as the first began to wait) goes back at once.
    if (chunksInHand >= MAX_CHUNKS_IN_HAND && (waiter || worker.closing || (await wait()) !== 'slot')) {
      await job.moveToWait(token);
      throw new WaitingError();
    }
    chunksInHand++;
    fitConcurrency();
    try {
      return await processChunk(job.id ?? '', typed.data, startedAt, options);
    } finally {
      chunksInHand--;
      fitConcurrency();
      waiter?.('slot');
    }
  };
  const worker = new Worker<QueueJobData, QueueJobResult>(queue, gated(options.gate, options.clock, process), {
    connection: options.connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    maxStalledCount: MAX_WORKER_CRASHES - 1,
    autorun: false,
    name: options.workerId,
  });
  const { openJobs, storedBytes } = options;
  const onCleanupError = options.onCleanupError ?? (() => undefined);
  // Every end, the stalled-job failure too (BullMQ fails it before the processor runs). A failed
  // attempt that will be retried has no finishedOn yet: the job is still open, its inputs needed.
  const ended = (job: Job<QueueJobData, QueueJobResult> | undefined) => {
    if (!job?.id || job.finishedOn === undefined) return;
    const typed = asQueueJob(job);
    if (typed?.name === 'entry') {
      entryEnded({ redis: entriesRedis, prefix: options.prefix, queue, openJobs, storedBytes }, job.id, typed.data, onCleanupError);
    } else if (!typed && isLegacyJobData(job.data)) openJobs?.release(job.data.tenant, job.id);
  };
  worker.on('completed', ended);
  worker.on('failed', ended);
  // A waiter goes back when the worker stops taking work (standby, drain, close).
  const sendBack = () => waiter?.('back');
  worker.on('paused', sendBack);
  worker.on('closing', () => {
    sendBack();
    void wakeups.close();
  });
  worker.on('closed', () => void wakeups.close());
  return worker;
}

/**
 * A job of neither kind (infra/contracts/queue-job.ts): an older API's online job, or anything
 * else a producer put in the queue. Failed for good, never run; its user starts it again.
 */
function outdated(data: unknown, startedAt: number, options: IntakeOptions): never {
  const submittedAt = isLegacyJobData(data) ? data.submittedAt : startedAt;
  options.onJobDone?.({ outcome: 'failed', queueMs: Math.max(0, startedAt - submittedAt), rows: 0 });
  throw new UnrecoverableError(OUTDATED_JOB_FAILURE);
}

/** A bulk chunk, its errors as BullMQ decisions (see the header). */
async function processChunk(jobId: string, data: ChunkData, startedAt: number, options: IntakeOptions): Promise<ChunkResult> {
  const queueMs = Math.max(0, startedAt - data.submittedAt);
  try {
    return await runChunk(data.bulk, options, queueMs);
  } catch (err) {
    const unrecoverable = err instanceof InvalidInputError || err instanceof SliceFailedError;
    options.onJobDone?.({ outcome: unrecoverable ? 'failed' : 'retry', queueMs, rows: 0 });
    // An input rewritten since the run listed it keeps its own code: the run fails `input_changed`.
    if (err instanceof InvalidInputError)
      throw new UnrecoverableError(`${err.code === 'input_changed' ? err.code : 'invalid_input'}: ${err.message}`);
    if (err instanceof SliceFailedError) {
      const { code, message } = rejectionOf(err.message);
      options.onRejected?.({ jobId, code, ortMessage: err.message });
      throw new UnrecoverableError(`${code}: ${message}`);
    }
    throw err;
  }
}

/**
 * A bulk chunk: the worker reads its rows from S3 and writes its part (bulk-chunk.ts); the job
 * returns the part, never outputs. A chunk job from before workers read their own rows (its rows
 * in the job, no `source`) is refused: its run must be started again.
 */
async function runChunk(bulk: ChunkData['bulk'], options: IntakeOptions, queueMs: number): Promise<ChunkResult> {
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
  return { part: scored.part, timings: { queueMs, inferMs: round(inferMs), batchRows }, workerId: options.workerId };
}

function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}
