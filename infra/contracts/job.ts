/**
 * The job contract between the API tier and the workers (DESIGN §4): one BullMQ queue per
 * deployed model version, named here and nowhere else; a job as the API shows it (JobView),
 * its OIP outputs and timings. What the queue itself carries (entries and bulk chunks) is
 * queue-job.ts.
 */
import type { OipTensor } from './oip.ts';

/**
 * BullMQ forbids ':' in queue names; model and version patterns (manifest.ts) exclude it too.
 *
 * The name is a Redis Cluster hash tag, `{infer.<model>.<version>}`: BullMQ's keys for the
 * queue are `<prefix>:{infer.m.v}:<type>`, so all of them (and every key of ours that embeds
 * the queue's name: tombstones, canary aggregates) hash to one slot, which BullMQ's Lua
 * scripts require, while different versions' queues hash to different slots and so spread
 * over a cluster's shards. On a single node the braces are just part of the name. QUEUE_PREFIX
 * must not contain braces (config.ts forbids them), or its tag would win.
 */
export function queueName(model: string, version: string): string {
  return `{infer.${model}.${version}}`;
}

/** The model and version of a queue `queueName` made (also the names before hash tags: `infer.m.v`); null otherwise. */
export function parseQueueName(name: string): { model: string; version: string } | null {
  const match = /^\{?infer\.([^.{}]+)\.([^{}]+?)\}?$/.exec(name);
  if (!match || name.startsWith('{') !== name.endsWith('}')) return null;
  return { model: match[1] as string, version: match[2] as string };
}

/**
 * Entries kept in each queue's BullMQ events stream, which the webhook dispatcher reads: about
 * five entries a job, so ≈20k jobs of dispatcher outage before events are trimmed unread.
 * BullMQ keeps the value in the queue's meta, so every producer Queue must pass it.
 */
export const EVENTS_STREAM_MAX_LEN = 100_000;

export const PRIORITIES = { high: 1, normal: 5, low: 10 } as const;
export type Priority = keyof typeof PRIORITIES;
/**
 * Bulk run chunks (infra/bulk) queue behind every online priority so online jobs go first and
 * bulk fills the troughs; a run that would miss its deadline is raised to `urgent`, level with
 * `normal` online traffic (never ahead of it).
 */
export const BULK_PRIORITIES = { bulk: 100, urgent: PRIORITIES.normal } as const;

export interface JobTimings {
  /** Submit → the worker took the job. */
  queueMs: number;
  /** Time in forward passes for this job's rows. */
  inferMs: number;
  /** Rows in the forward pass that carried this job (the largest, when it spanned several). */
  batchRows: number;
}

export interface JobResult {
  outputs: OipTensor[];
  timings: JobTimings;
  /** The worker that ran it, for tracing. */
  workerId: string;
}

export type JobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'canceled';

/** A job as the API and tools see it, whatever the queue's own states are. */
export interface JobView {
  id: string;
  tenant: string;
  model: string;
  version: string;
  status: JobStatus;
  result?: JobResult;
  error?: { code: string; message: string };
  /** Epoch milliseconds. */
  createdAt: number;
  startedAt?: number;
  finishedAt?: number;
  attemptsMade: number;
  /** Answered from the result cache at submit: no worker ran it (timings are all 0). */
  cached?: true;
}

/**
 * Stable `error.code`s a failed job can carry. `worker_crashed`: the job was held by workers that
 * died or froze (their locks expired) twice, and is not handed to a third (worker/intake.ts).
 */
export const JOB_ERROR_CODES = ['invalid_input', 'inference_failed', 'deadline_exceeded', 'canceled', 'worker_crashed'] as const;
