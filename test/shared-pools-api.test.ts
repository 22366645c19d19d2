/**
 * The shared pool routes over real HTTP (the API as api/main.ts builds it, real Redis, a real S3
 * registry): set, merge, list, read with members, a deployment joining and leaving, delete while
 * in use, the admin check, and a table of bad requests that must each be a 4xx naming the problem
 * and change nothing.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startTestApi, type TestApi } from './support/api-app.ts';
import { testEnv } from './support/services.ts';
import { KEY_A, KEY_B } from './support/stack.ts';

let config: Config;
let api: TestApi;

beforeAll(async () => {
  config = loadConfig(testEnv());
  const store = createS3ObjectStore(config.s3);
  try {
    const bytes = buildMlpModel({ features: 4, hidden: 4, layers: 1 });
    for (const name of ['scorer', 'ranker'])
      await createModelRegistry({ store, prefix: config.s3.prefix }).publish({ name, version: '1', bytes });
  } finally {
    store.close();
  }
  api = await startTestApi(config);
});

afterAll(async () => {
  await api?.close();
  const redis = createRedis(config.redisUrl);
  for await (const keys of scanKeys(redis, `${config.queuePrefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
  const store = createS3ObjectStore(config.s3);
  for (const o of await store.list(`${config.s3.prefix}/`)) await store.delete(o.key);
  store.close();
});

type Json = Record<string, unknown>;

async function call(method: string, path: string, body?: unknown, key: string = KEY_A): Promise<{ status: number; json: Json }> {
  const res = await api.call(path, { method, key, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { status: res.status, json: (await res.json()) as Json };
}

describe('shared pool routes', () => {
  // The tests in this block build on each other: one pool's life, in order.
  it('creates a pool with the defaults, then merges a change', async () => {
    const created = await call('PUT', '/v1/pools/long-tail', { max: 3 });
    expect(created.status).toBe(200);
    expect(created.json).toMatchObject({ name: 'long-tail', max: 3, min: 1, standby: 0, memoryMb: 1024, revision: 1, deployments: [] });
    const changed = await call('PUT', '/v1/pools/long-tail', { standby: 1, memoryMb: 2048, ifRevision: 1 });
    expect(changed.json).toMatchObject({ max: 3, min: 1, standby: 1, memoryMb: 2048, revision: 2, createdAt: created.json.createdAt });
    expect((await call('GET', '/v1/pools')).json).toMatchObject({ pools: [{ name: 'long-tail', revision: 2 }] });
  });

  it('a deployment joins with pool, is listed as a member, and the pool cannot go while it is', async () => {
    const joined = await call('PUT', '/v1/deployments/scorer', { version: '1', pool: 'long-tail' });
    expect(joined.status).toBe(200);
    expect(joined.json).toMatchObject({ model: 'scorer', pool: 'long-tail' });
    await call('PUT', '/v1/deployments/ranker', { version: '1' });
    expect((await call('GET', '/v1/deployments/ranker')).json).not.toHaveProperty('pool');
    expect((await call('GET', '/v1/pools/long-tail')).json).toMatchObject({ deployments: ['scorer'] });
    expect((await call('GET', '/v1/pools', undefined, KEY_B)).json).toMatchObject({ pools: [{ deployments: ['scorer'] }] });

    const refused = await call('DELETE', '/v1/pools/long-tail');
    expect(refused.status).toBe(409);
    expect(refused.json).toEqual({
      error: { code: 'pool_in_use', message: expect.stringMatching(/pool long-tail still serves deployment scorer: move it out first/) },
    });
    expect((await call('GET', '/v1/pools/long-tail')).status).toBe(200);
  });

  it('a deployment that leaves (pool: null) frees the pool to be deleted', async () => {
    const left = await call('PUT', '/v1/deployments/scorer', { pool: null });
    expect(left.status).toBe(200);
    expect(left.json).not.toHaveProperty('pool');
    expect(await call('DELETE', '/v1/pools/long-tail')).toEqual({ status: 200, json: { name: 'long-tail', deleted: true } });
    expect((await call('GET', '/v1/pools/long-tail')).status).toBe(404);
    expect((await call('GET', '/v1/pools')).json).toEqual({ pools: [] });
  });

  it('changes are for admin tenants; reads are for every tenant', async () => {
    await call('PUT', '/v1/pools/shared', { max: 2 });
    const put = await call('PUT', '/v1/pools/shared', { max: 4 }, KEY_B);
    expect(put.status).toBe(403);
    expect(put.json).toEqual({
      error: { code: 'forbidden', message: 'tenant tenant-b may not change shared pools: it is not in ADMIN_TENANTS' },
    });
    expect((await call('DELETE', '/v1/pools/shared', undefined, KEY_B)).status).toBe(403);
    expect((await call('GET', '/v1/pools/shared', undefined, KEY_B)).json).toMatchObject({ max: 2, revision: 1 });
    expect((await api.call('/v1/pools', { key: null })).status).toBe(401);
  });

  it.each<[string, string, string, unknown, number, string, RegExp]>([
    ['a new pool without max', 'PUT', '/v1/pools/fresh', { standby: 1 }, 400, 'invalid_pool', /a new pool needs max/],
    ['min above max', 'PUT', '/v1/pools/shared', { min: 5 }, 400, 'invalid_pool', /min \(5\) is above max \(2\)/],
    ['max 0', 'PUT', '/v1/pools/shared', { max: 0 }, 400, 'invalid_pool', /max must be an integer between 1 and 10000/],
    ['memory under the floor', 'PUT', '/v1/pools/shared', { memoryMb: 10 }, 400, 'invalid_pool', /memoryMb must be an integer between 64/],
    ['a negative standby', 'PUT', '/v1/pools/shared', { standby: -1 }, 400, 'invalid_body', /standby: /],
    ['an unknown field', 'PUT', '/v1/pools/shared', { maxWorkers: 3 }, 400, 'invalid_body', /maxWorkers/],
    ['an upper-case name', 'PUT', '/v1/pools/Shared', { max: 2 }, 400, 'invalid_pool', /invalid pool name "Shared": a pool name is 1–32/],
    ['the reserved name', 'PUT', '/v1/pools/none', { max: 2 }, 400, 'invalid_pool', /"none" is reserved/],
    ['a stale revision', 'PUT', '/v1/pools/shared', { max: 3, ifRevision: 7 }, 409, 'revision_conflict', /at revision 1, not 7/],
    ['reading a missing pool', 'GET', '/v1/pools/nope', undefined, 404, 'pool_not_found', /pool nope does not exist/],
    ['deleting a missing pool', 'DELETE', '/v1/pools/nope', undefined, 404, 'pool_not_found', /pool nope does not exist/],
    [
      'joining a missing pool',
      'PUT',
      '/v1/deployments/ranker',
      { pool: 'nope' },
      422,
      'pool_not_found',
      /names pool nope, which does not exist: create it first/,
    ],
    ['joining a bad pool name', 'PUT', '/v1/deployments/ranker', { pool: 'No Pool' }, 400, 'invalid_deployment', /invalid pool name/],
    ['a pool that is not a string', 'PUT', '/v1/deployments/ranker', { pool: 3 }, 400, 'invalid_body', /pool: /],
  ])('%s → %s %s answers %i %s, changing nothing', async (_, method, path, body, status, code, message) => {
    const before = [(await call('GET', '/v1/pools')).json, (await call('GET', '/v1/deployments')).json];
    const res = await call(method, path, body);
    expect(res.status).toBe(status);
    expect(res.json).toEqual({ error: { code, message: expect.stringMatching(message) } });
    expect([(await call('GET', '/v1/pools')).json, (await call('GET', '/v1/deployments')).json]).toEqual(before);
  });
});
