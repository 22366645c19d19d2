// The single-node → Redis Cluster key layout migration, on the suite's real redis-server: an old
// layout made by BullMQ itself (old queue name) and by the old stores' own writes, then read back
// through the current code.
import { type Job, Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryStore } from '../api/webhooks/delivery-store.ts';
import { createWebhookSecrets } from '../api/webhooks/secrets.ts';
import { createRunStore } from '../infra/bulk/run-store.ts';
import { BUCKET_MS, createOutcomeStore } from '../infra/canary/outcomes.ts';
import type { BulkRunSpec } from '../infra/contracts/bulk.ts';
import { type JobResult, type JobView, queueName } from '../infra/contracts/job.ts';
import type { OipTensor } from '../infra/contracts/oip.ts';
import type { LegacyJobData } from '../infra/contracts/queue-job.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { isClusterUrl } from '../infra/kernel/redis-url.ts';
import { type BullJobQueue, createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis } from '../infra/redis/client.ts';
import { applyKeyMigration, planKeyMigration } from '../infra/redis/key-migration.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { migrateKeysMain } from '../scripts/commands/migrate-keys.ts';
import { redisPrefixes, testEnv, testServices } from './support/services.ts';

const OLD_QUEUE = 'infer.m.1';
const NEW_QUEUE = queueName('m', '1');
const clock = { now: () => Date.now() };

/** An online job as the API wrote it before queue entries (the layout this migration found). */
type JobData = LegacyJobData & { inputs: OipTensor[] };
const data = (): JobData => ({
  tenant: 'tenant-a',
  model: 'm',
  version: '1',
  inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 2], data: [1, 2] }],
  submittedAt: Date.now(),
});
const jobResult = (id: string): JobResult => ({
  outputs: [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: [0.5] }],
  timings: { queueMs: 1, inferMs: 2, batchRows: 1 },
  workerId: `w-${id}`,
});

// Records in the shapes branch main wrote (infra/deployments/deployment-store.ts toRecord).
const rev1 = {
  model: 'm',
  version: '1',
  versions: [{ version: '1', weight: 100 }],
  min: 1,
  max: 2,
  standby: 0,
  revision: 1,
  updatedAt: '2024-05-01T00:00:00.000Z',
};
const rev2 = { ...rev1, max: 4, revision: 2, updatedAt: '2024-05-02T00:00:00.000Z' };
const tombstone: JobView = {
  id: 'job_t1',
  tenant: 'tenant-a',
  model: 'm',
  version: '1',
  status: 'canceled',
  createdAt: 1,
  finishedAt: 2,
  attemptsMade: 0,
  error: { code: 'canceled', message: 'canceled before it started' },
};
const spec: BulkRunSpec = {
  id: 'r1',
  tenant: 'tenant-a',
  model: 'm',
  version: '1',
  input: { bucket: 'b', prefix: 'in/' },
  output: { bucket: 'b', prefix: 'out/' },
  chunkRows: 100,
  createdAt: 1,
};

