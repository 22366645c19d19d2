/**
 * The shared pool store on a real Redis, beside the deployment store: revisions, history, and
 * the two references that must hold together — a deployment joins only a pool that exists, and
 * a pool goes only when no deployment names it — also when a join and a delete race. Each test
 * has its own prefix and deletes its keys.
 */
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { redisPrefixes, testServices } from '../../test/support/services.ts';
import type { SharedPoolInput } from '../contracts/shared-pool.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { closeRedis, createRedis } from '../redis/client.ts';
import { deploymentsKey, sharedPoolsKey } from '../redis/keys.ts';
import { applyChange, createDeploymentStore } from './deployment-store.ts';
import { createSharedPoolStore } from './pool-store.ts';

const redis = createRedis(testServices().redisUrl);
const prefixes = redisPrefixes(redis);

afterEach(async () => {
  await prefixes.cleanup();
});

afterAll(async () => {
  await closeRedis(redis);
});

let tick = Date.parse('2024-05-01T00:00:00.000Z');
function stores() {
  const prefix = prefixes.take('pools');
  const now = () => (tick += 1000);
  return { prefix, pools: createSharedPoolStore(redis, prefix, { now }), deployments: createDeploymentStore(redis, prefix, { now }) };
}

const gpu: SharedPoolInput = { name: 'gpu-a', max: 3, min: 1, standby: 1, memoryMb: 2048 };
const scorer = { model: 'scorer', version: '1', min: 1, max: 2, standby: 0 };

async function refusal(promise: Promise<unknown>): Promise<InvalidInputError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!(err instanceof InvalidInputError)) throw new Error(`expected a refusal, got ${String(err)}`);
  return err;
}

describe('shared pool store', () => {
  it('writes revisions, keeps createdAt, and lists by name', async () => {
    const { pools } = stores();
    const first = await pools.put(gpu);
    expect(first).toMatchObject({ ...gpu, revision: 1 });
    expect(first.createdAt).toBe(first.updatedAt);
    const second = await pools.update('gpu-a', (current) => ({ ...(current ?? gpu), standby: 0 }));
    expect(second).toMatchObject({ standby: 0, revision: 2, createdAt: first.createdAt });
    expect(second.updatedAt).not.toBe(first.updatedAt);
    await pools.put({ ...gpu, name: 'cpu' });
    expect((await pools.list()).map((p) => p.name)).toEqual(['cpu', 'gpu-a']);
    expect((await pools.history('gpu-a')).map((p) => p.revision)).toEqual([2, 1]);
    expect(await pools.get('gpu-a')).toEqual(second);
    expect(await pools.get('nope')).toBeNull();
  });

  it('refuses a bad config or a stale revision, writing nothing', async () => {
    const { pools } = stores();
    const bad = await refusal(pools.put({ ...gpu, min: 9 }));
    expect(bad).toMatchObject({ code: 'invalid_pool', status: 400 });
    expect(bad.message).toMatch(/min \(9\) is above max \(3\)/);
    expect(await refusal(pools.put({ ...gpu, name: 'GPU' }))).toMatchObject({ code: 'invalid_pool' });
    expect(await pools.list()).toEqual([]);
    await pools.put(gpu);
    const stale = await refusal(pools.put({ ...gpu, max: 5 }, { ifRevision: 0 }));
    expect(stale).toMatchObject({ code: 'revision_conflict', status: 409 });
    expect(await pools.get('gpu-a')).toMatchObject({ max: 3, revision: 1 });
    expect(await pools.put({ ...gpu, max: 5 }, { ifRevision: 1 })).toMatchObject({ max: 5, revision: 2 });
  });

  it('a deployment joins only a pool that exists; the pool goes only when no deployment names it', async () => {
    const { pools, deployments } = stores();
    const missing = await refusal(deployments.put({ ...scorer, pool: 'gpu-a' }));
    expect(missing).toMatchObject({ code: 'pool_not_found', status: 422 });
    expect(missing.message).toMatch(/pool gpu-a, which does not exist: create it first \(warmpool pool set gpu-a --max N/);
    expect(await deployments.get('scorer')).toBeNull();

    await pools.put(gpu);
    expect(await deployments.put({ ...scorer, pool: 'gpu-a' })).toMatchObject({ pool: 'gpu-a', revision: 1 });
    await deployments.put({ ...scorer, model: 'ranker', pool: 'gpu-a' });
    await deployments.put({ ...scorer, model: 'own' });
    expect(await pools.members('gpu-a')).toEqual(['ranker', 'scorer']);

    const inUse = await refusal(pools.remove('gpu-a'));
    expect(inUse).toMatchObject({ code: 'pool_in_use', status: 409 });
    expect(inUse.message).toMatch(/pool gpu-a still serves 2 deployments ranker, scorer: move them out first/);
    expect(await pools.get('gpu-a')).not.toBeNull();

    await deployments.update('scorer', (d) => applyChange('scorer', d, { pool: null }));
    await deployments.remove('ranker');
    expect(await deployments.get('scorer')).not.toHaveProperty('pool');
    expect(await pools.remove('gpu-a')).toBe(true);
    expect(await pools.remove('gpu-a')).toBe(false);
    expect(await pools.get('gpu-a')).toBeNull();

    // A rollback to the revision that named the pool cannot bring the reference back.
    expect(await refusal(deployments.rollback('scorer'))).toMatchObject({ code: 'pool_not_found' });
    expect(await deployments.get('scorer')).toMatchObject({ revision: 2 });

    // Revisions continue across a delete; createdAt starts again.
    const again = await pools.put(gpu);
    expect(again.revision).toBe(2);
    expect(again.createdAt).toBe(again.updatedAt);
  });

  it('a deployment record from before pools reads as its own pool, and its next write keeps it so', async () => {
    const { prefix, pools, deployments } = stores();
    await redis.hset(deploymentsKey(prefix), 'old', JSON.stringify({ model: 'old', version: '1', min: 1, max: 1, standby: 0 }));
    expect(await deployments.get('old')).not.toHaveProperty('pool');
    await pools.put(gpu);
    expect(await pools.members('gpu-a')).toEqual([]);
    expect(await deployments.update('old', (d) => applyChange('old', d, { max: 2 }))).not.toHaveProperty('pool');
  });

  it('a join racing a delete never leaves a deployment naming a pool that is gone', async () => {
    const { prefix, pools, deployments } = stores();
    for (let round = 0; round < 20; round++) {
      await pools.put(gpu);
      const model = `m${round}`;
      await Promise.allSettled([deployments.put({ ...scorer, model, pool: 'gpu-a' }), pools.remove('gpu-a')]);
      const joined = (await deployments.get(model))?.pool === 'gpu-a';
      const exists = (await redis.hexists(sharedPoolsKey(prefix), 'gpu-a')) === 1;
      expect(!joined || exists).toBe(true);
      if (joined) await deployments.remove(model);
      await pools.remove('gpu-a');
    }
  });
});
