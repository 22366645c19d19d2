/**
 * The one place warmpool uses BullMQ beyond what BullMQ exports as API: a job added as the last
 * command of a pipeline whose first commands are ours, one round trip on the queue's own
 * connection. The entry writer needs it (index keys, inputs, then the entry: entry-writer.ts);
 * `Queue.add` cannot share a pipeline, and BullMQ's own addBulk does exactly this inside its Redis
 * backend (`addJobs`), which it does not export.
 *
 * What this relies on, each pinned by test/bullmq-pipeline.test.ts against a real Redis, so that a
 * BullMQ upgrade that changes one fails that test, not production:
 *   1. `queue.backend.client` resolves to BullMQ's wrapper of the ioredis client the Queue was
 *      given: its `pipeline()` runs on that same connection and can carry BullMQ's scripts;
 *   2. `new Job(queue, name, data, opts, id).addJob(pipeline)` queues the insert on the pipeline
 *      synchronously, as one command, before the pipeline is executed (its own promise settles
 *      with exec, and is not needed: the reply is read from exec's);
 *   3. that command's reply is the job's id, or a negative number for BullMQ's script errors;
 *   4. the job it writes is the one `Queue.add` writes for the same name, data and options
 *      (state, priority, attempts, retention, data), and emits the same `waiting` event.
 */
import { Job, type JobsOptions, type Queue } from 'bullmq';
import type { ChainableCommander } from 'ioredis';

export interface PipelinedJob<D> {
  name: string;
  data: D;
  /** BullMQ's job options (priority, attempts, backoff, retention): as `Queue.add` takes them. */
  opts: Omit<JobsOptions, 'jobId'>;
  jobId: string;
}

/**
 * Runs `before`'s commands, then adds `job` to `queue`, in that order in one pipeline on the
 * queue's connection. Resolves once every command succeeded; rejects with the first failure (a
 * command that failed before the add does not stop the add: the caller's writes must be harmless
 * alone, e.g. keys that expire).
 */
export async function addAfter<D>(queue: Queue, before: (pipeline: ChainableCommander) => void, job: PipelinedJob<D>): Promise<void> {
  const client = (await queue.backend.client) as unknown as { pipeline(): ChainableCommander };
  const pipeline = client.pipeline();
  before(pipeline);
  // The id in the options too, as Queue.add puts it (and BullMQ validates it there).
  new Job<D>(queue, job.name, job.data, { ...job.opts, jobId: job.jobId }, job.jobId).addJob(pipeline as never).catch(() => undefined);
  const replies = (await pipeline.exec()) ?? [];
  const failed = replies.find(([err]) => err);
  if (failed) throw failed[0];
  const added = replies.at(-1)?.[1];
  if (typeof added === 'number' && added < 0) throw new Error(`BullMQ refused the job (code ${added})`);
  if (added !== job.jobId) throw new Error(`BullMQ answered ${String(added)} for job ${job.jobId}`);
}