describe.skipIf(isClusterUrl(testServices().redisUrl))('key migration to the Redis Cluster layout', () => {
  let redis: Redis;
  let prefixes: ReturnType<typeof redisPrefixes>;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(() => {
    redis = new Redis(testServices().redisUrl, { maxRetriesPerRequest: null });
    prefixes = redisPrefixes(redis);
  });

  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await prefixes.cleanup();
  });

  afterAll(async () => {
    await closeRedis(redis);
  });

  function queueOn(name: string, prefix: string): Queue<JobData, JobResult> {
    const q = new Queue<JobData, JobResult>(name, { connection: redis, prefix });
    closers.push(() => q.close());
    return q;
  }

  /** Completes whatever the queue holds now, until `ids` are done; then closes the worker. */
  async function drain(name: string, prefix: string, ids: readonly string[]): Promise<void> {
    const pending = new Set(ids);
    let done!: () => void;
    const finished = new Promise<void>((resolve) => (done = resolve));
    const worker = new Worker<JobData, JobResult>(name, async (job: Job<JobData, JobResult>) => jobResult(job.id ?? ''), {
      connection: redis,
      prefix,
    });
    worker.on('completed', (job) => {
      pending.delete(job.id ?? '');
      if (pending.size === 0) done();
    });
    await finished;
    await worker.close();
  }

  /** The old layout: BullMQ on the old queue name, and the old stores' writes. */
  async function seedOldLayout(prefix: string): Promise<void> {
    const q = queueOn(OLD_QUEUE, prefix);
    await q.add('infer', data(), { jobId: 'job_c1', priority: 5 });
    await drain(OLD_QUEUE, prefix, ['job_c1']);
    await q.add('infer', data(), { jobId: 'job_w1' });
    await q.add('infer', data(), { jobId: 'job_w2' });
    await q.add('infer', data(), { jobId: 'job_p1', priority: 5 });
    await q.add('infer', data(), { jobId: 'job_d1', priority: 5, delay: 3_600_000 });
    await q.add('infer', { ...data(), tenant: 'tenant-b' }, { jobId: 'bulk:r1:1', priority: 100 });
    for (const id of ['job_c1', 'job_w1', 'job_w2', 'job_p1', 'job_d1']) await redis.set(`${prefix}:job:${id}`, OLD_QUEUE, 'EX', 600);
    await redis.set(`${prefix}:job:job_t1`, JSON.stringify(tombstone), 'EX', 600);

    await redis.hset(`${prefix}:deployments`, 'm', JSON.stringify(rev2));
    await redis.rpush(`${prefix}:deployments:history:m`, JSON.stringify(rev2), JSON.stringify(rev1));

    const now = Date.now();
    const delivery = (id: string, state: string) =>
      redis.hset(`${prefix}:webhooks:delivery:${id}`, {
        id,
        tenant: 'tenant-a',
        jobId: 'job_c1',
        event: 'job.succeeded',
        url: 'https://example.com/hook',
        payload: '{"type":"job.succeeded"}',
        state,
        attempts: '[]',
        nextAttemptAt: String(now),
        createdAt: String(now),
        updatedAt: String(now),
        reason: '',
        claim: '',
      });
    await delivery('msg_pending', 'pending');
    await redis.zadd(`${prefix}:webhooks:due`, now, 'msg_pending');
    await redis.zadd(`${prefix}:webhooks:index:tenant-a:pending`, now, 'msg_pending');
    await delivery('msg_done', 'succeeded');
    await redis.zadd(`${prefix}:webhooks:index:tenant-a:succeeded`, now, 'msg_done');
    const [lastEvent] = await redis.xrevrange(`${prefix}:${OLD_QUEUE}:events`, '+', '-', 'COUNT', 1);
    await redis.set(`${prefix}:webhooks:cursor:${OLD_QUEUE}`, lastEvent?.[0] ?? '0-0');

    // The canary has read the whole stream so far; its bucket says 7 outcomes, 2 failed.
    await redis.set(`${prefix}:canary:cursor:${OLD_QUEUE}`, lastEvent?.[0] ?? '0-0', 'PX', 86_400_000);
    await redis.hset(`${prefix}:canary:agg:${OLD_QUEUE}:${Math.floor(now / BUCKET_MS) * BUCKET_MS}`, { n: 7, f: 2 });

    await redis.hset(`${prefix}:bulk:run:r1`, {
      spec: JSON.stringify(spec),
      status: 'running',
      priority: 'bulk',
      rowsDone: 100,
      chunksDone: 1,
      badRows: 0,
    });
    await redis.sadd(`${prefix}:bulk:running`, 'r1');
    await redis.hset(`${prefix}:bulk:run:r1:parts`, '0', JSON.stringify({ chunk: 0, key: 'out/part-0', rows: 100 }));
    await redis.sadd(`${prefix}:bulk:run:r1:outstanding`, '1');
    await redis.hset(`${prefix}:bulk:capacity:m`, 'r1', '{"workers":2}');
  }

  async function keysUnder(prefix: string): Promise<string[]> {
    return (await redis.keys(`${prefix}:*`)).sort();
  }

  function jobQueue(prefix: string): BullJobQueue {
    const jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    closers.push(() => jobs.close());
    return jobs;
  }

  it('moves an old deployment to the new layout, where the current code finds all of it', async () => {
    const prefix = prefixes.take('km');
    await seedOldLayout(prefix);
    const secret = await createWebhookSecrets(redis, prefix, clock).getOrCreate('tenant-a');

    const plan = await planKeyMigration(redis, prefix);
    expect(plan.conflicts).toEqual([]);
    expect(plan.live).toEqual([]);
    expect(plan.rewrites.map((w) => w.key).sort()).toEqual(
      ['job_c1', 'job_d1', 'job_p1', 'job_w1', 'job_w2'].map((id) => `${prefix}:job:${id}`),
    );
    const families = new Set(plan.renames.map((r) => r.family));
    expect(families).toEqual(new Set(['queue', 'deployments', 'webhooks', 'bulk', 'canary']));
    const result = await applyKeyMigration(redis, plan);
    expect(result).toMatchObject({ rewritten: 5, skipped: 0, conflicts: [] });

    const after = await keysUnder(prefix);
    // Nothing of the old layout is left; what kept its name is still there.
    const oldLayout = /:(infer\.|deployments|webhooks:(delivery|due|index|cursor:infer)|bulk:run|canary:(cursor|agg):infer)/;
    expect(after.filter((k) => oldLayout.test(k))).toEqual([]);
    expect(after).toContain(`${prefix}:webhooks:secret:tenant-a`);
    expect(await redis.hget(`${prefix}:bulk:capacity:m`, 'r1')).toBe('{"workers":2}');
    expect(await redis.ttl(`${prefix}:job:job_w1`)).toBeGreaterThan(0);

    // Deployments: the record, its history, and the next write's revision.
    const deployments = createDeploymentStore(redis, prefix);
    expect(await deployments.get('m')).toEqual(rev2);
    expect(await deployments.history('m')).toEqual([rev2, rev1]);
    expect((await deployments.put({ model: 'm', version: '1', min: 1, max: 5, standby: 0 })).revision).toBe(3);

    // Webhooks: the deliveries, their due set and index, the secret and the dispatcher's cursor.
    const deliveries = createDeliveryStore(redis, prefix);
    expect((await deliveries.get('msg_done'))?.state).toBe('succeeded');
    expect((await deliveries.list('tenant-a', undefined, 10, Date.now())).map((d) => d.id).sort()).toEqual(['msg_done', 'msg_pending']);
    expect((await deliveries.claimDue(Date.now(), 10)).map((d) => d.id)).toEqual(['msg_pending']);
    expect(await createWebhookSecrets(redis, prefix, clock).getOrCreate('tenant-a')).toEqual(secret);
    const [lastEvent] = await redis.xrevrange(`${prefix}:${NEW_QUEUE}:events`, '+', '-', 'COUNT', 1);
    expect(await redis.get(`${prefix}:{webhooks}:cursor:${NEW_QUEUE}`)).toBe(lastEvent?.[0]);

    // Bulk: the run record, its parts and outstanding chunks.
    const runs = createRunStore(redis, prefix);
    expect(await runs.read('r1')).toMatchObject({ spec, status: 'running', rowsDone: 100, chunksDone: 1 });
    expect(await runs.runningIds()).toEqual(['r1']);
    expect([...(await runs.parts('r1')).keys()]).toEqual([0]);
    expect(await runs.outstanding('r1')).toEqual([1]);

    // Canary: the aggregate is in the window, and the cursor says the stream was read.
    const outcomes = createOutcomeStore({ redis, prefix, windowMs: 60_000 });
    expect(await outcomes.ingest('m', '1', Date.now())).toBe(0);
    expect(await outcomes.window('m', '1', Date.now())).toMatchObject({ requests: 7, failures: 2 });

    // BullMQ: every job in its set under the new name, and the index finds them.
    const q = queueOn(NEW_QUEUE, prefix);
    expect(await q.getJobCounts('waiting', 'prioritized', 'delayed', 'completed', 'active')).toEqual({
      waiting: 2,
      prioritized: 2,
      delayed: 1,
      completed: 1,
      active: 0,
    });
    const jobs = jobQueue(prefix);
    expect(await jobs.get('job_c1')).toMatchObject({ status: 'succeeded', result: jobResult('job_c1') });
    expect(await jobs.get('job_w1')).toMatchObject({ status: 'queued', model: 'm', version: '1' });
    expect(await jobs.get('job_d1')).toMatchObject({ status: 'queued' });
    expect(await jobs.get('job_t1')).toEqual(tombstone);

    // A worker on the new queue name takes the queued jobs (not the delayed one).
    await drain(NEW_QUEUE, prefix, ['job_w1', 'job_w2', 'job_p1', 'bulk:r1:1']);
    expect(await jobs.get('job_w1')).toMatchObject({ status: 'succeeded', result: jobResult('job_w1') });
    expect(await q.getJobCounts('waiting', 'prioritized', 'delayed', 'completed')).toEqual({
      waiting: 0,
      prioritized: 0,
      delayed: 1,
      completed: 5,
    });
    expect(await outcomes.ingest('m', '1', Date.now())).toBeGreaterThan(0);
    expect((await outcomes.window('m', '1', Date.now())).requests).toBe(7 + 4);
  });

  it('is a no-op when run again, and a run cut short is finished by the next', async () => {
    const prefix = prefixes.take('km-rerun');
    await seedOldLayout(prefix);
    const plan = await planKeyMigration(redis, prefix);
    const half = Math.floor(plan.renames.length / 2);
    // A crash halfway: half the renames, no rewrites.
    await applyKeyMigration(redis, { ...plan, renames: plan.renames.slice(0, half), rewrites: [] });

    const rest = await planKeyMigration(redis, prefix);
    expect(rest.renames).toEqual(plan.renames.slice(half));
    expect(rest.rewrites).toEqual(plan.rewrites);
    expect(rest.conflicts).toEqual([]);
    // The stale plan applies too: what is done already is skipped.
    const finished = await applyKeyMigration(redis, plan);
    expect(finished.skipped).toBe(half);
    expect(finished.conflicts).toEqual([]);
    const migrated = await keysUnder(prefix);

    const again = await planKeyMigration(redis, prefix);
    expect(again).toMatchObject({ renames: [], rewrites: [], conflicts: [] });
    expect(await applyKeyMigration(redis, again)).toMatchObject({ rewritten: 0, skipped: 0, conflicts: [] });
    expect(await keysUnder(prefix)).toEqual(migrated);
    expect(await createDeploymentStore(redis, prefix).get('m')).toEqual(rev2);
  });

  it('reports a target that exists as a conflict and overwrites nothing', async () => {
    const prefix = prefixes.take('km-conflict');
    await seedOldLayout(prefix);
    const newer = { ...rev2, max: 9, revision: 5 };
    await redis.hset(`${prefix}:{deployments}`, 'm', JSON.stringify(newer));

    const plan = await planKeyMigration(redis, prefix);
    expect(plan.conflicts).toEqual([`${prefix}:deployments -> ${prefix}:{deployments}`]);
    expect(plan.renames.map((r) => r.from)).not.toContain(`${prefix}:deployments`);
    // A target that appears between plan and apply is a conflict too.
    await redis.sadd(`${prefix}:{bulk}:running`, 'other');
    const result = await applyKeyMigration(redis, plan);
    expect(result.conflicts).toEqual([`${prefix}:bulk:running -> ${prefix}:{bulk}:running`]);

    expect(await redis.hget(`${prefix}:{deployments}`, 'm')).toBe(JSON.stringify(newer));
    expect(await redis.hget(`${prefix}:deployments`, 'm')).toBe(JSON.stringify(rev2));
    expect(await redis.smembers(`${prefix}:{bulk}:running`)).toEqual(['other']);
    expect(await redis.smembers(`${prefix}:bulk:running`)).toEqual(['r1']);
    // The rest moved.
    expect(await redis.exists(`${prefix}:{deployments}:history:m`)).toBe(1);
    expect(await queueOn(NEW_QUEUE, prefix).getWaitingCount()).toBe(2);
  });

  it('refuses while warmpool processes look alive, unless forced, and a prefix with braces', async () => {
    const prefix = prefixes.take('km-live');
    await seedOldLayout(prefix);
    const heartbeat = workerKey(prefix, 'w-old');
    await redis.set(heartbeat, JSON.stringify({ id: 'w-old', model: 'm', version: '1', state: 'active' }), 'PX', 60_000);
    const before = await keysUnder(prefix);

    const plan = await planKeyMigration(redis, prefix);
    expect(plan.live).toEqual([`worker heartbeat ${heartbeat}`]);
    const refused = await applyKeyMigration(redis, plan).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(InvalidInputError);
    expect(refused).toMatchObject({ code: 'processes_running', status: 409 });
    expect((refused as Error).message).toContain(heartbeat);
    expect(await keysUnder(prefix)).toEqual(before);

    // An old worker holding a job leaves its lock under the old queue name.
    await redis.del(heartbeat);
    await redis.set(`${prefix}:${OLD_QUEUE}:job_w1:lock`, 'token', 'PX', 60_000);
    await expect(applyKeyMigration(redis, plan)).rejects.toThrow(`old-version BullMQ job lock ${prefix}:${OLD_QUEUE}:job_w1:lock`);
    expect(await keysUnder(prefix)).toEqual([...before.filter((k) => k !== heartbeat), `${prefix}:${OLD_QUEUE}:job_w1:lock`].sort());

    expect((await applyKeyMigration(redis, plan, { force: true })).conflicts).toEqual([]);
    expect(await redis.exists(`${prefix}:{deployments}`)).toBe(1);

    await expect(planKeyMigration(redis, 'bad{tag}')).rejects.toMatchObject({ code: 'invalid_prefix' });
  });

  describe('warmpool migrate-keys', () => {
    const io = () => {
      const out: string[] = [];
      const err: string[] = [];
      return { out, err, io: { out: (t: string) => out.push(t), err: (t: string) => err.push(t) } };
    };
    const config = (prefix: string, overrides: Record<string, string> = {}) => loadConfig(testEnv({ QUEUE_PREFIX: prefix, ...overrides }));

    it('prints the plan on --dry-run and changes nothing, then migrates, then finds nothing to do', async () => {
      const prefix = prefixes.take('km-cli');
      await seedOldLayout(prefix);
      const before = await keysUnder(prefix);

      const dry = io();
      expect(await migrateKeysMain(['--dry-run'], config(prefix), dry.io)).toBe(0);
      const printed = dry.out.join('');
      expect(printed).toMatch(/to rename: \d+ keys \(queue \d+, deployments 2, webhooks 6, bulk 4, canary 2\)/);
      expect(printed).toContain('to rewrite: 5 job index values');
      expect(printed).toContain('dry run: nothing changed');
      expect(await keysUnder(prefix)).toEqual(before);

      const real = io();
      expect(await migrateKeysMain([], config(prefix), real.io)).toBe(0);
      expect(real.out.join('')).toMatch(
        /renamed \d+ keys \(queue \d+, deployments 2, webhooks 6, bulk 4, canary 2\), rewrote 5 job index values/,
      );
      expect(await createDeploymentStore(redis, prefix).get('m')).toEqual(rev2);

      const again = io();
      expect(await migrateKeysMain([], config(prefix), again.io)).toBe(0);
      expect(again.out.join('')).toContain('nothing to migrate');
    });

    it('exits 1 on a conflict, and 1 while processes look alive unless --force', async () => {
      const prefix = prefixes.take('km-cli-conflict');
      await seedOldLayout(prefix);
      await redis.set(workerKey(prefix, 'w1'), '{}', 'PX', 60_000);
      const live = io();
      expect(await migrateKeysMain([], config(prefix), live.io)).toBe(1);
      expect(live.err.join('')).toContain(`worker heartbeat ${workerKey(prefix, 'w1')}`);
      expect(await redis.exists(`${prefix}:deployments`)).toBe(1);

      await redis.hset(`${prefix}:{deployments}`, 'm', '{}');
      const forced = io();
      expect(await migrateKeysMain(['--force'], config(prefix), forced.io)).toBe(1);
      expect(forced.out.join('')).toContain(`${prefix}:deployments -> ${prefix}:{deployments}`);
      expect(forced.err.join('')).toContain('1 keys conflict');
      expect(await redis.hget(`${prefix}:{deployments}`, 'm')).toBe('{}');
    });

    it('exits 2 on an unknown flag and on a cluster REDIS_URL, touching nothing', async () => {
      const prefix = prefixes.take('km-cli-usage');
      const flag = io();
      expect(await migrateKeysMain(['--dryrun'], config(prefix), flag.io)).toBe(2);
      expect(flag.err.join('')).toContain('--dryrun');

      const cluster = io();
      expect(await migrateKeysMain([], config(prefix, { REDIS_URL: 'redis+cluster://127.0.0.1:1,127.0.0.1:2' }), cluster.io)).toBe(2);
      expect(cluster.err.join('')).toMatch(/Redis Cluster.*old single Redis node/);
    });
  });
});
