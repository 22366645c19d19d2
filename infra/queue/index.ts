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
export { createBullJobQueue, type BullJobQueue, type BullJobQueueOptions, type JobView } from './job-queue.ts';
export { parseFailure, readHeldJob, type HeldJob } from './job-view.ts';
export {
  addBacklogs,
  countJobs,
  createQueueStats,
  emptyBacklog,
  queuedJobs,
  type BacklogTarget,
  type JobCountState,
  type QueueStats,
  type QueueStatsDeps,
} from './queue-stats.ts';
export { chunkJobId, createChunkQueue, type ChunkQueue, type ChunkQueueOptions, type ChunkState } from './chunk-queue.ts';
export { modelQueuesWithEvents, readEventStreams, type QueueStreamEntries, type StreamEntry } from './event-streams.ts';
export { leaseQueues, type JobQueueHandle, type QueueErrorHandler, type QueueEventName, type QueueLease } from './queue-cache.ts';
