// The BullMQ job queue against a real Redis, with plain BullMQ Workers running queue entries
// (test/support/entry-worker.ts) standing in for warmpool's.
import { UnrecoverableError, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { AppJobQueue } from '../api/app.ts';
import type { JobQueue } from '../api/ports.ts';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { type JobStatus, type JobView, queueName } from '../infra/contracts/job.ts';
import type { TensorToPack } from '../infra/contracts/packed-tensors.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { NotFoundError } from '../infra/kernel/errors.ts';
import { isClusterUrl } from '../infra/kernel/redis-url.ts';
import { type BullJobQueue, createBullJobQueue, parseFailure } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { memberEntry } from './support/entries.ts';
import { type MemberFn, startEntryWorker } from './support/entry-worker.ts';
import { testServices, uniqueId } from './support/services.ts';

/** What the stand-in worker answers for every member: one score of 0.5. */
const SCORE: TensorToPack[] = [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: Float32Array.of(0.5) }];
const score = async () => SCORE;
/** SCORE as the API shows it. */
const outputs = [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: [0.5] }];

describe('createBullJobQueue', () => {
  let prefix: string;
  let jobs: BullJobQueue;
  let redis: RedisClient;
  const workers: Worker[] = [];
  let model: string;

  const data = (tenant = 'tenant-a'): QueuedRequest => ({
    tenant,
    model,
    version: '1',
    rows: 1,
    inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 2], data: Float32Array.of(1, 2) }],
    submittedAt: Date.now(),
  });

  function startWorker(run: MemberFn, concurrency = 1): Worker {
    const worker = startEntryWorker({ redis, prefix, model, run, concurrency, workerId: `w-${model}` });
    workers.push(worker);
    return worker;
  }

  beforeAll(() => {
    prefix = uniqueId('jq');
    redis = createRedis(testServices().redisUrl);
    jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    // The API's ports are satisfied structurally.
    const port: JobQueue & AppJobQueue = jobs;
    expect(port).toBe(jobs);
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });

  afterAll(async () => {
    await jobs.close();
    for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  // Each test its own model, so its own queue.
  let n = 0;
  const nextModel = () => (model = `m${n++}`);

  it('enqueues a job that a worker completes; get() shows it succeeded with its result', async () => {
    nextModel();
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_ok1' });
    const queued = await jobs.get('job_ok1');
    expect(queued).toMatchObject({ id: 'job_ok1', tenant: 'tenant-a', model, version: '1', status: 'queued', attemptsMade: 0 });
    expect(queued?.result).toBeUndefined();
    expect(await jobs.depth(model, '1')).toBe(1);
    // The index names the queue entry that carries the request; alone, it is the entry's only member.
    const index = await redis.get(`${prefix}:job:job_ok1`);
    expect(index).toMatch(new RegExp(`^${escapeRegExp(queueName(model, '1'))}#ent_[A-Za-z0-9_-]{20}$`));
    expect(await redis.ttl(`${prefix}:job:job_ok1`)).toBeGreaterThan(0);
    const held = await memberEntry(redis, prefix, 'job_ok1');
    expect(`${held?.queue}#${held?.entry.id}`).toBe(index);
    expect(held?.entry.data.members.map((m) => m.id)).toEqual(['job_ok1']);

    startWorker(score);
    const done = await jobs.waitFor('job_ok1', 30_000);
    expect(done.status).toBe('succeeded');
    expect(done.result).toMatchObject({ outputs, workerId: `w-${model}`, timings: { batchRows: 1 } });
    const view = await jobs.get('job_ok1');
    expect(view).toMatchObject({ status: 'succeeded', attemptsMade: 1, result: done.result });
    expect(view?.startedAt).toBeGreaterThanOrEqual(view?.createdAt ?? Infinity);
    expect(view?.finishedAt).toBeGreaterThanOrEqual(view?.startedAt ?? Infinity);
    expect(await jobs.depth(model, '1')).toBe(0);
  });

  it('reports failures: invalid_input from an UnrecoverableError, inference_failed otherwise', async () => {
    nextModel();
    startWorker(async ({ member }) => {
      if (member.id === 'job_bad') throw new UnrecoverableError('invalid_input: input "features": data[3] must be a finite number');
      throw new Error('session exploded');
    });
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_bad' });
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_boom' });
    const bad = await jobs.waitFor('job_bad', 30_000);
    expect(bad.status).toBe('failed');
    expect(bad.error).toEqual({ code: 'invalid_input', message: 'input "features": data[3] must be a finite number' });
    const boom = await jobs.waitFor('job_boom', 30_000);
    expect(boom).toMatchObject({ status: 'failed', error: { code: 'inference_failed', message: 'session exploded' } });
    expect(boom.result).toBeUndefined();
  });

  it('waitFor returns a job that finished before the wait began', async () => {
    nextModel();
    const worker = startWorker(score);
    const completed = new Promise<void>((resolve) => worker.on('completed', () => resolve()));
    await jobs.enqueue(data(), { priority: 'high', jobId: 'job_early' });
    await completed;
    expect((await jobs.waitFor('job_early', 30_000)).status).toBe('succeeded');
  });

  it('waitFor times out with the current, non-terminal view', async () => {
    nextModel();
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_slow' });
    const view = await jobs.waitFor('job_slow', 50);
    expect(view).toMatchObject({ id: 'job_slow', status: 'queued' });
  });

  it('waitFor keeps waiting through a retried attempt', async () => {
    nextModel();
    const retrying = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 2, backoffMs: 10 });
    try {
      startWorker(async ({ attemptsMade }) => {
        if (attemptsMade === 0) throw new Error('transient');
        return SCORE;
      });
      await retrying.enqueue(data(), { priority: 'normal', jobId: 'job_retry' });
      const view = await retrying.waitFor('job_retry', 30_000);
      expect(view).toMatchObject({ status: 'succeeded', attemptsMade: 2 });
    } finally {
      await retrying.close();
    }
  });

  it('waitFor rejects with the signal reason when aborted', async () => {
    nextModel();
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_abort' });
    const controller = new AbortController();
    const waiting = jobs.waitFor('job_abort', 30_000, controller.signal);
    controller.abort(new Error('client went away'));
    await expect(waiting).rejects.toThrow('client went away');
  });

  it('serves high priority before normal before low', async () => {
    nextModel();
    await jobs.enqueue(data(), { priority: 'low', jobId: 'job_p_low' });
    await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_p_normal' });
    await jobs.enqueue(data(), { priority: 'high', jobId: 'job_p_high' });
    expect(await jobs.depth(model, '1')).toBe(3);
    const order: string[] = [];
    startWorker(async ({ member }) => {
      order.push(member.id);
      return SCORE;
    });
    await jobs.waitFor('job_p_low', 30_000);
    expect(order).toEqual(['job_p_high', 'job_p_normal', 'job_p_low']);
  });

  /** A worker whose jobs wait for `release()`; `taken` resolves with the first job it holds. */
  function gatedWorker() {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let took: (id: string) => void = () => undefined;
    const taken = new Promise<string>((resolve) => (took = resolve));
    startWorker(async ({ member }) => {
      took(member.id);
      await gate;
      return SCORE;
    });
    return { taken, release };
  }

  describe('cancel', () => {
    it('ends a queued job as canceled, idempotently; no worker ever gets it', async () => {
      nextModel();
      await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_c1' });
      const canceled = await jobs.cancel('job_c1');
      expect(canceled).toMatchObject({ id: 'job_c1', tenant: 'tenant-a', model, status: 'canceled', error: { code: 'canceled' } });
      expect(canceled?.finishedAt).toBeGreaterThanOrEqual(canceled?.createdAt ?? Infinity);
      expect(await jobs.get('job_c1')).toEqual(canceled);
      expect(await jobs.cancel('job_c1')).toEqual(canceled);
      expect(await jobs.depth(model, '1')).toBe(0);
      // BullMQ no longer holds it: a worker started now takes the next job, not the canceled one.
      const seen: string[] = [];
      startWorker(async ({ member }) => {
        seen.push(member.id);
        return SCORE;
      });
      await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_c1_next' });
      await jobs.waitFor('job_c1_next', 30_000);
      expect(seen).toEqual(['job_c1_next']);
    });

    it('cancels a job waiting for a retry (delayed)', async () => {
      nextModel();
      const retrying = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 2, backoffMs: 60_000 });
      try {
        const worker = startWorker(async () => {
          throw new Error('transient');
        });
        const failedOnce = new Promise<void>((resolve) => worker.on('failed', () => resolve()));
        await retrying.enqueue(data(), { priority: 'normal', jobId: 'job_c_delayed' });
        await failedOnce;
        expect((await retrying.get('job_c_delayed'))?.status).toBe('queued');
        expect((await retrying.cancel('job_c_delayed'))?.status).toBe('canceled');
        expect(await retrying.depth(model, '1')).toBe(0);
      } finally {
        await retrying.close();
      }
    });

    it('leaves a running or finished job alone, and answers null for an unknown one', async () => {
      nextModel();
      const { taken, release } = gatedWorker();
      await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_c_run' });
      await taken;
      expect((await jobs.cancel('job_c_run'))?.status).toBe('running');
      release();
      expect((await jobs.waitFor('job_c_run', 30_000)).status).toBe('succeeded');
      expect((await jobs.cancel('job_c_run'))?.status).toBe('succeeded');
      expect(await jobs.cancel('job_c_nope')).toBeNull();
    });

    it("wakes another process's waiters (through BullMQ's removed event)", async () => {
      nextModel();
      const other = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
      try {
        await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_c_wake' });
        const waiting = jobs.waitFor('job_c_wake', 30_000);
        while (jobs.waiting() === 0) await new Promise((r) => setTimeout(r, 5));
        await other.cancel('job_c_wake');
        expect(await waiting).toMatchObject({ status: 'canceled', error: { code: 'canceled' } });
        expect(jobs.waiting()).toBe(0);
      } finally {
        await other.close();
      }
    });
  });

  describe('deadlines', () => {
    let clock: ManualClock;
    let timed: BullJobQueue;

    beforeAll(() => {
      clock = new ManualClock(Date.now());
      timed = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1, clock });
    });
    afterAll(() => timed.close());

    const withDeadline = (timeoutMs: number): QueuedRequest => ({ ...data(), submittedAt: clock.now(), timeoutMs });

    it('fails a queued job seen past its deadline with deadline_exceeded, and removes it from the queue', async () => {
      nextModel();
      await timed.enqueue(withDeadline(1000), { priority: 'normal', jobId: 'job_d1' });
      clock.set(clock.now() + 1000);
      expect((await timed.get('job_d1'))?.status).toBe('queued');
      clock.set(clock.now() + 1);
      const expired = await timed.get('job_d1');
      expect(expired).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
      expect(expired?.error?.message).toMatch(/deadline was 1000 ms/);
      expect(await timed.depth(model, '1')).toBe(0);
      expect(await jobs.get('job_d1')).toEqual(expired); // what any API process sees
      expect((await timed.cancel('job_d1'))?.status).toBe('failed');
    });

    it('waitFor wakes at the deadline with no worker running', async () => {
      nextModel();
      await timed.enqueue(withDeadline(5000), { priority: 'normal', jobId: 'job_d2' });
      const waiting = timed.waitFor('job_d2', 60_000);
      // Two sleepers: the wait's own timeout and the job's deadline.
      while (clock.pending < 2) await new Promise((r) => setTimeout(r, 5));
      await clock.advance(5001);
      expect(await waiting).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
      expect(clock.pending).toBe(0);
    });

    it('never touches a job a worker has taken, however late', async () => {
      nextModel();
      const { taken, release } = gatedWorker();
      await timed.enqueue(withDeadline(1000), { priority: 'normal', jobId: 'job_d3' });
      await taken;
      clock.set(clock.now() + 60_000);
      expect((await timed.get('job_d3'))?.status).toBe('running');
      release();
      expect((await timed.waitFor('job_d3', 30_000)).status).toBe('succeeded');
    });
  });

  describe('watch', () => {
    it('reports each status once, in order, until terminal; releases its listener', async () => {
      nextModel();
      await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_w1' });
      const seen: JobStatus[] = [];
      const signals = new Map<JobStatus, () => void>();
      const saw = (status: JobStatus) => new Promise<void>((resolve) => signals.set(status, resolve));
      const [sawQueued, sawRunning] = [saw('queued'), saw('running')];
      const watching = jobs.watch('job_w1', (view: JobView) => {
        seen.push(view.status);
        signals.get(view.status)?.();
      });
      await sawQueued; // only then a worker, so the first report is deterministic
      const { release } = gatedWorker();
      await sawRunning;
      release();
      await watching;
      expect(seen).toEqual(['queued', 'running', 'succeeded']);
      expect(jobs.waiting()).toBe(0);
    });

    it('rejects with the reason when aborted, releasing its listener', async () => {
      nextModel();
      await jobs.enqueue(data(), { priority: 'normal', jobId: 'job_w2' });
      const controller = new AbortController();
      const seen: JobStatus[] = [];
      const watching = jobs.watch('job_w2', (view) => void seen.push(view.status), controller.signal);
      while (jobs.waiting() === 0) await new Promise((r) => setTimeout(r, 5));
      controller.abort(new Error('client left'));
      await expect(watching).rejects.toThrow('client left');
      expect(seen).toEqual(['queued']);
      expect(jobs.waiting()).toBe(0);
    });
  });

  it('answers null / job_not_found for an unknown id', async () => {
    expect(await jobs.get('job_nope')).toBeNull();
    await expect(jobs.waitFor('job_nope', 10)).rejects.toBeInstanceOf(NotFoundError);
  });

  // CLIENT LIST sees one node's connections: single Redis only.
  it.skipIf(isClusterUrl(testServices().redisUrl))('close() is idempotent and leaves no connection open', async () => {
    nextModel();
    // Its own prefix: BullMQ names a QueueEvents connection `<prefix>:<queue, base64>:qe`.
    const name = uniqueId('conn');
    const own = createBullJobQueue({
      connection: { ...redisOptions(testServices().redisUrl), connectionName: name },
      prefix: name,
      retentionS: 600,
      attempts: 1,
    });
    await own.enqueue(data(), { priority: 'normal', jobId: 'job_conn' });
    await own.waitFor('job_conn', 10); // opens a QueueEvents and its blocking connection
    expect(await clientsNamed(name)).toBeGreaterThanOrEqual(2);
    await own.close();
    await own.close();
    expect(await clientsNamed(name)).toBe(0);
    await expect(own.enqueue(data(), { priority: 'normal', jobId: 'job_after' })).rejects.toThrow('closed');
    for await (const keys of scanKeys(redis, `${name}:*`)) await deleteMany(redis, keys);
  });

  async function clientsNamed(name: string): Promise<number> {
    const list = (await (redis as Redis).client('LIST')) as string;
    return list.split('\n').filter((line) => line.includes(` name=${name} `) || line.includes(` name=${name}:`)).length;
  }
});

describe('parseFailure', () => {
  it('splits a leading snake_case code, else calls it inference_failed', () => {
    expect(parseFailure('invalid_input: bad: very')).toEqual({ code: 'invalid_input', message: 'bad: very' });
    expect(parseFailure('deadline_exceeded: late')).toEqual({ code: 'deadline_exceeded', message: 'late' });
    expect(parseFailure('Error: boom')).toEqual({ code: 'inference_failed', message: 'Error: boom' });
    expect(parseFailure('ECONNRESET')).toEqual({ code: 'inference_failed', message: 'ECONNRESET' });
    expect(parseFailure(undefined)).toEqual({ code: 'inference_failed', message: 'inference failed' });
    // BullMQ's own reason for a job whose workers died holding it too often (worker/intake.ts).
    expect(parseFailure('job stalled more than allowable limit').code).toBe('worker_crashed');
  });
});

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

function redisOptions(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}
