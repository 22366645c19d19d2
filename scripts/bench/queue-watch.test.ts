/**
 * Counting a measured queue in requests: an entry's members, or a job itself. The counting
 * rules are checked as functions, and the watch against a real Redis and BullMQ Worker.
 */
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EntryData, EntryResult } from '../../infra/contracts/entry.ts';
import { openQueueProbes, type QueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { countCompleted, countFailed, inWorkerLatencies, RequestWatch } from './queue-watch.ts';

const timings = { queueMs: 1, inferMs: 1, batchRows: 2 };
const entryResult = (members: EntryResult['members']): EntryResult => ({ entry: 1, workerId: 'w', outputs: [], members });
const entryData = (ids: string[]): EntryData => ({
  entry: 1,
  tenant: 't',
  model: 'm',
  version: '1',
  submittedAt: 0,
  members: ids.map((id) => ({ id, rows: 1, submittedAt: 0 })),
  inputs: [],
});

describe('countCompleted', () => {
  it('counts an entry result by member: succeeded ones by id, failed and skipped ones as failures', () => {
    const value = entryResult({
      a: { status: 'succeeded', row: 0, timings },
      b: { status: 'failed', error: { code: 'x', message: 'y' } },
      c: { status: 'skipped' },
      d: { status: 'succeeded', row: 1, timings },
    });
    expect(countCompleted('ent_1', JSON.stringify(value))).toEqual({ succeeded: ['a', 'd'], failed: 2 });
  });

  it('counts any other job as one request, whatever its return value', () => {
    expect(countCompleted('job_1', JSON.stringify({ outputs: [] }))).toEqual({ succeeded: ['job_1'], failed: 0 });
    expect(countCompleted('7', null)).toEqual({ succeeded: ['7'], failed: 0 });
    expect(countCompleted('8', 'not json')).toEqual({ succeeded: ['8'], failed: 0 });
  });
});

describe('countFailed', () => {
  it('fails every member of an entry, or the job itself', () => {
    expect(countFailed(JSON.stringify(entryData(['a', 'b', 'c'])))).toBe(3);
    expect(countFailed(JSON.stringify({ tenant: 't', inputs: [] }))).toBe(1);
    expect(countFailed(null)).toBe(1);
  });
});

describe('RequestWatch', () => {
  let redis: RedisClient;
  let queue: Queue;
  let probes: QueueProbes;
  let worker: Worker | undefined;
  let workerRedis: RedisClient | undefined;
  let prefix: string;

  beforeEach(() => {
    prefix = uniqueId('watch');
    redis = createRedis(testServices().redisUrl);
    queue = new Queue('{watch}', { connection: redis, prefix });
    probes = openQueueProbes(redis, prefix);
  });

  afterEach(async () => {
    await worker?.close();
    if (workerRedis) await closeRedis(workerRedis);
    [worker, workerRedis] = [undefined, undefined];
    await probes.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(redis);
  });

  /** Entries succeed per member (a member named `bad…` fails alone); a job with `fail` fails for good. */
  function startWorker() {
    workerRedis = createRedis(testServices().redisUrl);
    worker = new Worker(
      '{watch}',
      async (job) => {
        if (job.data.fail) throw new UnrecoverableError('no');
        if (!job.data.entry) return { plain: true };
        const members = Object.fromEntries(
          (job.data as EntryData).members.map((m, row) =>
            m.id.startsWith('bad')
              ? [m.id, { status: 'failed', error: { code: 'bad', message: 'bad' } }]
              : [m.id, { status: 'succeeded', row, timings }],
          ),
        );
        return entryResult(members as EntryResult['members']);
      },
      { connection: workerRedis, prefix, concurrency: 4 },
    );
    return worker;
  }

  it('counts requests across entries and single jobs, with each succeeded one by id', async () => {
    const watch = new RequestWatch(probes.queue('{watch}'));
    await queue.addBulk([
      { name: 'entry', data: entryData(['r1', 'r2', 'r3']) },
      { name: 'entry', data: entryData(['r4', 'bad5']) },
      { name: 'infer', data: { single: true } },
      { name: 'entry', data: entryData(['r6', 'r7']), opts: { attempts: 1 } },
    ]);
    await queue.add('entry', { ...entryData(['r8', 'r9']), fail: true }, { attempts: 1 });
    const w = startWorker();
    const done = await watch.waitFinished(10);
    expect(done).toMatchObject({ completed: 7, failed: 3, jobs: 5 });
    const ids = [...watch.requests().keys()].sort();
    expect(ids.filter((id) => id.startsWith('r'))).toEqual(['r1', 'r2', 'r3', 'r4', 'r6', 'r7']);
    expect(ids).toHaveLength(7);
    expect(inWorkerLatencies(watch.requests()).count).toBe(7);
    // The last request done, failed ones included.
    expect(done.lastFinishedAt).toBeGreaterThanOrEqual(Math.max(...[...watch.requests().values()].map((r) => r.finishedOn)));
    await w.close();

    await watch.reset();
    expect(await watch.poll()).toMatchObject({ completed: 0, failed: 0, jobs: 0 });
    expect(await queue.getCompletedCount()).toBe(0);
  });

  it('finds a job whose finishing time is older than the newest it has seen', async () => {
    const watch = new RequestWatch(probes.queue('{watch}'));
    const completed = queue.keys.completed as string;
    const now = Date.now();
    await redis.zadd(completed, now, 'late-1');
    await redis.hset(queue.toKey('late-1'), 'finishedOn', now, 'processedOn', now - 5);
    expect((await watch.poll()).completed).toBe(1);
    // Written after the watch saw `late-1`, though it finished a minute before: outside the re-read window.
    await redis.zadd(completed, now - 60_000, 'early-2');
    await redis.hset(queue.toKey('early-2'), 'finishedOn', now - 60_000, 'processedOn', now - 60_010);
    expect(await watch.poll()).toMatchObject({ completed: 2, jobs: 2, lastFinishedAt: now });
    expect(watch.requests().get('early-2')).toEqual({ finishedOn: now - 60_000, processedOn: now - 60_010 });
  });

  it('gives up when nothing finishes, saying where the jobs are', async () => {
    const watch = new RequestWatch(probes.queue('{watch}'));
    await queue.add('infer', {});
    await expect(watch.waitFinished(1, 200)).rejects.toThrow(/no request finished for 0.2 s, 0 of 1 done; jobs: .*"waiting":1/);
  });
});
