/**
 * The chaos suite's count of finished requests: every member of a finished queue entry (completed
 * or failed for good), a job from before entries as itself, never a bulk chunk; a member of an
 * entry still queued is not finished. The rule as a function, and the ledger against a real
 * Redis and BullMQ Worker.
 */
import { Queue, UnrecoverableError, Worker } from 'bullmq';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { EntryData } from '../../infra/contracts/entry.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { openRequestLedger, type RequestLedger, requestsOf } from './request-ledger.ts';

const entryData = (ids: string[]): EntryData => ({
  entry: 1,
  tenant: 't',
  model: 'm',
  version: '1',
  submittedAt: 0,
  members: ids.map((id) => ({ id, rows: 1, submittedAt: 0 })),
  inputs: [],
});

describe('requestsOf', () => {
  it("names an entry's members, a job from before entries itself, and no request for a bulk chunk or a removed job", () => {
    expect(requestsOf('ent_1', JSON.stringify(entryData(['a', 'b', 'c'])))).toEqual(['a', 'b', 'c']);
    expect(requestsOf('job_1', JSON.stringify({ tenant: 't', inputs: [] }))).toEqual(['job_1']);
    expect(requestsOf('chunk_1', JSON.stringify({ tenant: 't', inputs: [], bulk: { runId: 'r' } }))).toEqual([]);
    expect(requestsOf('ent_2', null)).toEqual([]);
  });
});

describe('openRequestLedger', () => {
  const model = 'ledger';
  let redis: RedisClient;
  let queue: Queue;
  let ledger: RequestLedger;
  let worker: Worker | undefined;
  let workerRedis: RedisClient | undefined;
  let prefix: string;

  beforeEach(() => {
    prefix = uniqueId('ledger');
    redis = createRedis(testServices().redisUrl);
    queue = new Queue(queueName(model, '1'), { connection: redis, prefix });
    ledger = openRequestLedger(testServices().redisUrl, prefix, model);
  });

  afterEach(async () => {
    await worker?.close();
    if (workerRedis) await closeRedis(workerRedis);
    [worker, workerRedis] = [undefined, undefined];
    await ledger.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(redis);
  });

  /** Completes every job, except one whose data says `fail`: failed for good. */
  function startWorker(): Worker {
    workerRedis = createRedis(testServices().redisUrl);
    worker = new Worker(
      queueName(model, '1'),
      async (job) => {
        if (job.data.fail) throw new UnrecoverableError('no');
        return {};
      },
      { connection: workerRedis, prefix, concurrency: 4 },
    );
    return worker;
  }

  /** Polls the ledger until the queue has `jobs` finished; the count is the test's own, no time bound. */
  async function pollUntil(jobs: number): Promise<void> {
    for (;;) {
      await ledger.poll();
      const finished = (await queue.getJobCounts('completed', 'failed')) as { completed: number; failed: number };
      if (finished.completed + finished.failed >= jobs) {
        await ledger.poll();
        return;
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  it('counts the requests of finished entries, the failed ones too, and a member of a queued entry as not finished', async () => {
    await queue.addBulk([
      { name: 'entry', data: entryData(['r1', 'r2', 'r3']) },
      { name: 'entry', data: { ...entryData(['r4', 'r5']), fail: true }, opts: { attempts: 1 } },
      { name: 'infer', data: { tenant: 't', inputs: [] }, opts: { jobId: 'job_legacy' } },
      { name: 'infer', data: { tenant: 't', inputs: [], bulk: { runId: 'run' } } },
    ]);
    const w = startWorker();
    await pollUntil(4);
    await w.close();
    expect([...ledger.finished].sort()).toEqual(['job_legacy', 'r1', 'r2', 'r3', 'r4', 'r5']);
    expect(ledger.jobs).toBe(3);
    expect(await ledger.open()).toBe(0);

    await queue.add('entry', entryData(['r6', 'r7']));
    await ledger.poll();
    expect(ledger.finished.has('r6')).toBe(false);
    expect(await ledger.open()).toBe(1);
  });

  it('finds an entry whose finishing time is older than the newest it has seen', async () => {
    const completed = queue.keys.completed as string;
    const now = Date.now();
    await redis.zadd(completed, now, 'ent_late');
    await redis.hset(queue.toKey('ent_late'), 'data', JSON.stringify(entryData(['a'])));
    await ledger.poll();
    // Written after the ledger saw `ent_late`, though it finished a minute before: outside the re-read window.
    await redis.zadd(completed, now - 60_000, 'ent_early');
    await redis.hset(queue.toKey('ent_early'), 'data', JSON.stringify(entryData(['b', 'c'])));
    await ledger.poll();
    expect([...ledger.finished].sort()).toEqual(['a', 'b', 'c']);
    expect(ledger.jobs).toBe(2);
  });
});
