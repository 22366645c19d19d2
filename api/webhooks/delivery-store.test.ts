// The delivery store against a real Redis: idempotent enqueue, exclusive claims, leases,
// stale claims, dead letters, listing, replay and tenant isolation.
import { afterAll, beforeEach, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../../infra/redis/client.ts';
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
});
