// What infra/queue/bullmq-pipeline.ts relies on in BullMQ beyond its exported API, pinned against
// the suite's real redis-server: a BullMQ upgrade that changes any of it fails here, not in the
// entry writer (infra/queue/entry-writer.ts, the API's only way to queue a request).
import { Job, Queue } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isClusterUrl } from '../infra/kernel/redis-url.ts';
import { addAfter } from '../infra/queue/bullmq-pipeline.ts';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { testServices, uniqueId } from './support/services.ts';

/** The options the entry writer passes (entry-writer.ts writeEntry). */
const OPTS = {
  priority: 5,
  attempts: 3,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: { age: 600 },
  removeOnFail: { age: 600 },
};
const DATA = { entry: 1, tenant: 't', members: [{ id: 'job_a', rows: 2 }] };

// The adapter is the single-node path: on a cluster the writer uses Queue.add (the index keys lie in other slots).
describe.skipIf(isClusterUrl(testServices().redisUrl))('BullMQ as bullmq-pipeline.ts relies on it', () => {
  let redis: RedisClient;
  let queue: Queue;
  const prefix = uniqueId('pipe');

  beforeAll(async () => {
    redis = createRedis(testServices().redisUrl);
    queue = new Queue('{infer.pipe.1}', { connection: redis, prefix });
    await queue.waitUntilReady();
  });

  afterAll(async () => {
    await queue.close();
    for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  /** BullMQ's client as the adapter takes it. */
  const bullClient = async () => (await queue.backend.client) as unknown as { pipeline(): ChainableCommander; runCommand?: unknown };

  it('1. queue.backend.client wraps the client the Queue was given: its pipeline runs on that connection', async () => {
    const client = await bullClient();
    expect(typeof client.runCommand).toBe('function');
    const replies = ((await client.pipeline().client('ID').exec()) ?? []) as Array<[Error | null, unknown]>;
    expect(replies).toHaveLength(1);
    const [err, id] = replies[0] as [Error | null, unknown];
    expect(err).toBeNull();
    expect(id).toBe(await (redis as unknown as { client(sub: 'ID'): Promise<number> }).client('ID'));
  });

  it('2–3. Job#addJob(pipeline) queues one command synchronously; its exec reply is the job id', async () => {
    const pipeline = (await bullClient()).pipeline();
    pipeline.set(`${prefix}:before`, 'x');
    const added = new Job(queue, 'entry', DATA, { ...OPTS, jobId: 'ent_sync' }, 'ent_sync').addJob(pipeline as never);
    expect(pipeline.length).toBe(2);
    const replies = (await pipeline.exec()) ?? [];
    expect(replies).toEqual([
      [null, 'OK'],
      [null, 'ent_sync'],
    ]);
    // Its own promise settles without an error, but its value is not the id: the id is read from exec's reply.
    await expect(added).resolves.not.toBe('ent_sync');
  });

  it('4. the job it writes is the one Queue.add writes for the same name, data and options, with the same events', async () => {
    await addAfter(queue, () => undefined, { name: 'entry', data: DATA, opts: OPTS, jobId: 'ent_piped' });
    await queue.add('entry', DATA, { ...OPTS, jobId: 'ent_added' });
    const piped = await redis.hgetall(queue.toKey('ent_piped'));
    const added = await redis.hgetall(queue.toKey('ent_added'));
    const { timestamp: t1, ...pipedRest } = piped;
    const { timestamp: t2, ...addedRest } = added;
    const parsed = (h: Record<string, string>) => ({ ...h, opts: { ...JSON.parse(h.opts ?? '{}'), jobId: 'x' } });
    expect(parsed(pipedRest)).toEqual(parsed(addedRest));
    expect(JSON.parse(piped.opts ?? '{}').jobId).toBe('ent_piped');
    expect(Number(t1)).toBeGreaterThan(0);
    expect(Number(t2)).toBeGreaterThanOrEqual(Number(t1));
    expect(await queue.getJobState('ent_piped')).toBe('prioritized');
    const job = await Job.fromId(queue, 'ent_piped');
    expect(job).toMatchObject({ name: 'entry', data: DATA, opts: { attempts: 3, priority: 5, removeOnComplete: { age: 600 } } });
    const events = await redis.xrange(queue.keys.events as string, '-', '+');
    const kinds = (id: string) => events.filter(([, f]) => f.includes(id)).map(([, f]) => f[f.indexOf('event') + 1]);
    expect(kinds('ent_piped')).toEqual(kinds('ent_added'));
    expect(kinds('ent_piped')).toContain('waiting');
  });

  it('addAfter runs the caller’s commands, then the add, in one pipeline; a job BullMQ refuses writes nothing', async () => {
    const key = `${prefix}:index`;
    await addAfter(queue, (p) => p.set(key, 'here', 'EX', 60), { name: 'entry', data: DATA, opts: OPTS, jobId: 'ent_after' });
    expect(await redis.get(key)).toBe('here');
    expect(await queue.getJobState('ent_after')).toBe('prioritized');

    const refused = `${prefix}:refused`;
    // BullMQ validates options as it queues the insert: an integer custom id is refused before exec.
    await expect(addAfter(queue, (p) => p.set(refused, 'x'), { name: 'entry', data: DATA, opts: OPTS, jobId: '123' })).rejects.toThrow(
      /cannot be integers/,
    );
    expect(await redis.exists(refused)).toBe(0);
    expect(await queue.getJobState('123')).toBe('unknown');
  });
});
