// A tenant's open jobs on a real Redis: the cap, releases, idempotence, and entries that age out.
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import { ManualClock } from '../kernel/clock.ts';
import { openJobsKey } from './keys.ts';
import { createOpenJobs, createOpenJobsReleaser } from './open-jobs.ts';

const { redis, prefixes } = useTestRedis();

function setup(horizonMs = 60_000) {
  const clock = new ManualClock(1_700_000_000_000);
  const prefix = prefixes.take('open');
  return { clock, prefix, open: createOpenJobs(redis, { prefix, horizonMs, clock }) };
}

describe('open jobs', () => {
  it('admits up to the cap, refuses past it, and admits again once a job is released', async () => {
    const { open } = setup();
    expect(await open.admit('t', 'j1', 2)).toEqual({ admitted: true, open: 1 });
    expect(await open.admit('t', 'j2', 2)).toEqual({ admitted: true, open: 2 });
    expect(await open.admit('t', 'j3', 2)).toEqual({ admitted: false, open: 2 });
    // Another tenant has its own count.
    expect((await open.admit('u', 'k1', 2)).admitted).toBe(true);
    await open.release('t', ['j1']);
    expect(await open.admit('t', 'j3', 2)).toEqual({ admitted: true, open: 2 });
    expect(await open.count('t')).toBe(2);
  });

  it('admits of one tenant in the same turn share one Redis call and keep their order against the cap', async () => {
    const { clock, prefix } = setup();
    let calls = 0;
    const counting = new Proxy(redis, {
      get(target, name, receiver) {
        const value = Reflect.get(target, name, receiver);
        if (name !== 'warmpoolOpenJobsAdmit' || typeof value !== 'function') return value;
        return (...args: unknown[]) => {
          calls++;
          return (value as (...a: unknown[]) => unknown).apply(target, args);
        };
      },
    });
    const open = createOpenJobs(counting, { prefix, horizonMs: 60_000, clock });
    const replies = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => open.admit('t', id, 3)));
    expect(replies).toEqual([
      { admitted: true, open: 1 },
      { admitted: true, open: 2 },
      { admitted: true, open: 3 },
      { admitted: false, open: 3 },
      { admitted: false, open: 3 },
    ]);
    expect(calls).toBe(1);
    // Another tenant's admits in the same turn are their own call, with their own count.
    await Promise.all([open.admit('t', 'f', 3), open.admit('u', 'g', 3)]);
    expect(calls).toBe(3);
    expect(await open.count('t')).toBe(3);
    expect(await open.count('u')).toBe(1);
  });

  it('admitting the same job twice counts it once, even at the cap', async () => {
    const { open } = setup();
    await open.admit('t', 'j1', 1);
    expect(await open.admit('t', 'j1', 1)).toEqual({ admitted: true, open: 1 });
    expect(await open.count('t')).toBe(1);
  });

  it('an entry never released ages out after the horizon: a lost release heals itself', async () => {
    const { open, clock, prefix } = setup(60_000);
    await open.admit('t', 'lost', 1);
    expect((await open.admit('t', 'next', 1)).admitted).toBe(false);
    await clock.advance(60_001);
    expect(await open.admit('t', 'next', 1)).toEqual({ admitted: true, open: 1 });
    // The key expires a horizon after its last admit.
    const ttl = await redis.pttl(openJobsKey(prefix, 't'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);
  });

  it('the releaser writes its releases at the next flush, one call per tenant, and on close', async () => {
    const { open, clock } = setup();
    for (const id of ['a', 'b', 'c']) await open.admit('t', id, 10);
    await open.admit('u', 'd', 10);
    const calls: Array<[string, readonly string[]]> = [];
    const releaser = createOpenJobsReleaser(
      {
        release: (tenant, ids) => {
          calls.push([tenant, [...ids]]);
          return open.release(tenant, ids);
        },
      },
      clock,
      { flushIntervalMs: 1000 },
    );
    releaser.release('t', 'a');
    releaser.release('t', 'b');
    releaser.release('u', 'd');
    expect(await open.count('t')).toBe(3);
    await clock.advance(1000);
    await releaser.flush(); // nothing left to queue: waits for the timer's writes to land
    expect(calls).toEqual([
      ['t', ['a', 'b']],
      ['u', ['d']],
    ]);
    expect([await open.count('t'), await open.count('u')]).toEqual([1, 0]);
    releaser.release('t', 'c');
    await releaser.close();
    expect(await open.count('t')).toBe(0);
    expect(clock.pending).toBe(0);
  });
});
