/**
 * The caps on bulk runs not yet ended (issue 33, attack 5), on the real API, Redis and S3 server:
 * MAX_ACTIVE_BULK_RUNS_PER_TENANT (4 here, the default) → 429 too_many_bulk_runs while another
 * tenant still starts; MAX_ACTIVE_BULK_RUNS (6 here) → 503 too_many_bulk_runs with Retry-After;
 * a slot comes back when a run ends (a cancel here) and when its record says it ended without
 * the end script having given it back (self-healing). No driver runs: started runs stay running.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { bulkActiveRunsKey, bulkRunKey } from '../infra/redis/keys.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { TEST_BUCKET, testBulkPrefix, uniqueId } from './support/services.ts';
import { KEY_A, KEY_B, startStack, type TestStack } from './support/stack.ts';

const MODEL = 'caps-model';
let stack: TestStack;
let redis: RedisClient;
let n = 0;

async function inputFor(tenant: string): Promise<{ input: string; output: string }> {
  const base = `${testBulkPrefix(stack.config.s3.prefix, tenant)}${uniqueId(`run${n++}`)}`;
  const s3 = createS3ObjectStore(stack.config.s3);
  await s3.put(`${base}/in/rows.jsonl`, `${JSON.stringify({ id: 1, features: [1, 2, 3, 4] })}\n`);
  s3.close();
  return { input: `s3://${TEST_BUCKET}/${base}/in/`, output: `s3://${TEST_BUCKET}/${base}/out/` };
}

async function start(key: string, tenant: string, runId?: string): Promise<Response> {
  const body = { model: MODEL, ...(await inputFor(tenant)), ...(runId ? { runId } : {}) };
  return stack.call('/v1/bulk-runs', { method: 'POST', body: JSON.stringify(body), key });
}

async function started(key: string, tenant: string): Promise<string> {
  const res = await start(key, tenant);
  const body = (await res.json()) as { id: string };
  expect(res.status, JSON.stringify(body)).toBe(202);
  return body.id;
}

async function refused(res: Response, status: number): Promise<string> {
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(res.status, JSON.stringify(body)).toBe(status);
  expect(body.error.code).toBe('too_many_bulk_runs');
  return body.error.message;
}

const activeOf = (tenant?: string) => redis.zcard(bulkActiveRunsKey(stack.config.queuePrefix, tenant));

beforeAll(async () => {
  stack = await startStack({ MAX_ACTIVE_BULK_RUNS: '6' });
  redis = createRedis(stack.config.redisUrl);
  await stack.registry.publish({ name: MODEL, version: '1', bytes: buildMlpModel({ features: 4, hidden: 8, layers: 1 }), maxBatch: 8 });
  await stack.deployments.put({ model: MODEL, version: '1', min: 0, max: 1, standby: 0 });
}, 120_000);

afterAll(async () => {
  if (redis) await closeRedis(redis);
  await stack?.close();
});

describe('active bulk run caps', () => {
  const a: string[] = [];
  const b: string[] = [];

  it("a tenant's 5th run is 429 too_many_bulk_runs, naming the limit and what to do; another tenant still starts", async () => {
    for (let i = 0; i < 4; i++) a.push(await started(KEY_A, 'tenant-a'));
    const message = await refused(await start(KEY_A, 'tenant-a'), 429);
    expect(message).toMatch(/tenant-a has 4 bulk runs not yet ended/);
    expect(message).toMatch(/MAX_ACTIVE_BULK_RUNS_PER_TENANT \(4\)/);
    expect(message).toMatch(/wait for one to end or cancel one/);
    b.push(await started(KEY_B, 'tenant-b'));
    expect(await activeOf('tenant-a')).toBe(4);
    expect(await activeOf()).toBe(5);
  });

  it('resuming a running run by its id does not count it twice', async () => {
    const res = await stack.call(`/v1/bulk-runs/${a[0]}`, { key: KEY_A });
    const run = (await res.json()) as { input: string; output: string };
    const again = await stack.call('/v1/bulk-runs', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({ model: MODEL, input: run.input, output: run.output, runId: a[0] }),
    });
    expect(again.status).toBe(200);
    expect(await activeOf('tenant-a')).toBe(4);
  });

  it('past the overall cap a start is 503 too_many_bulk_runs with Retry-After, whoever asks', async () => {
    b.push(await started(KEY_B, 'tenant-b'));
    const res = await start(KEY_B, 'tenant-b');
    expect(res.headers.get('retry-after')).toBe('30');
    expect(await refused(res, 503)).toMatch(/6 bulk runs of all tenants.*MAX_ACTIVE_BULK_RUNS \(6\)/);
    // Nothing was recorded for the refused start.
    expect(await activeOf()).toBe(6);
  });

  it('a cancel gives the slot back at once', async () => {
    const res = await stack.call(`/v1/bulk-runs/${b[1]}`, { method: 'DELETE', key: KEY_B });
    expect(res.status).toBe(200);
    expect(await activeOf('tenant-b')).toBe(1);
    b[1] = await started(KEY_B, 'tenant-b');
  });

  it('a run that ended without giving its slot back (a crash) is dropped from the count at the next refusal', async () => {
    // The record says canceled, but the end script never ran: the slot leaked.
    await redis.hset(bulkRunKey(stack.config.queuePrefix, `tenant-a/${a[1]}`), 'status', 'canceled');
    expect(await activeOf('tenant-a')).toBe(4);
    a[1] = await started(KEY_A, 'tenant-a');
    expect(await activeOf('tenant-a')).toBe(4);
  });

  it('a canceled run started again with its id stays canceled and takes no slot', async () => {
    const cancel = await stack.call(`/v1/bulk-runs/${a[2]}`, { method: 'DELETE', key: KEY_A });
    expect(cancel.status).toBe(200);
    expect(await activeOf('tenant-a')).toBe(3);
    const run = (await (await stack.call(`/v1/bulk-runs/${a[2]}`, { key: KEY_A })).json()) as { input: string; output: string };
    const res = await stack.call('/v1/bulk-runs', {
      method: 'POST',
      key: KEY_A,
      body: JSON.stringify({ model: MODEL, input: run.input, output: run.output, runId: a[2] }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { status: string }).status).toBe('canceled');
    expect(((await (await stack.call(`/v1/bulk-runs/${a[2]}`, { key: KEY_A })).json()) as { status: string }).status).toBe('canceled');
    expect(await activeOf('tenant-a')).toBe(3);
    // The slot it gave back is a new run's.
    a.push(await started(KEY_A, 'tenant-a'));
    expect(await activeOf('tenant-a')).toBe(4);
  });
});
