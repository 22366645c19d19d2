/**
 * A tenant's stored-bytes budget (MAX_STORED_BYTES_PER_TENANT) and a full Redis, on the real
 * stack: the API in-process, a real worker process on real ONNX Runtime, and a redis-server of
 * this file's own (so INFO used_memory is this stack's alone, and its maxmemory can be lowered).
 * The model is a lookup whose outputs are twice its inputs (`idx` INT64 [b,1] → `row` FP32 [b,1,4]).
 * - a tenant whose kept inputs reach its budget is refused 429 storage_budget_exhausted (with
 *   Retry-After) before anything is written, while another tenant is accepted; Redis's memory
 *   stays within the budgets however many more it sends;
 * - a served job's inputs are released when it ends and its outputs are charged (past the
 *   budget: kept, and the next submit refused); the charges free themselves at their expiry;
 * - a Redis at maxmemory (noeviction) answers submits 503 storage_full, never 500, and the jobs
 *   accepted before are all served once it has room again.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../infra/kernel/clock.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { createStoredBytes } from '../infra/redis/stored-bytes.ts';
import { findRedisServer, type RedisServerHandle, startRedisServer } from '../scripts/dev/redis-server.ts';
import { buildGatherModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi } from './support/api-app.ts';
import { KEY_A, KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

const MODEL = 'lookup';
/** Deployed at min 0 with no worker: its jobs stay queued, their inputs kept. */
const IDLE = 'lookup-idle';
/** Rows per job: the most MAX_ROWS_PER_JOB allows, 80 000 bytes of INT64 inputs. */
const ROWS = 10_000;
const INPUT_BYTES = ROWS * 8;
const BUDGET = 1024 * 1024;

let server: RedisServerHandle;
let dir: string;
let stack: TestStack;
let redis: RedisClient;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'stored-bytes-'));
  const binary = await findRedisServer();
  if (!binary) throw new Error('redis-server not found');
  server = await startRedisServer({ binary, dir, extraArgs: ['--maxmemory', '256mb', '--maxmemory-policy', 'noeviction'] });
  stack = await startStack({
    REDIS_URL: server.url,
    MAX_STORED_BYTES_PER_TENANT: String(BUDGET),
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '200',
  });
  redis = createRedis(server.url);
  const bytes = buildGatherModel();
  await stack.registry.publish({ name: MODEL, version: '1', bytes, maxBatch: 64 });
  await stack.registry.publish({ name: IDLE, version: '1', bytes, maxBatch: 64 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 1, max: 1, standby: 0 });
  await stack.deployments.put({ model: IDLE, version: '1', min: 0, max: 1, standby: 0 });
  await stack.startWorker(MODEL, '1');
  await stack.waitForWorkers(MODEL, 'active');
}, 90_000);

afterAll(async () => {
  await stack?.close();
  if (redis) await closeRedis(redis);
  await server?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/**
 * A job of `rows` lookups of row 0 (the JSON is ~2 bytes a row; the packed inputs 8). Not from
 * the result cache: every job runs and stores its outputs.
 */
const lookups = (rows: number) => ({
  inputs: [{ name: 'idx', datatype: 'INT64', shape: [rows, 1], data: new Array(rows).fill(0) }],
  cache: false,
});

type Reply = { status: number; retryAfter: string | null; body: { id?: string; error?: { code: string; message: string } } };

async function post(model: string, body: unknown, key = KEY_A, via: { call: TestStack['call'] } = stack): Promise<Reply> {
  const res = await via.call(`/v1/models/${model}/jobs`, { method: 'POST', body: JSON.stringify(body), key });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Reply['body'] };
}

async function usedMemory(): Promise<number> {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)?.[1]);
}

const ledger = () =>
  createStoredBytes(redis, { prefix: stack.config.queuePrefix, ttlMs: stack.config.jobs.retentionS * 1000, clock: systemClock });

