/**
 * The requests a BullMQ job carries, for readers that start from a BullMQ job id (the webhook
 * event source, which reads them off the queues' events streams: event-streams.ts): an entry's
 * members, or an online job from before entries, itself (migration: infra/contracts/queue-job.ts;
 * its failure still reaches its webhook). A bulk chunk carries none.
 *
 * A reader holds a lease on the process's shared queue readers (queue-cache.ts), which never
 * rewrite a queue's settings; `close()` releases it, once.
 */
import type { JobStatus, JobView } from '../contracts/job.ts';
import type { WebhookSpec } from '../contracts/webhook.ts';
import type { RedisClient } from '../redis/client.ts';
import { legacyJobView, statusOf } from './job-view.ts';
import { type MemberViewDeps, memberView } from './member-view.ts';
import { leaseQueues, type QueueErrorHandler } from './queue-cache.ts';
import { readTypedJob, type TypedJob } from './queue-jobs.ts';

/** A request BullMQ holds, read once: an entry's member, or a job from before entries. */
export interface HeldJob {
  id: string;
  tenant: string;
  webhook?: WebhookSpec;
  /**
   * Epoch ms by which the request had to start (its submit + `timeoutMs`), when it has a
   * deadline: a worker that takes it later refuses it (deadline_exceeded) and never runs it.
   */
  deadlineAt?: number;
  /** The request's view when its BullMQ job is at `status` (e.g. the status an event says it reached). */
  view(status: JobStatus): Promise<JobView>;
  /** The request's own status now, by a second read; undefined once BullMQ no longer holds it. */
  status(): Promise<JobStatus | undefined>;
}

export interface HeldJobReader {
  /** The requests BullMQ job `jobId` of queue `queue` carries; empty when BullMQ does not hold it (any more). */
  read(queue: string, jobId: string): Promise<HeldJob[]>;
  /** Idempotent. */
  close(): Promise<void>;
}

export interface HeldJobReaderOptions {
  /** Job reads (through the shared queue readers of this client). */
  redis: RedisClient;
  prefix: string;
  /** Entries' outputs and skipped members' tombstones; `redis` when absent. */
  outputs?: MemberViewDeps['redis'];
  onError?: QueueErrorHandler;
}

export function createHeldJobReader(options: HeldJobReaderOptions): HeldJobReader {
  const queues = leaseQueues(options.redis, options.prefix, options.onError);
  const deps: MemberViewDeps = { redis: options.outputs ?? options.redis, prefix: options.prefix };
  const read = (name: string, jobId: string) => readTypedJob(queues.reader(name), jobId);
  return {
    async read(name, jobId) {
      const held = await read(name, jobId);
      return held?.job.id ? heldRequests(deps, name, held, () => read(name, jobId)) : [];
    },
    close: () => queues.release(),
  };
}

function heldRequests(deps: MemberViewDeps, name: string, held: TypedJob, reread: () => Promise<TypedJob | undefined>): HeldJob[] {
  if (held.kind === 'bulk') return [];
  if (held.kind === 'legacy') {
    const { job } = held;
    const request: HeldJob = {
      id: job.id as string,
      tenant: job.data.tenant,
      view: async (status) => legacyJobView(job, status),
      status: async () => statusOf(await job.getState()),
    };
    if (job.data.webhook) request.webhook = job.data.webhook;
    if (job.data.timeoutMs !== undefined) request.deadlineAt = job.data.submittedAt + job.data.timeoutMs;
    return [request];
  }
  const entry = held.job;
  return entry.data.members.map((m) => {
    const request: HeldJob = {
      id: m.id,
      tenant: entry.data.tenant,
      view: async (status) => (await memberView(deps, name, entry, m.id, status)) as JobView,
      status: async () => {
        const state = statusOf(await entry.getState());
        if (state === undefined) return undefined;
        const fresh = await reread();
        if (fresh?.kind !== 'entry') return undefined;
        return (await memberView(deps, name, fresh.job, m.id, state))?.status;
      },
    };
    if (m.webhook) request.webhook = m.webhook;
    if (m.timeoutMs !== undefined) request.deadlineAt = m.submittedAt + m.timeoutMs;
    return request;
  });
}
