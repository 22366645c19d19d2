/**
 * Poison pills stop (issue 20): a job whose worker dies while holding it gets one more worker;
 * when that one dies too, the job is failed as `worker_crashed` — visible in GET /v1/jobs/{id}
 * and in its job.failed webhook — instead of walking the pool. Real worker processes, SIGKILLed
 * while they hold the job (what a job that crashes the process or freezes its event loop past
 * the lock looks like to BullMQ), real Redis, S3, ONNX Runtime and webhook dispatcher.
 */
import type { ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { metricsKey, openJobsKey } from '../infra/redis/keys.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { locateMember } from './support/entries.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const F = 256;
const MODEL = 'heavy';
let stack: TestStack;
let redis: RedisClient;
let dispatcher: RunningDispatcher;
const received: Array<{ type: string; data: Record<string, unknown> }> = [];
const receiver = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    received.push(JSON.parse(body) as (typeof received)[number]);
    res.writeHead(200).end();
  });
});

beforeAll(async () => {
  // Short locks, so a dead worker's job is noticed in seconds rather than 30 s.
  stack = await startStack({
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '200',
    HEARTBEAT_TTL_MS: '5000',
    WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1',
  });
  redis = createRedis(stack.config.redisUrl);
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  dispatcher = startDispatcher(stack.config, createLogger('silent'));
  // Slow enough that a big job keeps a worker busy for seconds: it is caught holding it.
  const slow = buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 3 });
  await stack.registry.publish({ name: MODEL, version: '1', bytes: slow, maxBatch: 16, warmupBatches: [1, 16] });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 3, standby: 0 });
}, 60_000);

afterAll(async () => {
  await dispatcher?.close();
  await stack?.close();
  if (redis) await closeRedis(redis);
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

/** The queue entry (BullMQ job id) carrying request `id`. */
async function entryOf(id: string): Promise<string> {
  const at = await locateMember(redis, stack.config.queuePrefix, id);
  if (!at) throw new Error(`the index has no queue entry for ${id}`);
  return at.entryId;
}

/** Resolves once a worker holds the job's queue entry for the `nth` time (BullMQ's attemptsStarted). */
function heldFor(id: string, nth: number): Promise<true> {
  return until(`the job to be taken for the ${nth}. time`, () =>
    stack.withQueue(MODEL, '1', async (queue) => {
      const job = await queue.getJob(await entryOf(id));
      return job && (await job.getState()) === 'active' && job.attemptsStarted >= nth ? true : undefined;
    }),
  );
}

async function kill(worker: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGKILL');
  await exited;
}

it('a job held by two workers that died is failed as worker_crashed, not run by a third; the third serves on', async () => {
  const rows = 4_000;
  const data = Array.from({ length: rows * F }, (_, i) => i % 2);
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/poison`;
  const res = await stack.call(`/v1/models/${MODEL}/jobs`, {
    method: 'POST',
    body: JSON.stringify({
      inputs: [{ name: 'features', shape: [rows, F], datatype: 'FP32', data }],
      webhook: { url, events: ['job.failed'] },
    }),
  });
  expect(res.status).toBe(202);
  const id = ((await res.json()) as { id: string }).id;

  // Two workers, each killed while it holds the job.
  for (let nth = 1; nth <= 2; nth++) {
    const worker = await stack.startWorker(MODEL, '1', { INTRA_OP_THREADS: '1' });
    await heldFor(id, nth);
    await kill(worker);
  }
  // Two crashes and no third worker yet: nothing has failed it.
  expect(((await (await stack.call(`/v1/jobs/${id}`)).json()) as { status: string }).status).toBe('running');

  // The third worker finds the job back from the second's expired lock, and fails it at once.
  const third = await stack.startWorker(MODEL, '1', { INTRA_OP_THREADS: '1' });
  const done = await waitForJob(stack, id, 60_000);
  expect(done.status).toBe('failed');
  expect(done.error).toMatchObject({ code: 'worker_crashed' });
  expect((done.error as { message: string }).message).toMatch(/twice .* not handed to another/);
  const entryId = await entryOf(id);
  const stalls = await stack.withQueue(MODEL, '1', async (queue) => (await queue.getJob(entryId))?.stalledCounter);
  expect(stalls).toBe(2);

  // The tenant's webhook says the same.
  const hook = await until('the job.failed webhook', async () => received.find((r) => r.data.id === id));
  expect(hook.type).toBe('job.failed');
  expect(hook.data.error).toMatchObject({ code: 'worker_crashed' });

  // The third worker lives and serves; the failed job no longer counts as open for the tenant.
  const beat = (await listHeartbeats(redis, stack.config.queuePrefix)).find((b) => b.pid === third.pid);
  expect(beat?.state).toBe('active');
  expect(third.exitCode).toBeNull();
  const [ok] = await stack.submitMany(MODEL, 1, { features: F });
  expect((await waitForJob(stack, ok as string)).status).toBe('succeeded');
  // Its processor ran that job and nothing else: the poison job was failed before it ran.
  const outcomes = await until('the third worker to report its jobs', async () => {
    const raw = await redis.get(metricsKey(stack.config.queuePrefix, beat?.id ?? ''));
    const metrics = raw ? (JSON.parse(raw) as Array<{ name: string; values: Array<{ labels: { outcome?: string }; value: number }> }>) : [];
    const processed = metrics.find((m) => m.name === 'warmpool_jobs_processed_total')?.values ?? [];
    return processed.length > 0 ? Object.fromEntries(processed.map((v) => [v.labels.outcome, v.value])) : undefined;
  });
  expect(outcomes).toEqual({ succeeded: 1 });
  await until('the open jobs to be released', async () =>
    (await redis.zcard(openJobsKey(stack.config.queuePrefix, 'tenant-a'))) === 0 ? true : undefined,
  );
}, 240_000);