describe('the stored-bytes budget', () => {
  it('refuses a tenant at its budget with 429 storage_budget_exhausted while another is accepted; Redis stays within the budgets', async () => {
    const before = await usedMemory();
    const accepted: string[] = [];
    let refused: Reply | undefined;
    // 13 jobs of 80 000 bytes fit in 1 MiB; the 14th does not, nor any of the 200 after it.
    const attempts = 214;
    for (let i = 0; i < attempts; i++) {
      const res = await post(IDLE, lookups(ROWS), KEY_B);
      if (res.status === 202) accepted.push(res.body.id as string);
      else refused ??= res;
      if (res.status !== 202) expect([res.status, res.body.error?.code]).toEqual([429, 'storage_budget_exhausted']);
    }
    expect(accepted).toHaveLength(Math.floor(BUDGET / INPUT_BYTES));
    expect(refused?.body.error?.message).toContain('MAX_STORED_BYTES_PER_TENANT');
    expect(refused?.body.error?.message).toContain('1.0 MiB');
    // Retry-After: when the oldest charge expires, a retention after it was taken.
    expect(Number(refused?.retryAfter)).toBeGreaterThan(stack.config.jobs.retentionS - 60);
    expect(Number(refused?.retryAfter)).toBeLessThanOrEqual(stack.config.jobs.retentionS);
    expect((await ledger().usage('tenant-b')).total).toBe(accepted.length * INPUT_BYTES);

    // Another tenant is not affected.
    const other = await post(IDLE, lookups(ROWS), KEY_A);
    expect(other.status).toBe(202);

    // Without the budget Redis would hold every attempt's inputs (214 × 80 000 = 17 MB); with it,
    // a budget.s worth and BullMQ.s records.
    const grown = (await usedMemory()) - before;
    expect(grown).toBeLessThan(2 * BUDGET + 1024 * 1024);
    expect(grown).toBeLessThan((attempts * INPUT_BYTES) / 4);

    // Canceled, a queued job stops counting once its entry ends (no worker serves IDLE here:
    // it is kept, with its inputs, until then), so the refusal still stands.
    expect((await stack.call(`/v1/jobs/${accepted[0]}`, { method: 'DELETE', key: KEY_B })).status).toBe(200);
    expect((await post(IDLE, lookups(ROWS), KEY_B)).status).toBe(429);
  });

  it("a served job's inputs are released and its outputs charged; outputs past the budget are kept and the next submit refused", async () => {
    // tenant-a holds one queued IDLE job from the test above; one more makes 160 000 bytes.
    expect((await post(IDLE, lookups(ROWS), KEY_A)).status).toBe(202);
    let kept = 2 * INPUT_BYTES;
    expect((await ledger().usage('tenant-a')).total).toBe(kept);
    // Each served job: its inputs charged at submit, released when it ends (in the worker's next
    // flush, within about a second); its outputs (10 000 rows × 4 FP32) charged when stored.
    const outputBytes = ROWS * 4 * 4;
    const served: string[] = [];
    for (;;) {
      const res = await post(MODEL, lookups(ROWS), KEY_A);
      if (kept + INPUT_BYTES > BUDGET) {
        expect([res.status, res.body.error?.code]).toEqual([429, 'storage_budget_exhausted']);
        break;
      }
      expect(res.status).toBe(202);
      served.push(res.body.id as string);
      expect((await waitForJob(stack, res.body.id as string)).status).toBe('succeeded');
      kept += outputBytes;
      await untilKept('tenant-a', kept);
    }
    // The last job's inputs fitted, its outputs did not: they are kept all the same (the work is
    // done), and the tenant's next submits are the ones refused.
    expect(served).toHaveLength(6);
    expect(kept).toBeGreaterThan(BUDGET);
    for (const id of served) expect((await waitForJob(stack, id)).outputs).toMatchObject([{ name: 'row', shape: [ROWS, 1, 4] }]);
  });

  it('the charges free themselves at their expiry (an API whose clock is a retention later)', async () => {
    const retentionMs = stack.config.jobs.retentionS * 1000;
    const later = { ...systemClock, now: () => Date.now() + retentionMs + 1000 };
    const api = await startTestApi(stack.config, {
      deps: {
        storedBytes: {
          ledger: createStoredBytes(redis, { prefix: stack.config.queuePrefix, ttlMs: retentionMs, clock: later }),
          maxPerTenant: BUDGET,
        },
      },
    });
    try {
      expect((await post(MODEL, lookups(ROWS), KEY_A)).status).toBe(429);
      expect((await post(IDLE, lookups(ROWS), KEY_B, api)).status).toBe(202);
      expect((await post(MODEL, lookups(ROWS), KEY_A, api)).status).toBe(202);
      // Only what was charged just now is left.
      expect((await ledger().usage('tenant-b')).total).toBe(INPUT_BYTES);
    } finally {
      await api.close();
    }
  });

  it('inputs alone larger than the budget are a 413 naming it', async () => {
    const api = await startTestApi(loadConfig({ ...stack.env, MAX_STORED_BYTES_PER_TENANT: String(INPUT_BYTES - 1) }));
    try {
      const res = await post(IDLE, lookups(ROWS), KEY_A, api);
      expect([res.status, res.body.error?.code]).toEqual([413, 'inputs_exceed_storage_budget']);
      expect(res.body.error?.message).toContain('MAX_STORED_BYTES_PER_TENANT');
    } finally {
      await api.close();
    }
  });
});

