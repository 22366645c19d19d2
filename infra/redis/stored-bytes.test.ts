// A tenant's stored-bytes ledger on a real Redis: the budget, forced charges, releases,
// idempotence, charges that expire (on a manual clock), bounded pruning, and the keys' slot.
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import { ManualClock } from '../kernel/clock.ts';
import { hashTag, storedBytesKey } from './keys.ts';
import { createOpenJobsReleaser } from './open-jobs.ts';
import { createStoredBytes, PRUNE_MAX } from './stored-bytes.ts';

const { redis, prefixes } = useTestRedis();
const T0 = 1_700_000_000_000;

function setup(ttlMs = 60_000) {
  const clock = new ManualClock(T0);
  const prefix = prefixes.take('stored');
  return { clock, prefix, ledger: createStoredBytes(redis, { prefix, ttlMs, clock }) };
}

describe('stored bytes', () => {
  it('admits up to the budget, refuses past it naming the oldest expiry, and admits again once released', async () => {
    const { ledger } = setup();
    expect(await ledger.admit('t', 'j1', 600, 1000)).toEqual({ admitted: true, total: 600, oldestExpiresAt: T0 + 60_000 });
    expect(await ledger.admit('t', 'j2', 400, 1000)).toMatchObject({ admitted: true, total: 1000 });
    expect(await ledger.admit('t', 'j3', 1, 1000)).toEqual({ admitted: false, total: 1000, oldestExpiresAt: T0 + 60_000 });
    // Another tenant has its own ledger.
    expect(await ledger.admit('u', 'k1', 1000, 1000)).toMatchObject({ admitted: true, total: 1000 });
    await ledger.release('t', ['j1']);
    expect(await ledger.admit('t', 'j3', 600, 1000)).toMatchObject({ admitted: true, total: 1000 });
    expect(await ledger.usage('t')).toEqual({ total: 1000, oldestExpiresAt: T0 + 60_000 });
  });

  it('admits of one tenant in one turn share a call and keep their order against the budget', async () => {
    const { ledger } = setup();
    const replies = await Promise.all(['a', 'b', 'c', 'd'].map((id) => ledger.admit('t', id, 300, 1000)));
    expect(replies.map((r) => [r.admitted, r.total])).toEqual([
      [true, 300],
      [true, 600],
      [true, 900],
      [false, 900],
    ]);
  });

  it('a forced charge passes the budget, and the next admit is refused until it expires', async () => {
    const { ledger, clock } = setup(60_000);
    await ledger.admit('t', 'in', 100, 1000);
    await clock.advance(10_000);
    expect(await ledger.charge('t', 'out:e1', 5000)).toBe(5100);
    expect((await ledger.admit('t', 'next', 1, 1000)).admitted).toBe(false);
    // The inputs' charge expires first, the outputs' 10 s later: then the ledger is empty.
    await clock.advance(50_000);
    expect(await ledger.admit('t', 'next', 1, 1000)).toMatchObject({ admitted: false, total: 5000, oldestExpiresAt: T0 + 70_000 });
    await clock.advance(10_000);
    expect(await ledger.admit('t', 'next', 1, 1000)).toMatchObject({ admitted: true, total: 1 });
  });

  it('charging the same id twice counts it once, even past the budget', async () => {
    const { ledger } = setup();
    await ledger.admit('t', 'j1', 800, 1000);
    expect(await ledger.admit('t', 'j1', 800, 1000)).toMatchObject({ admitted: true, total: 800 });
    expect(await ledger.charge('t', 'j1', 800)).toBe(800);
    await ledger.release('t', ['j1', 'j1', 'never-charged']);
    expect(await ledger.usage('t')).toEqual({ total: 0, oldestExpiresAt: null });
  });

  it('the keys expire with the last charge and leave nothing once every charge is gone', async () => {
    const { ledger, prefix } = setup(60_000);
    await ledger.admit('t', 'j1', 10, 1000);
    const ttl = await redis.pttl(storedBytesKey(prefix, 't', 'sizes'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
    await ledger.release('t', ['j1']);
    expect(await redis.exists(storedBytesKey(prefix, 't', 'expiry'), storedBytesKey(prefix, 't', 'sizes'))).toBe(0);
  });

  it(`prunes at most ${PRUNE_MAX} expired charges a call: the total errs high, then heals`, async () => {
    const { ledger, clock } = setup(1000);
    const ids = Array.from({ length: PRUNE_MAX + 5 }, (_, i) => `j${i}`);
    await Promise.all(ids.map((id) => ledger.admit('t', id, 1, 1e9)));
    expect((await ledger.usage('t')).total).toBe(PRUNE_MAX + 5);
    await clock.advance(1001);
    expect(await ledger.admit('t', 'x', 1, 1e9)).toMatchObject({ admitted: true, total: 6 });
    expect(await ledger.admit('t', 'y', 1, 1e9)).toMatchObject({ admitted: true, total: 2 });
  });

  it('a tenant is the hash tag of both keys, so one script reaches them on a cluster', () => {
    expect(hashTag(storedBytesKey('wp', 'tenant-a', 'expiry'))).toBe('tenant-a');
    expect(storedBytesKey('wp', 'tenant-a', 'sizes')).toBe('wp:stored-bytes:{tenant-a}:sizes');
  });

  it("open-jobs' releaser batches its releases, one call per tenant", async () => {
    const { ledger, clock } = setup();
    await Promise.all(['a', 'b'].map((id) => ledger.admit('t', id, 10, 1000)));
    const releaser = createOpenJobsReleaser(ledger, clock, { flushIntervalMs: 1000 });
    releaser.release('t', 'a');
    releaser.release('t', 'b');
    expect((await ledger.usage('t')).total).toBe(20);
    await releaser.close();
    expect((await ledger.usage('t')).total).toBe(0);
  });
});
