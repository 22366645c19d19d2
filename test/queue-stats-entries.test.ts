/**
 * The scaler's backlog in requests while BullMQ holds queue entries (infra/queue/queue-stats.ts):
 * 20 requests written in one tick become fewer entries, and the backlog, read by a QueueStats of
 * its own (as the scaler's process would), still counts 20, from the requests per entry the
 * writer publishes. Requests of several rows make the backlog's rows per job more than 1, from
 * the rows per request the writer publishes beside it, weighted by requests over versions.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { createBullJobQueue, createQueueStats, openQueueProbes, queuedJobs } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { entryMembersKey, entryRowsKey } from '../infra/redis/keys.ts';
import { testServices, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

const prefix = uniqueId('qs');
const redis = createRedis(testServices().redisUrl);

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

function request(model = 'm', version = '1', rows = 1): QueuedRequest {
  return {
    tenant: 't',
    model,
    version,
    submittedAt: Date.now(),
    rows,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 2], data: new Float32Array(rows * 2).fill(1) }],
  };
}

describe('backlog in requests over queue entries', () => {
  it('counts the requests inside queued entries, not the entries', async () => {
    const jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    const stats = createQueueStats({ redis, prefix, clock: systemClock });
    const probes = openQueueProbes(redis, prefix);
    try {
      await Promise.all(Array.from({ length: 20 }, (_, i) => jobs.enqueue(request(), { priority: 'normal', jobId: `job_qs${i}` })));
      const entries = queuedJobs({
        ...(await probes.queue(queueName('m', '1')).counts('waiting', 'prioritized', 'delayed', 'active')),
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
      await probes.close();
      await stats.close();
      await jobs.close();
    }
  });
  it('counts rows per queued request from the rows the writer saw: multi-row requests make it more than 1', async () => {
    const jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    const stats = createQueueStats({ redis, prefix, clock: systemClock });
    try {
      // Version 1: 10 requests of 1 and 3 rows (2 a request); version 2: 10 requests of 1 row.
      await Promise.all([
        ...Array.from({ length: 10 }, (_, i) =>
          jobs.enqueue(request('rows', '1', i % 2 === 0 ? 1 : 3), { priority: 'normal', jobId: `job_rows1_${i}` }),
        ),
        ...Array.from({ length: 10 }, (_, i) => jobs.enqueue(request('rows', '2', 1), { priority: 'normal', jobId: `job_rows2_${i}` })),
      ]);
      await until('both means published', async () => {
        const [one, two] = await Promise.all(['1', '2'].map((v) => redis.get(entryRowsKey(prefix, queueName('rows', v)))));
        return one === '2.00' && two === '1.00' ? true : undefined;
      });
      const one = await stats.backlog({ model: 'rows', versions: ['1'] });
      expect(queuedJobs(one)).toBe(10);
      expect(one.rowsPerJob).toBe(2);
      expect((await stats.backlog({ model: 'rows', versions: ['2'] })).rowsPerJob).toBe(1);
      // Over both versions: 30 rows in 20 requests.
      const both = await stats.backlog({ model: 'rows', versions: ['1', '2'] });
      expect(queuedJobs(both)).toBe(20);
      expect(both.rowsPerJob).toBe(1.5);
      // A queue no API wrote to says nothing: the contract's 1.
      expect(await stats.backlog({ model: 'rows', versions: ['3'] })).not.toHaveProperty('rowsPerJob');
    } finally {
      await stats.close();
      await jobs.close();
    }
  });
});
