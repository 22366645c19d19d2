/**
 * infra/queue: the one home of BullMQ in api/, worker/ and infra/ (the worker's own intake, a
 * BullMQ Worker, aside). Everything that opens a Queue or QueueEvents, or reads BullMQ's keys,
 * lives here, and no Queue leaves: the rest of the code enters through this file, and gets a
 * narrow capability for what it does.
 *
 * - job-queue.ts: the API's JobQueue (submit, get, cancel, wait), over entry-writer.ts (requests
 *   into queue entries), job-index.ts (the id → queue index), tombstones.ts (jobs the API ended),
 *   job-snapshot.ts, job-follow.ts, job-view.ts, member-view.ts;
 * - queue-jobs.ts: BullMQ's jobs by kind (infra/contracts/queue-job.ts: entries and bulk chunks);
 * - bullmq-pipeline.ts: the one use of BullMQ beyond its exported API (a job added on a pipeline);
 * - queue-stats.ts: the scaler's backlog of a deployment's queues;
 * - chunk-queue.ts: the bulk driver's chunk jobs, placed for fair share by fair-share.ts;
 * - queue-wakeups.ts: what a worker holding its most bulk chunks waits on (an online job, an idle worker);
 * - event-streams.ts + held-jobs.ts: the queues' events streams read directly, and the requests
 *   the job an event names carries (the webhook event source);
 * - queue-probe.ts: counts, finished jobs and cleanup for the harnesses (bench, chaos, calibrate, tests);
 * - queue-cache.ts: the process's one Queue/QueueEvents per queue, shared by all of the above;
 * - bullmq-keys.ts: BullMQ's own key names.
 */

export { type ChunkQueue, type ChunkQueueOptions, type ChunkState, chunkJobId, createChunkQueue } from './chunk-queue.ts';
export { modelQueuesWithEvents, type QueueStreamEntries, readEventStreams, type StreamEntry } from './event-streams.ts';
export { BULK_BASE, createFairShare, type FairShare } from './fair-share.ts';
export type { FinishedJob, FinishedJobsOptions, FinishedJobsReader } from './finished-jobs.ts';
export { createHeldJobReader, type HeldJob, type HeldJobReader, type HeldJobReaderOptions } from './held-jobs.ts';
export { type BullJobQueue, type BullJobQueueOptions, createBullJobQueue, type JobView } from './job-queue.ts';
export { parseFailure } from './job-view.ts';
export type { QueueErrorHandler } from './queue-cache.ts';
export { type JobRecord, openQueueProbes, type QueueProbe, type QueueProbes } from './queue-probe.ts';
export {
  addBacklogs,
  type BacklogTarget,
  createQueueStats,
  emptyBacklog,
  type JobCountState,
  type QueueStats,
  type QueueStatsDeps,
  queuedJobs,
} from './queue-stats.ts';
export { createQueueWakeups, type QueueWakeups, type Wakeup } from './queue-wakeups.ts';
