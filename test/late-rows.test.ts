/**
 * The workers count the rows that waited past SLO_QUEUE_WAIT_MS (the arrival history's `late`
 * kind), beside their completions: what the scaler's SLO control weighs (infra/scaler/slo-control.ts).
 * Jobs queued before any worker starts wait longer than a 1 s SLO; jobs sent to a warm worker
 * with nothing ahead of them are taken within milliseconds, so only the first ones count.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { systemClock } from '../infra/kernel/clock.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 4;
let stack: TestStack;

beforeAll(async () => {
  stack = await startStack({ SLO_QUEUE_WAIT_MS: '1000', WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  await stack.registry.publish({ name: 'late', version: '1', bytes: buildMlpModel({ features: F, hidden: 4, layers: 1 }), maxBatch: 8 });
  // Deployed at min 0 with no scaler here: jobs are taken and wait for the worker started below.
  await stack.deployments.put({ model: 'late', version: '1', min: 0, max: 1, standby: 0 });
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

const request = (i: number) => ({ inputs: [{ name: 'features', datatype: 'FP32', shape: [1, F], data: [i, 1, 2, 3] }], cache: false });

async function submit(i: number): Promise<string> {
  const res = await stack.call('/v1/models/late/jobs', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(request(i)),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

it('counts as late the completed rows that waited past the SLO, and only those', async () => {
  const early = await Promise.all([0, 1, 2].map(submit));
  await new Promise((r) => setTimeout(r, 1_200));
  await stack.startWorker('late', '1');
  for (const id of early) expect(await waitForJob(stack, id)).toMatchObject({ status: 'succeeded' });
  // One at a time to a warm, idle worker: each is taken within milliseconds.
  for (let i = 3; i < 5; i++) expect(await waitForJob(stack, await submit(i))).toMatchObject({ status: 'succeeded' });

  const redis = createRedis(stack.config.redisUrl);
  try {
    const history = createArrivalHistory(redis, stack.config.queuePrefix, systemClock);
    const total = async (read: typeof history.late) =>
      (await read('late', Date.now() - 10 * 60_000, Date.now())).perMinute.reduce((a, b) => a + b, 0);
    // The worker flushes its counts once a second.
    await expect.poll(() => total(history.completions), { timeout: 10_000 }).toBe(5);
    expect(await total(history.late)).toBe(3);
  } finally {
    await closeRedis(redis);
  }
}, 120_000);
