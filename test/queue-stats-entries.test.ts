/**
 * The scaler's backlog in requests while BullMQ holds queue entries (infra/queue/queue-stats.ts):
 * 20 requests written in one tick become fewer entries, and the backlog, read by a QueueStats of
 * its own (as the scaler's process would), still counts 20, from the requests per entry the
 * writer publishes.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { countJobs, createBullJobQueue, createQueueStats, leaseQueues, queuedJobs } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { entryMembersKey } from '../infra/redis/keys.ts';
import { testServices, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

const prefix = uniqueId('qs');
const redis = createRedis(testServices().redisUrl);

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

function request(): QueuedRequest {
  return {
    tenant: 't',
    model: 'm',
    version: '1',
    submittedAt: Date.now(),
    rows: 1,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], data: new Float32Array([1, 2]) }],
  };
}

describe('backlog in requests over queue entries', () => {
  it('counts the requests inside queued entries, not the entries', async () => {
    const jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    const stats = createQueueStats({ redis, prefix, clock: systemClock });
    const queues = leaseQueues(redis, prefix);
    try {
      await Promise.all(Array.from({ length: 20 }, (_, i) => jobs.enqueue(request(), { priority: 'normal', jobId: `job_qs${i}` })));
      const entries = queuedJobs({
        ...(await countJobs(queues, queueName('m', '1'), 'waiting', 'prioritized', 'delayed', 'active')),
        oldestAgeMs: 0,
      });
      expect(entries).toBeLessThan(20);
      // The mean is written at once and again at the end of the interval it changed in.
      await until('the mean published', async () =>
        (await redis.get(entryMembersKey(prefix, queueName('m', '1')))) === (20 / entries).toFixed(2) ? true : undefined,
      );
      expect(queuedJobs(await stats.backlog({ model: 'm', versions: ['1'] }))).toBe(20);
      expect(await jobs.depth('m', '1')).toBe(20);
    } finally {
      await queues.release();
      await stats.close();
      await jobs.close();
    }
  });
});
