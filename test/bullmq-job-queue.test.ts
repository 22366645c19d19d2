// The BullMQ job queue against a real Redis, with plain BullMQ Workers standing in for warmpool's.
import { UnrecoverableError, Worker, type Job, type Processor } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { JobQueue } from '../api/ports.ts';
import { createBullJobQueue, parseFailure, type BullJobQueue } from '../infra/bullmq-job-queue.ts';
import { NotFoundError } from '../infra/errors.ts';
import { queueName, type JobData, type JobResult } from '../infra/job-contract.ts';
import { testServices, uniqueId } from './support/services.ts';

const result = (id: string): JobResult => ({
  outputs: [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: [0.5] }],
  timings: { queueMs: 1, inferMs: 2, batchRows: 1 },
  workerId: `w-${id}`,
});

describe('createBullJobQueue', () => {
  let prefix: string;
  let jobs: BullJobQueue;
  let redis: Redis;
  const workers: Worker[] = [];
  let model: string;

  const data = (tenant = 'tenant-a'): JobData => ({
    tenant,
    model,
    version: '1',
    inputs: [{ name: 'features', datatype: 'FP32', shape: [1, 2], data: [1, 2] }],
    submittedAt: Date.now(),
  });

  function startWorker(processor: Processor<JobData, JobResult>, concurrency = 1): Worker {
    const worker = new Worker<JobData, JobResult>(queueName(model, '1'), processor, {
      connection: { url: testServices().redisUrl, maxRetriesPerRequest: null },
      prefix,
      concurrency,
    });
    workers.push(worker);
    return worker;
  }

  beforeAll(() => {
    prefix = uniqueId('jq');
    redis = new Redis(testServices().redisUrl, { maxRetriesPerRequest: null });
    jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
    // The API's port is satisfied structurally.
    const port: JobQueue = jobs;
    expect(port).toBe(jobs);
  });

  afterEach(async () => {
    await Promise.all(workers.splice(0).map((w) => w.close()));
  });

  afterAll(async () => {
    await jobs.close();
    for await (const keys of redis.scanStream({ match: `${prefix}:*`, count: 500 })) {
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
    }
    redis.disconnect();
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
    expect(await redis.get(`${prefix}:job:job_ok1`)).toBe(queueName(model, '1'));
    expect(await redis.ttl(`${prefix}:job:job_ok1`)).toBeGreaterThan(0);

    startWorker(async (job: Job<JobData, JobResult>) => result(job.id ?? ''));
    const done = await jobs.waitFor('job_ok1', 30_000);
    expect(done.status).toBe('succeeded');
    expect(done.result).toEqual(result('job_ok1'));
    const view = await jobs.get('job_ok1');
    expect(view).toMatchObject({ status: 'succeeded', attemptsMade: 1, result: result('job_ok1') });
    expect(view?.startedAt).toBeGreaterThanOrEqual(view?.createdAt ?? Infinity);
    expect(view?.finishedAt).toBeGreaterThanOrEqual(view?.startedAt ?? Infinity);
    expect(await jobs.depth(model, '1')).toBe(0);
  });

  it('reports failures: invalid_input from an UnrecoverableError, inference_failed otherwise', async () => {
    nextModel();
    startWorker(async (job) => {
      if (job.id === 'job_bad') throw new UnrecoverableError('invalid_input: input "features": data[3] must be a finite number');
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
    const worker = startWorker(async () => result('early'));
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
      startWorker(async (job) => {
        if (job.attemptsMade === 0) throw new Error('transient');
        return result('retried');
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
    startWorker(async (job) => {
      order.push(job.id ?? '');
      return result(job.id ?? '');
    });
    await jobs.waitFor('job_p_low', 30_000);
    expect(order).toEqual(['job_p_high', 'job_p_normal', 'job_p_low']);
  });

  it('answers null / job_not_found for an unknown id', async () => {
    expect(await jobs.get('job_nope')).toBeNull();
    await expect(jobs.waitFor('job_nope', 10)).rejects.toBeInstanceOf(NotFoundError);
  });

  it('close() is idempotent and leaves no connection open', async () => {
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
    for await (const keys of redis.scanStream({ match: `${name}:*`, count: 500 })) {
      if ((keys as string[]).length > 0) await redis.del(...(keys as string[]));
    }
  });

  async function clientsNamed(name: string): Promise<number> {
    const list = (await redis.client('LIST')) as string;
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
  });
});

function redisOptions(url: string): { host: string; port: number } {
  const u = new URL(url);
  return { host: u.hostname, port: Number(u.port) };
}