describe('Redis at maxmemory (noeviction)', () => {
  it('answers submits 503 storage_full with Retry-After, never 500; the jobs accepted before are all served once it has room', async () => {
    // Jobs accepted and waiting, then Redis full: nothing more may be written.
    const queuedJobs = async () => {
      const counts = await stack.withQueue(IDLE, '1', (q) => q.getJobCounts('waiting', 'prioritized'));
      return (counts.waiting ?? 0) + (counts.prioritized ?? 0);
    };
    const before = await queuedJobs();
    const waiting: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(IDLE, lookups(10), KEY_A);
      expect(res.status).toBe(202);
      waiting.push(res.body.id as string);
    }
    await redis.config('SET', 'maxmemory', String(await usedMemory()));
    try {
      await expect(redis.set(`${stack.config.queuePrefix}:probe`, 'x'.repeat(1024 * 1024))).rejects.toThrow(/^OOM/);
      for (const [model, key] of [
        [IDLE, KEY_A],
        [MODEL, KEY_B],
      ] as const) {
        const res = await post(model, lookups(10), key);
        expect([res.status, res.body.error?.code]).toEqual([503, 'storage_full']);
        expect(Number(res.retryAfter)).toBeGreaterThan(0);
      }
      // A read is served, or refused the same way when the rate limiter must write its bucket
      // (a local lease spares it most times): never a 500.
      const read = await stack.call(`/v1/jobs/${waiting[0]}`);
      const readBody = (await read.json()) as Reply['body'] & { status?: string };
      expect(read.status === 200 ? readBody.status : readBody.error?.code).toBe(read.status === 200 ? 'queued' : 'storage_full');
      // The accepted jobs are all still queued, and the worker serving MODEL stays up.
      expect(await queuedJobs()).toBe(before + waiting.length);
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      await redis.config('SET', 'maxmemory', '256mb');
    }
    await stack.startWorker(IDLE, '1');
    for (const id of waiting) expect(await waitForJob(stack, id)).toMatchObject({ status: 'succeeded' });
    // The worker that was serving all along serves again.
    const after = await post(MODEL, lookups(10), KEY_A);
    expect(after.status).toBe(202);
    expect(await waitForJob(stack, after.body.id as string)).toMatchObject({ status: 'succeeded' });
  }, 90_000);
});

/** Polls until the tenant's kept bytes are `bytes`; fails naming the last total seen. */
async function untilKept(tenant: string, bytes: number, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { total } = await ledger().usage(tenant);
    if (total === bytes) return;
    if (Date.now() > deadline) throw new Error(`${tenant} keeps ${total} bytes, not ${bytes}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
