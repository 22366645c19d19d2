/**
 * Tombstones: how the API ends a job BullMQ still holds as queued (canceled, or past its
 * deadline) without a worker ever taking it.
 *
 * One script removes the job from BullMQ's wait/paused/prioritized/delayed sets and writes the
 * tombstone (the job's final view as JSON), atomically with respect to a worker's fetch (also a
 * script): a job a worker already took is never touched. The script writes the tombstone next
 * to the queue's keys (`<prefix>:{queue}:tomb:<id>`, the queue's hash slot on a Redis Cluster,
 * where one script cannot also reach the index key); the index key is then pointed at the same
 * tombstone. Until it is (or if the API dies in between) a reader that finds the job gone from
 * the queue reads the tombstone there.
 */

import type { JobStatus, JobView } from '../contracts/job.ts';
import type { Clock } from '../kernel/clock.ts';
import type { RedisClient } from '../redis/client.ts';
import { jobTombstoneKey } from '../redis/keys.ts';
import type { OpenJobs } from '../redis/open-jobs.ts';
import { bullQueueKey } from './bullmq-keys.ts';
import type { JobIndex } from './job-index.ts';
import type { QueueLease } from './queue-cache.ts';

/**
 * KEYS: wait, paused, prioritized, delayed, tombstone (all in the queue's slot). ARGV: job id, tombstone, ttl s.
 * The same sets BullMQ's own fetch (moveToActive) pops from: once out of them, no worker can
 * take the job. BullMQ's removeJob then deletes the rest (it is no longer in any set).
 */
const BURY = `
local id = ARGV[1]
if redis.call('ZREM', KEYS[3], id) == 1 or redis.call('ZREM', KEYS[4], id) == 1
  or redis.call('LREM', KEYS[1], 1, id) == 1 or redis.call('LREM', KEYS[2], 1, id) == 1 then
  redis.call('SET', KEYS[5], ARGV[2], 'EX', ARGV[3])
  return 1
end
return 0
`;

export interface Tombstones {
  /** Ends a queued job with a tombstone; null when it is no longer queued (a worker took it, or it ended). */
  bury(queue: string, view: JobView, status: JobStatus, error: { code: string; message: string }): Promise<JobView | null>;
  /** The tombstone beside the queue, for a job gone from it whose index may not point at it yet. */
  read(queue: string, jobId: string): Promise<JobView | null>;
}

export interface TombstoneDeps {
  redis: RedisClient;
  prefix: string;
  retentionS: number;
  clock: Clock;
  index: JobIndex;
  queues: QueueLease;
  onError: (err: Error) => void;
  /** Released when a job is buried: it no longer counts among its tenant's open jobs. */
  openJobs?: Pick<OpenJobs, 'release'> | undefined;
}

export function createTombstones(deps: TombstoneDeps): Tombstones {
  const { redis, prefix } = deps;
  return {
    async bury(queue, view, status, error) {
      const tombstone: JobView = { ...view, status, error, finishedAt: deps.clock.now() };
      const keys = [
        ...(['wait', 'paused', 'prioritized', 'delayed'] as const).map((k) => bullQueueKey(prefix, queue, k)),
        jobTombstoneKey(prefix, queue, view.id),
      ];
      const done = await redis.eval(BURY, keys.length, ...keys, view.id, JSON.stringify(tombstone), deps.retentionS);
      if (done !== 1) return null;
      // A release Redis refuses is reported, not thrown: the job has ended, and its entry ages out.
      await deps.openJobs?.release(view.tenant, [view.id]).catch(deps.onError);
      await deps.index.pointAtTombstone(tombstone);
      // Deletes the job's hash and emits `removed`, which wakes watchers in every API process.
      await deps.queues.producer(queue).remove(view.id).catch(deps.onError);
      return tombstone;
    },

    async read(queue, jobId) {
      const tomb = await redis.get(jobTombstoneKey(prefix, queue, jobId));
      return tomb === null ? null : (JSON.parse(tomb) as JobView);
    },
  };
}
