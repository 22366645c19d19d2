/**
 * A shared pool end to end, wired as `warmpool dev` wires it: the scaler (with its pool
 * controller) and the local provider forking real `warmpool worker --pool` processes, two API
 * processes' worth of API, real Redis/S3 and ONNX Runtime. The pool boots a standby holding no
 * model; 50 concurrent first requests for a model no worker holds, split over two APIs, are all
 * queued (never refused), cause exactly one placement (counted from every holdings write the
 * workers were sent), and every answer equals ONNX Runtime's for that model. No assertion here is
 * about time: every wait is "eventually".
 */

import { afterAll, beforeAll, expect, it } from 'vitest';
import { type HoldingsMessage, parseHoldings } from '../infra/fleet/pool-holdings.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { holdingsChannel } from '../infra/redis/keys.ts';
import { createPoolDecisionLog } from '../infra/scaler/pool-decisions.ts';
import { buildDistinctMlpModels } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { type PoolStack, startPoolStack } from './support/pool-stack.ts';
import { KEY_A, type TestStack, waitForJob } from './support/stack.ts';
import { until } from './support/until.ts';

const F = 16;
const POOL = 'tail';
let pool: PoolStack;
let otherApi: TestApi;
let subscriber: RedisClient;
/** Every holdings write any worker was sent, in order. */
const writes: Array<{ workerId: string; message: HoldingsMessage }> = [];

beforeAll(async () => {
  const models = buildDistinctMlpModels(2, { features: F, hidden: 32, firstSeed: 3100 });
  pool = await startPoolStack({
    pool: POOL,
    // At most one worker: every copy of a model is then a second load, which this test would count.
    config: { max: 1, min: 1, standby: 0, memoryMb: 512 },
    models: models.map((bytes, i) => ({ name: `tail-${i}`, bytes })),
    env: { SCALER_TICK_MS: '300', HEARTBEAT_INTERVAL_MS: '300', HEARTBEAT_TTL_MS: '3000', WARMUP_ITERATIONS: '1', INTRA_OP_THREADS: '1' },
  });
  subscriber = createRedis(pool.stack.config.redisUrl);
  const bell = holdingsChannel(pool.stack.config.queuePrefix, '');
  subscriber.on('pmessage', (_pattern: string, channel: string, body: string) => {
    const message = parseHoldings(body);
    if (message) writes.push({ workerId: channel.slice(bell.length), message });
  });
  await subscriber.psubscribe(`${bell}*`);
  otherApi = await startTestApi(pool.stack.config);
}, 120_000);

afterAll(async () => {
  await otherApi?.close();
  if (subscriber) await closeRedis(subscriber);
  await pool?.close();
});

const row = (i: number) => Array.from({ length: F }, (_, k) => Math.sin(i + k));

async function submit(call: TestStack['call'], model: string, i: number): Promise<string> {
  const res = await call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    key: KEY_A,
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: row(i) }], cache: false }),
  });
  if (res.status !== 202) throw new Error(`submit to ${model} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { id: string }).id;
}

/** How many times a worker was told to hold `model` when its previous holdings did not list it: the placements. */
function placements(model: string): number {
  const last = new Map<string, boolean>();
  let count = 0;
  for (const { workerId, message } of writes) {
    const has = message.models.some((m) => m.model === model);
    if (has && !last.get(workerId)) count++;
    last.set(workerId, has);
  }
  return count;
}

const poolBeats = () => pool.beats();

it('50 concurrent first requests over two APIs are all queued, cause one placement, and are answered by that model', async () => {
  const standby = await until(
    'a standby pool worker holding nothing',
    async () => (await poolBeats()).find((b) => b.state === 'standby' && (b.models ?? []).length === 0),
    120_000,
  );
  expect(placements('tail-0')).toBe(0);

  const calls = [pool.stack.call.bind(pool.stack), otherApi.call.bind(otherApi)];
  const ids = await Promise.all(Array.from({ length: 50 }, (_, i) => submit(calls[i % 2] as TestStack['call'], 'tail-0', i)));
  const jobs = await Promise.all(ids.map((id) => waitForJob(pool.stack, id, 120_000)));
  for (const [i, job] of jobs.entries()) {
    expect(job.status).toBe('succeeded');
    const score = (job.outputs as Array<{ name: string; data: number[] }>).find((o) => o.name === 'score')?.data[0];
    expect(score).toBeCloseTo(await pool.expectedScore('tail-0', row(i)), 5);
  }
  expect(placements('tail-0')).toBe(1);
  const holders = (await poolBeats()).filter((b) => b.models?.some((m) => m.model === 'tail-0' && m.state === 'active'));
  expect(holders.map((b) => b.id)).toEqual([standby.id]);
  expect((await poolBeats()).length).toBeLessThanOrEqual(1);

  // The model no worker asked for stays unplaced, and the decisions explain the pool.
  expect(placements('tail-1')).toBe(0);
  const [latest] = await createPoolDecisionLog(pool.redis, pool.stack.config.queuePrefix).recent(POOL, 1);
  expect(latest?.models.map((m) => m.model).sort()).toEqual(['tail-0@1', 'tail-1@1']);
}, 240_000);
