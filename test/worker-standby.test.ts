/**
 * Standby workers and the control channel, on real worker processes, Redis, S3 and ONNX Runtime:
 * - a worker started as standby warms up and then takes no job, however many wait;
 * - `activate` makes it drain the queue; `standby` stops it fetching while the jobs it holds
 *   finish; a desired state SET without its publish is still picked up at the next heartbeat;
 * - `drain` behaves as SIGTERM: held jobs finish, the process exits 0, nothing is lost.
 */
import type { ChildProcess } from 'node:child_process';
import type { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { EntryData } from '../infra/contracts/entry.ts';
import { sendControl } from '../infra/fleet/worker-control.ts';
import { type HeartbeatPayload, listHeartbeats } from '../infra/fleet/worker-states.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { controlStateKey } from '../infra/redis/keys.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const F = 256;
let stack: TestStack;
let redis: RedisClient;

beforeAll(async () => {
  // Queue entries of two requests at most: 200 requests are then ≥ 100 entries, more than a worker
  // holds at once (its concurrency counts entries), so some always wait when it stops fetching.
  stack = await startStack({ HEARTBEAT_INTERVAL_MS: '200', HEARTBEAT_TTL_MS: '2000', WARMUP_ITERATIONS: '1', COALESCE_MAX_REQUESTS: '2' });
  redis = createRedis(stack.config.redisUrl);
  // Slow enough per batch that a worker is reliably caught holding jobs.
  const slow = buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 5 });
  for (const name of ['sb-idle', 'sb-pause', 'sb-drain']) {
    await stack.registry.publish({ name, version: '1', bytes: slow, maxBatch: 8, warmupBatches: [1, 8] });
    await stack.deployments.put({ model: name, version: '1', min: 1, max: 2, standby: 1 });
  }
}, 60_000);

afterAll(async () => {
  await stack?.close();
  if (redis) await closeRedis(redis);
});

async function beatOf(child: ChildProcess): Promise<HeartbeatPayload | undefined> {
  return (await listHeartbeats(redis, stack.config.queuePrefix)).find((b) => b.pid === child.pid);
}

/** The child's heartbeat once it reports `state` (fails fast if it reports `failed`). */
function waitForState(child: ChildProcess, state: string): Promise<HeartbeatPayload> {
  return until(`worker ${child.pid} ${state}`, async () => {
    const beat = await beatOf(child);
    if (beat?.state === 'failed') throw new Error(`worker failed: ${beat.error}`);
    return beat?.state === state ? beat : undefined;
  });
}

/** Waits until the worker has written `count` more heartbeats. */
async function heartbeats(child: ChildProcess, count: number): Promise<void> {
  let last = (await beatOf(child))?.updatedAt ?? 0;
  for (let seen = 0; seen < count; seen++) {
    last = await until('a heartbeat', async () => {
      const at = (await beatOf(child))?.updatedAt;
      return at !== undefined && at > last ? at : undefined;
    });
  }
}

/** The queue entries (BullMQ job ids) the worker holds once it holds some and has finished some. */
function midStream(model: string): Promise<string[]> {
  return stack.withQueue(model, '1', (queue) =>
    until('the worker mid-stream', async () => {
      const [active, completed] = await Promise.all([queue.getActive(), queue.getCompletedCount()]);
      return active.length > 0 && completed > 0 ? active.map((j) => j.id as string) : undefined;
    }),
  );
}

/** The requests carried by the queue's entries in `states` (an entry may carry many). */
async function requestsIn(queue: Queue, states: Array<'waiting' | 'prioritized' | 'completed'>): Promise<number> {
  const entries = await queue.getJobs(states);
  return entries.reduce((n, j) => n + (j.data as EntryData).members.length, 0);
}

/** BullMQ's counts of the queue's entries. */
async function counts(queue: Queue) {
  const c = await queue.getJobCounts('waiting', 'prioritized', 'active', 'completed', 'failed');
  const n = (k: string) => c[k] ?? 0;
  return { waiting: n('waiting'), prioritized: n('prioritized'), active: n('active'), completed: n('completed'), failed: n('failed') };
}

