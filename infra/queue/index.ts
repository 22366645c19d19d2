/**
 * infra/queue: the one home of BullMQ in api/, worker/ and infra/ (the worker's own intake, a
 * BullMQ Worker, aside). Everything that opens a Queue or QueueEvents, or reads BullMQ's keys,
 * lives here; the rest of the code enters through this file.
 *
 * - job-queue.ts: the API's JobQueue (submit, get, cancel, wait), over job-index.ts (the id →
 *   queue index), tombstones.ts (jobs the API ended), job-snapshot.ts, job-follow.ts, job-view.ts;
 * - queue-stats.ts: the scaler's backlog of a deployment's queues, and job counts;
 * - chunk-queue.ts: the bulk driver's chunk jobs;
 * - event-streams.ts: the queues' events streams read directly (the webhook event source);
 * - queue-cache.ts: the process's one Queue/QueueEvents per queue, shared by all of the above;
 * - bullmq-keys.ts: BullMQ's own key names.
 */

export { type ChunkQueue, type ChunkQueueOptions, type ChunkState, chunkJobId, createChunkQueue } from './chunk-queue.ts';
export { modelQueuesWithEvents, type QueueStreamEntries, readEventStreams, type StreamEntry } from './event-streams.ts';
export { type FinishedJob, type FinishedJobsReader, readFinishedJobs } from './finished-jobs.ts';
export { type BullJobQueue, type BullJobQueueOptions, createBullJobQueue, type JobView } from './job-queue.ts';
export { parseFailure } from './job-view.ts';
export { type HeldJob, readHeldJobs } from './member-view.ts';
export { type JobQueueHandle, leaseQueues, type QueueErrorHandler, type QueueEventName, type QueueLease } from './queue-cache.ts';
export {
  addBacklogs,
  type BacklogTarget,
  countJobs,
  createQueueStats,
  emptyBacklog,
  type JobCountState,
  type QueueStats,
  type QueueStatsDeps,
  queuedJobs,
} from './queue-stats.ts';
