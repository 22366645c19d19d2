/**
 * The driver's view of a model version's BullMQ queue, for chunk jobs only: add by the
 * deterministic id `bulk:<run ref>:<chunk>`, the ref being `<tenant>/<run id>` (adding an id
 * BullMQ still holds is a no-op, so a retried enqueue never duplicates), read where a chunk's job
 * stands, change its priority while it waits, remove it unless a worker holds it.
 *
 * Completed chunk jobs are removed by the driver once counted (their part is in S3 and in the
 * run's record), so a run never leaves more than its window of jobs in Redis; `removeOnComplete`
 * by age is the fallback for a driver that died between the two.
 *
 * Placed for fair share: a bulk chunk's priority comes from fair-share.ts, so runs and tenants
 * take turns at the queue's bulk capacity instead of waiting behind whoever queued first.
 *
 * The Queue and QueueEvents are the process's shared ones (queue-cache.ts): a run's driver, a
 * cancel's cleanup and the API's queue stats on one client open one of each per queue.
 */
import { Job } from 'bullmq';
import type { BulkPartResult } from '../contracts/bulk.ts';
import { queueName } from '../contracts/job.ts';
import { CHUNK_JOB_NAME, type ChunkData, type ChunkResult } from '../contracts/queue-job.ts';
import type { RedisClient } from '../redis/client.ts';
import { bullJobKey } from './bullmq-keys.ts';
import { createFairShare } from './fair-share.ts';
import { leaseQueues } from './queue-cache.ts';

export type ChunkState =
  | { kind: 'done'; part: BulkPartResult }
  | { kind: 'failed'; reason: string }
  /** Waiting, prioritized, delayed (a retry's back-off) or held by a worker. */
  | { kind: 'pending' }
  | { kind: 'missing' };

export interface ChunkQueue {
  add(data: ChunkData, priority: number): Promise<void>;
  /**
   * The priority run `runId`'s next chunk is to be added with for its fair share of the queue
   * (fair-share.ts); `weight`: its tenant's active runs.
   */
  fairPriority(runId: string, weight: number): Promise<number>;
  /** The run queues nothing more here: its fair-share tag goes. */
  forgetRun(runId: string): Promise<void>;
  state(runId: string, chunk: number): Promise<ChunkState>;
  changePriority(runId: string, chunk: number, priority: number): Promise<void>;
  /** Removes the job unless a worker holds it; true when it is gone. */
  remove(runId: string, chunk: number): Promise<boolean>;
  close(): Promise<void>;
}

export interface ChunkQueueOptions {
  attempts: number;
  backoffMs: number;
  retentionS: number;
  onError?: (err: Error) => void;
  /**
   * Called when a job of this queue completes or fails for good (any job: the driver re-reads
   * its own). Opens a QueueEvents, so the driver wakes at once instead of at its next poll.
   */
  onFinished?: () => void;
}

export function chunkJobId(runId: string, chunk: number): string {
  return `bulk:${runId}:${chunk}`;
}

export function createChunkQueue(
  redis: RedisClient,
  prefix: string,
  model: string,
  version: string,
  options: ChunkQueueOptions,
): ChunkQueue {
  const name = queueName(model, version);
  const queues = leaseQueues(redis, prefix, options.onError);
  const queue = queues.producer(name);
  const { onFinished } = options;
  // Only a wake-up: the driver polls as well, so a QueueEvents that cannot open is reported and done without.
  if (onFinished) {
    queues.listen(name, ['completed', 'failed'], () => onFinished()).catch((err: unknown) => options.onError?.(err as Error));
  }
  const jobField = (id: string, field: 'returnvalue' | 'failedReason') => redis.hget(bullJobKey(prefix, name, id), field);
  const fair = createFairShare(redis, prefix, name);
  let closing: Promise<void> | undefined;

  return {
    fairPriority: (runId, weight) => fair.place(runId, weight),
    forgetRun: (runId) => fair.forget(runId),

    async add(data, priority) {
      await queue.add(CHUNK_JOB_NAME, data, {
        jobId: chunkJobId(data.bulk.runId, data.bulk.chunk),
        priority,
        attempts: options.attempts,
        backoff: { type: 'exponential', delay: options.backoffMs },
        removeOnComplete: { age: options.retentionS },
        removeOnFail: { age: options.retentionS },
      });
    },

    async state(runId, chunk) {
      // The state and the one field needed, never the whole job hash: it carries the chunk's rows.
      const id = chunkJobId(runId, chunk);
      const state = await queue.getJobState(id);
      if (state === 'unknown') return { kind: 'missing' };
      if (state === 'completed') {
        const result = parseResult(await jobField(id, 'returnvalue'));
        return result?.part ? { kind: 'done', part: result.part } : { kind: 'failed', reason: 'the chunk job completed without a part' };
      }
      if (state === 'failed') return { kind: 'failed', reason: (await jobField(id, 'failedReason')) ?? 'failed' };
      return { kind: 'pending' };
    },

    async changePriority(runId, chunk, priority) {
      const job = await Job.fromId<ChunkData, ChunkResult>(queue, chunkJobId(runId, chunk));
      // A job a worker already holds keeps its place: the new priority only matters while waiting.
      await job?.changePriority({ priority }).catch(() => undefined);
    },

    async remove(runId, chunk) {
      const id = chunkJobId(runId, chunk);
      if ((await queue.remove(id)) === 1) return true;
      return (await queue.getJobState(id)) === 'unknown';
    },

    close() {
      closing ??= queues.release().catch(() => undefined);
      return closing;
    },
  };
}

function parseResult(json: string | null): Partial<ChunkResult> | undefined {
  if (!json) return undefined;
  try {
    return JSON.parse(json) as Partial<ChunkResult>;
  } catch {
    return undefined;
  }
}