it('a standby worker takes no job until activated, then drains the queue', async () => {
  const ids = await stack.submitMany('sb-idle', 40, { features: F });
  const worker = await stack.startWorker('sb-idle', '1', { WARMPOOL_START_AS: 'standby', INTRA_OP_THREADS: '1' });
  const beat = await waitForState(worker, 'standby');
  expect(beat.batchProfile).toBeDefined(); // warmed before standing by

  await heartbeats(worker, 3);
  await stack.withQueue('sb-idle', '1', async (queue) => {
    const c = await counts(queue);
    expect(c.active + c.completed + c.failed).toBe(0);
    expect(await requestsIn(queue, ['waiting', 'prioritized'])).toBe(ids.length);
  });
  expect((await beatOf(worker))?.jobsInFlight).toBe(0);

  await sendControl(redis, stack.config.queuePrefix, beat.id, 'activate');
  await waitForState(worker, 'active');
  const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
  await stack.withQueue('sb-idle', '1', async (queue) => {
    expect(await requestsIn(queue, ['completed'])).toBe(ids.length);
    const done = await queue.getJobs(['completed']);
    expect(new Set(done.map((j) => j.returnvalue.workerId))).toEqual(new Set([beat.id]));
  });
}, 180_000);

it('standby stops fetching while held jobs finish; a SET without publish is caught by the heartbeat', async () => {
  const ids = await stack.submitMany('sb-pause', 200, { features: F, rows: 4 });
  const worker = await stack.startWorker('sb-pause', '1', { INTRA_OP_THREADS: '1' });
  const { id } = await waitForState(worker, 'active');
  const held = await midStream('sb-pause');

  await sendControl(redis, stack.config.queuePrefix, id, 'standby');
  await waitForState(worker, 'standby');
  const before = await stack.withQueue('sb-pause', '1', async (queue) => {
    const c = await counts(queue);
    expect(c.active).toBe(0);
    expect(c.failed).toBe(0);
    expect(c.waiting + c.prioritized).toBeGreaterThan(0);
    for (const jobId of held) expect(await queue.getJobState(jobId)).toBe('completed');
    return c;
  });
  await heartbeats(worker, 3);
  await stack.withQueue('sb-pause', '1', async (queue) => expect(await counts(queue)).toEqual(before));

  // The doorbell is lost: only the desired-state key says activate.
  await redis.set(controlStateKey(stack.config.queuePrefix, id), JSON.stringify({ command: 'activate', sentAt: Date.now() }), 'PX', 30_000);
  await waitForState(worker, 'active');
  const jobs = await Promise.all(ids.map((jobId) => waitForJob(stack, jobId, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
}, 180_000);

it('drain finishes the held jobs and exits 0; the rest wait for the next worker', async () => {
  const ids = await stack.submitMany('sb-drain', 200, { features: F, rows: 4 });
  const worker = await stack.startWorker('sb-drain', '1', { INTRA_OP_THREADS: '1' });
  const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
  const { id } = await waitForState(worker, 'active');
  const held = await midStream('sb-drain');

  await sendControl(redis, stack.config.queuePrefix, id, 'drain');
  expect(await exited).toBe(0);
  await stack.withQueue('sb-drain', '1', async (queue) => {
    const c = await counts(queue);
    expect(c.active).toBe(0);
    expect(c.failed).toBe(0);
    expect(c.waiting + c.prioritized).toBeGreaterThan(0);
    for (const jobId of held) expect(await queue.getJobState(jobId)).toBe('completed');
  });

  await stack.startWorker('sb-drain', '1', { INTRA_OP_THREADS: '1' });
  const jobs = await Promise.all(ids.map((jobId) => waitForJob(stack, jobId, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
}, 180_000);

it('SIGTERM drains a standby worker too: it exits 0', async () => {
  const worker = await stack.startWorker('sb-idle', '1', { WARMPOOL_START_AS: 'standby', INTRA_OP_THREADS: '1' });
  const exited = new Promise<number | null>((resolve) => worker.once('exit', (code) => resolve(code)));
  await waitForState(worker, 'standby');
  worker.kill('SIGTERM');
  expect(await exited).toBe(0);
}, 120_000);
