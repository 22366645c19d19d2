// The delivery store against a real Redis: idempotent enqueue, exclusive claims, leases,
// stale claims, dead letters, listing, replay, tenant isolation, and tenants' fair shares.
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../../infra/redis/client.ts';
import { webhookDueKey, webhookDueTenantsKey } from '../../infra/redis/keys.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { createDeliveryStore, type DeliveryStore, type NewDelivery } from './delivery-store.ts';

describe('createDeliveryStore', () => {
  const redis = createRedis(testServices().redisUrl);
  const prefixes: string[] = [];
  let prefix: string;
  let store: DeliveryStore;

  const delivery = (id: string, tenant = 'tenant-a'): NewDelivery => ({
    id,
    tenant,
    jobId: `job_${id}`,
    event: 'job.succeeded',
    url: 'https://hooks.example.com/x',
    payload: JSON.stringify({ id }),
  });
  const attempt = (at: number, status?: number) => ({ at, durationMs: 3, ...(status ? { status } : { error: 'ECONNREFUSED' }) });

  beforeEach(() => {
    prefix = uniqueId('ds');
    prefixes.push(prefix);
    store = createDeliveryStore(redis, prefix, { leaseMs: 1_000, retentionMs: 10_000 });
  });

  afterAll(async () => {
    for (const p of prefixes) {
      for await (const keys of scanKeys(redis, `${p}:*`)) await deleteMany(redis, keys);
    }
    await closeRedis(redis);
  });

  it('enqueues once per id, whatever the repeats', async () => {
    expect(await store.enqueue(delivery('m1'), 100)).toBe(true);
    expect(await store.enqueue({ ...delivery('m1'), payload: 'changed' }, 200)).toBe(false);
    const d = await store.get('m1');
    expect(d).toMatchObject({ id: 'm1', state: 'pending', attempts: [], nextAttemptAt: 100, payload: '{"id":"m1"}' });
    expect(await store.claimDue(1_000, 10)).toHaveLength(1);
  });

  it('claims only what is due, each delivery by one claimer at a time', async () => {
    for (const id of ['a', 'b', 'c', 'd']) await store.enqueue(delivery(id), 100);
    await store.enqueue(delivery('later'), 5_000);
    const [one, two] = await Promise.all([
      store.claimDue(200, 10),
      createDeliveryStore(redis, prefix, { leaseMs: 1_000 }).claimDue(200, 10),
    ]);
    const ids = [...(one ?? []), ...(two ?? [])].map((d) => d.id).sort();
    expect(ids).toEqual(['a', 'b', 'c', 'd']);
    // Held by their lease: nobody else gets them before it ends.
    expect(await store.claimDue(300, 10)).toEqual([]);
  });

  it('hands a delivery out again when its lease ends, and ignores the stale claimant', async () => {
    await store.enqueue(delivery('m'), 0);
    const [first] = await store.claimDue(0, 1);
    const [second] = await store.claimDue(1_001, 1);
    expect(first?.id).toBe('m');
    expect(second?.id).toBe('m');
    if (!first || !second) return;
    expect(await store.recordAttempt(first, attempt(0, 200), { state: 'succeeded' }, 10)).toBe(false);
    expect(await store.recordAttempt(second, attempt(1_001, 200), { state: 'succeeded' }, 1_010)).toBe(true);
    expect(await store.get('m')).toMatchObject({ state: 'succeeded', attempts: [{ at: 1_001, status: 200 }], nextAttemptAt: null });
  });

  it('keeps a retried delivery pending until its next time, then dead-letters it', async () => {
    await store.enqueue(delivery('r'), 0);
    const [c1] = await store.claimDue(0, 5);
    if (!c1) throw new Error('not claimed');
    await store.recordAttempt(c1, attempt(0, 500), { state: 'pending', nextAttemptAt: 500 }, 5);
    expect(await store.claimDue(499, 5)).toEqual([]);
    const [c2] = await store.claimDue(500, 5);
    if (!c2) throw new Error('not claimed again');
    expect(c2.attempts).toHaveLength(1);
    await store.recordAttempt(c2, attempt(500), { state: 'dead', reason: 'retries_exhausted' }, 505);
    expect(await store.claimDue(10_000, 5)).toEqual([]);
    const dead = await store.list('tenant-a', 'dead', 10, 600);
    expect(dead.map((d) => [d.id, d.reason, d.attempts.length])).toEqual([['r', 'retries_exhausted', 2]]);
    expect(await store.list('tenant-a', 'pending', 10, 600)).toEqual([]);
    expect(await redis.pttl(`${prefix}:{webhooks}:delivery:r`)).toBeGreaterThan(0);
  });

  it('lists newest first, per tenant, and every state when none is named', async () => {
    await store.enqueue(delivery('x1'), 1);
    await store.enqueue(delivery('x2'), 2);
    await store.enqueue(delivery('y1', 'tenant-b'), 3);
    expect((await store.list('tenant-a', 'pending', 10, 10)).map((d) => d.id)).toEqual(['x2', 'x1']);
    expect((await store.list('tenant-a', undefined, 1, 10)).map((d) => d.id)).toEqual(['x2']);
    expect((await store.list('tenant-b', undefined, 10, 10)).map((d) => d.id)).toEqual(['y1']);
  });

  it('replays a dead delivery as new, only for its own tenant, never while pending', async () => {
    await store.enqueue(delivery('z'), 0);
    expect(await store.replay('tenant-a', 'z', 1)).toBe('pending');
    const [c] = await store.claimDue(0, 1);
    if (!c) throw new Error('not claimed');
    await store.recordAttempt(c, attempt(0), { state: 'dead', reason: 'retries_exhausted' }, 2);
    expect(await store.replay('tenant-b', 'z', 3)).toBe('not_found');
    expect(await store.replay('tenant-a', 'nope', 3)).toBe('not_found');
    expect(await store.replay('tenant-a', 'z', 3)).toBe('replayed');
    expect(await store.get('z')).toMatchObject({ state: 'pending', attempts: [], nextAttemptAt: 3 });
    expect(await store.list('tenant-a', 'dead', 10, 4)).toEqual([]);
    expect(await redis.pttl(`${prefix}:{webhooks}:delivery:z`)).toBe(-1);
    expect((await store.claimDue(3, 1)).map((d) => d.id)).toEqual(['z']);
  });

  it('trims finished deliveries past retention from the lists', async () => {
    await store.enqueue(delivery('old'), 0);
    const [c] = await store.claimDue(0, 1);
    if (!c) throw new Error('not claimed');
    await store.recordAttempt(c, attempt(0, 200), { state: 'succeeded' }, 10);
    expect(await store.list('tenant-a', 'succeeded', 10, 5_000)).toHaveLength(1);
    expect(await store.list('tenant-a', 'succeeded', 10, 20_000)).toEqual([]);
  });

  describe('fair shares', () => {
    const share = (perTenant: number, inFlight: Record<string, number> = {}) => ({
      perTenant,
      inFlight: new Map(Object.entries(inFlight)),
    });
    const tenantsOf = (claimed: Array<{ tenant: string }>) => {
      const counts: Record<string, number> = {};
      for (const d of claimed) counts[d.tenant] = (counts[d.tenant] ?? 0) + 1;
      return counts;
    };

    it("leaves a tenant at its share where it is, and hands others' due deliveries out past its backlog", async () => {
      // B's backlog is due first and is long; A's one delivery comes after all of it.
      for (let i = 0; i < 500; i++) await store.enqueue(delivery(`b${i}`, 'tenant-b'), i);
      await store.enqueue(delivery('a0', 'tenant-a'), 1_000);
      const claimed = await store.claimDue(2_000, 16, share(4, { 'tenant-b': 4 }));
      expect(claimed.map((d) => d.id)).toEqual(['a0']);
      // B's deliveries are still due, unclaimed, with no attempt counted.
      expect(await store.get('b0')).toMatchObject({ state: 'pending', attempts: [] });
      expect((await store.claimDue(2_000, 16, share(4, { 'tenant-b': 1 }))).map((d) => d.id)).toEqual(['b0', 'b1', 'b2']);
    });

    it('gives a tenant no more than its share less what it has in flight', async () => {
      for (let i = 0; i < 20; i++) await store.enqueue(delivery(`b${i}`, 'tenant-b'), 0);
      expect(tenantsOf(await store.claimDue(10, 16, share(4)))).toEqual({ 'tenant-b': 4 });
      expect(tenantsOf(await store.claimDue(10, 16, share(4, { 'tenant-b': 3 })))).toEqual({ 'tenant-b': 1 });
      expect(await store.claimDue(10, 16, share(4, { 'tenant-b': 4 }))).toEqual([]);
      // Without a share, as before: the limit alone.
      expect(await store.claimDue(10, 16)).toHaveLength(15);
    });

    it('takes one delivery per tenant per round', async () => {
      for (const t of ['t1', 't2', 't3']) for (let i = 0; i < 5; i++) await store.enqueue(delivery(`${t}-${i}`, t), i);
      const claimed = await store.claimDue(100, 7, share(4));
      expect(claimed.map((d) => d.tenant)).toEqual(['t1', 't2', 't3', 't1', 't2', 't3', 't1']);
      expect(tenantsOf(await store.claimDue(100, 16, share(4, tenantsOf(claimed))))).toEqual({ t1: 1, t2: 2, t3: 2 });
    });

    it('forgets a tenant once it has nothing pending', async () => {
      await store.enqueue(delivery('only', 'tenant-c'), 0);
      const [c] = await store.claimDue(0, 1, share(4));
      if (!c) throw new Error('not claimed');
      expect(await redis.zscore(webhookDueTenantsKey(prefix), 'tenant-c')).not.toBeNull();
      await store.recordAttempt(c, attempt(0, 200), { state: 'succeeded' }, 5);
      expect(await redis.zscore(webhookDueTenantsKey(prefix), 'tenant-c')).toBeNull();
    });

    it('drains the one due set of before into the per-tenant sets, keeping each due time', async () => {
      for (const [id, at] of [
        ['old-1', 0],
        ['old-2', 500],
      ] as const) {
        await store.enqueue(delivery(id), at);
        // As the store of before left them: every tenant's ids in one set.
        await redis.zrem(`${prefix}:{webhooks}:due:tenant-a`, id);
        await redis.zadd(webhookDueKey(prefix), at, id);
      }
      await redis.zrem(webhookDueTenantsKey(prefix), 'tenant-a');
      expect((await store.claimDue(10, 16, share(4))).map((d) => d.id)).toEqual(['old-1']);
      expect(await redis.zcard(webhookDueKey(prefix))).toBe(0);
      expect((await store.claimDue(500, 16, share(4))).map((d) => d.id)).toEqual(['old-2']);
    });
  });
});
