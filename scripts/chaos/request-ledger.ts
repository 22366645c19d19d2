/**
 * The requests a model's queue has finished, in requests, not BullMQ jobs. Online requests reach
 * BullMQ inside queue entries (infra/contracts/entry.ts): one job carrying one or more requests,
 * its members. A request is finished once the entry that carries it is in BullMQ's completed
 * set (each member has its outcome) or its failed set (failed for good: every member fails with
 * it); either way GET /v1/jobs/{id} shows it terminal. A job from before entries is its own
 * request; a bulk chunk job carries none (its rows belong to a bulk run) and is not counted.
 *
 * The ledger reads incrementally, through infra/queue's finished-jobs reader: each new job costs
 * one read of its data (the member list; the inputs live in a key of their own).
 */
import { isEntryData } from '../../infra/contracts/entry.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { type FinishedJobsReader, type JobCountState, openQueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';

/** States in which a job still has work ahead of it. */
const OPEN_STATES: JobCountState[] = ['waiting', 'prioritized', 'delayed', 'active'];

export interface RequestLedger {
  /** Reads what finished since the last poll. */
  poll(): Promise<void>;
  /** Ids of the requests finished so far (members of finished entries). */
  readonly finished: ReadonlySet<string>;
  /** Finished BullMQ jobs that carry requests (entries, and jobs from before entries). */
  readonly jobs: number;
  /** Jobs of the queue not finished yet, in any state. */
  open(): Promise<number>;
  close(): Promise<void>;
}

/** A ledger of `model` version `version`'s queue, on a connection of its own. */
export function openRequestLedger(redisUrl: string, prefix: string, model: string, version = '1'): RequestLedger {
  const redis = createRedis(redisUrl);
  const probes = openQueueProbes(redis, prefix);
  const queue = probes.queue(queueName(model, version));
  const finished = new Set<string>();
  const readers = new Map<'completed' | 'failed', FinishedJobsReader>();
  let jobs = 0;

  async function read(set: 'completed' | 'failed'): Promise<void> {
    let reader = readers.get(set);
    if (!reader) {
      reader = queue.finished({ set, fields: ['data'] });
      readers.set(set, reader);
    }
    for (const { id, values } of await reader.read()) {
      const members = requestsOf(id, values[0] ?? null);
      if (members.length > 0) jobs++;
      for (const m of members) finished.add(m);
    }
  }

  return {
    async poll() {
      await read('completed');
      await read('failed');
    },
    finished,
    get jobs() {
      return jobs;
    },
    async open() {
      const counts = await queue.counts(...OPEN_STATES);
      return OPEN_STATES.reduce((n, s) => n + counts[s], 0);
    },
    async close() {
      await probes.close();
      await closeRedis(redis);
    },
  };
}

/**
 * The request ids a finished job carries: an entry's members, or a job from before entries
 * itself; none for a bulk chunk, or a job whose hash is gone (removed by its retention).
 */
export function requestsOf(jobId: string, rawData: string | null): string[] {
  if (rawData === null) return [];
  let data: unknown;
  try {
    data = JSON.parse(rawData);
  } catch {
    return [jobId];
  }
  if (isEntryData(data)) return data.members.map((m) => m.id);
  return typeof data === 'object' && data !== null && 'bulk' in data ? [] : [jobId];
}
