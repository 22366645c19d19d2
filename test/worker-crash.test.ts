/**
 * At-least-once through a crash: a worker SIGKILLed mid-batch loses no job. BullMQ's lock on
 * each held job expires, the next worker's stalled-job check puts them back, and they run again.
 */
import { Queue } from 'bullmq';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queueName } from '../infra/job-contract.ts';
import { closeRedis, createRedis } from '../infra/redis.ts';
import { buildMlpModel } from '../scripts/models.ts';
import { startStack, waitForJob, type TestStack } from './support/stack.ts';

const F = 256;
let stack: TestStack;

beforeAll(async () => {
  // Short locks so the test does not wait 30 s for BullMQ to notice the dead worker.
  stack = await startStack({ LOCK_DURATION_MS: '2000', STALLED_INTERVAL_MS: '1000', WARMUP_ITERATIONS: '1' });
  const slow = buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 3 });
  await stack.registry.publish({ name: 'slow', version: '1', bytes: slow, maxBatch: 16, warmupBatches: [1, 16] });
  await stack.deployments.put({ model: 'slow', version: '1', min: 1, max: 2, standby: 0 });
}, 60_000);

afterAll(async () => {
  await stack?.close();
});

it('a worker killed with SIGKILL mid-batch loses no job', async () => {
  const first = await stack.startWorker('slow', '1', { INTRA_OP_THREADS: '1' });
  await stack.waitForWorkers('slow', 'active');

  const ids = await Promise.all(
    Array.from({ length: 300 }, async (_, i) => {
      const data = Array.from({ length: F }, (_, k) => Math.cos(i + k));
      const res = await stack.call('/v1/models/slow/jobs', {
        method: 'POST',
        body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data }] }),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { id: string }).id;
    }),
  );

  // Wait until the worker holds jobs (BullMQ's active list) and has finished some, so the
  // kill lands mid-stream with a batch in its forward pass; then kill it without warning.
  const redis = createRedis(stack.config.redisUrl);
  const queue = new Queue(queueName('slow', '1'), { connection: redis, prefix: stack.config.queuePrefix });
  let running: string[] = [];
  for (let tries = 0; tries < 2000; tries++) {
    const [active, completed] = await Promise.all([queue.getActive(), queue.getCompletedCount()]);
    running = active.map((j) => j.id as string);
    if (running.length > 0 && completed > 0) break;
    await new Promise((r) => setTimeout(r, 10));
  }
  await queue.close();
  await closeRedis(redis);
  expect(running.length).toBeGreaterThan(0);
  first.kill('SIGKILL');
  await new Promise((resolve) => first.once('exit', resolve));

  await stack.startWorker('slow', '1', { INTRA_OP_THREADS: '1' });
  const jobs = await Promise.all(ids.map((id) => waitForJob(stack, id, 120_000)));
  expect(jobs.filter((j) => j.status !== 'succeeded')).toEqual([]);
  for (const id of running) expect(jobs[ids.indexOf(id)]?.status).toBe('succeeded');
}, 180_000);
