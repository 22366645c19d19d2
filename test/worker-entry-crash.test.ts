/**
 * At-least-once for queue entries: a worker SIGKILLed while it runs an entry leaves the entry
 * and its packed inputs in Redis (the inputs are deleted only once BullMQ has finished the
 * entry), and the next worker runs it whole, from those inputs, to the outputs ONNX Runtime
 * gives. Real worker processes, Redis, S3 and ONNX Runtime.
 */
import type { ChildProcess } from 'node:child_process';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ENTRY_ID_PREFIX, ENTRY_JOB_NAME, type EntryData, type EntryResult } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { aligned, packTensors, tensorData } from '../infra/contracts/packed-tensors.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { entryInputsKey, entryOutputsKey } from '../infra/redis/keys.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { uniqueId } from './support/services.ts';
import { startStack, type TestStack } from './support/stack.ts';
import { until } from './support/until.ts';

const F = 256;
const MODEL = 'crashy';
const ROWS = [1_000, 1_000];
// Slow enough that the entry keeps a worker busy for seconds: it is caught holding it.
const bytes = buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 9 });
let stack: TestStack;
let redis: RedisClient;

beforeAll(async () => {
  // Short locks, so a dead worker's entry is noticed in seconds rather than 30 s.
  stack = await startStack({ LOCK_DURATION_MS: '2000', STALLED_INTERVAL_MS: '1000', WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '200' });
  redis = createRedis(stack.config.redisUrl);
  await stack.registry.publish({ name: MODEL, version: '1', bytes, maxBatch: 16, warmupBatches: [1, 16] });
}, 60_000);

afterAll(async () => {
  await stack?.close();
  if (redis) await closeRedis(redis);
});

async function kill(worker: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGKILL');
  await exited;
}

it('an entry whose worker is SIGKILLed is run again by the next worker, from inputs kept until it completed', async () => {
  const prefix = stack.config.queuePrefix;
  const queue = queueName(MODEL, '1');
  const entryId = `${ENTRY_ID_PREFIX}${uniqueId('crash').replace(/-/g, '_')}`;
  const total = ROWS[0]! + ROWS[1]!;
  const features = Float32Array.from({ length: total * F }, (_, k) => Math.sin(k) * 2);
  const packed = packTensors([{ name: 'features', datatype: 'FP32', shape: [total, F], data: features }]);
  const now = Date.now();
  const data: EntryData = {
    entry: 1,
    tenant: 'tenant-a',
    model: MODEL,
    version: '1',
    submittedAt: now,
    members: ROWS.map((rows, i) => ({ id: `job_${uniqueId(`m${i}`)}`, rows, submittedAt: now })),
    inputs: packed.specs,
  };
  await redis.set(entryInputsKey(prefix, queue, entryId), packed.bytes, 'EX', 600);
  await stack.withQueue(MODEL, '1', (q) => q.add(ENTRY_JOB_NAME, data, { jobId: entryId, attempts: 3, removeOnComplete: { age: 600 } }));

  const first = await stack.startWorker(MODEL, '1', { INTRA_OP_THREADS: '1' });
  await until('the first worker to hold the entry', () =>
    stack.withQueue(MODEL, '1', async (q) => ((await q.getJob(entryId).then((j) => j?.getState())) === 'active' ? true : undefined)),
  );
  await kill(first);
  // Dead while holding it: nothing completed the entry, and its inputs are still there.
  expect(await redis.exists(entryInputsKey(prefix, queue, entryId))).toBe(1);
  expect(await redis.exists(entryOutputsKey(prefix, queue, entryId))).toBe(0);

  await stack.startWorker(MODEL, '1', { INTRA_OP_THREADS: '1' });
  const job = await until(
    'the entry to finish on the second worker',
    () => stack.withQueue(MODEL, '1', async (q) => ((j) => (j?.finishedOn !== undefined ? j : undefined))(await q.getJob(entryId))),
    180_000,
  );
  expect(job.failedReason).toBeUndefined();
  expect(job.stalledCounter).toBe(1);
  expect(job.attemptsStarted).toBeGreaterThanOrEqual(2);
  const result = job.returnvalue as EntryResult;
  expect(Object.values(result.members).map((m) => m.status)).toEqual(['succeeded', 'succeeded']);

  // The outputs are ONNX Runtime's for the same rows (sampled: the first and last rows of each member).
  const out = await redis.getBuffer(entryOutputsKey(prefix, queue, entryId));
  const scores = tensorData(result.outputs[0]!, aligned(out as Buffer)) as Float32Array;
  expect(scores.length).toBe(total);
  const session = await ort.InferenceSession.create(bytes);
  try {
    for (const row of [0, 1, ROWS[0]! - 1, ROWS[0]!, total - 1]) {
      const feed = new ort.Tensor('float32', features.slice(row * F, (row + 1) * F), [1, F]);
      const want = (await session.run({ features: feed })).score!.data as Float32Array;
      expect(scores[row]).toBeCloseTo(want[0]!, 5);
    }
  } finally {
    await session.release();
  }
  await until('the inputs key to be deleted once the entry completed', async () =>
    (await redis.exists(entryInputsKey(prefix, queue, entryId))) === 0 ? true : undefined,
  );
}, 300_000);
