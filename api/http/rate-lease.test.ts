/**
 * Local leases over the Redis token bucket, on a real Redis and a ManualClock: a busy key asks
 * Redis once per lease (counted by wrapping the script's command, not through MONITOR), concurrent
 * takes share one lease in flight, an empty bucket refuses and the refusal is remembered until its
 * wait is over, two limiters on one bucket admit no more than the bucket plus one lease each,
 * leased tokens expire (and are dropped when the clock goes back), and costs of many tokens (the
 * byte budget) are still charged in full.
 */
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { rateLimitKey } from '../../infra/redis/keys.ts';
import { useTestRedis } from '../../test/support/services.ts';
import { leaseCap } from './rate-lease.ts';
import { createRateLimiter, type RateLimitRedis, type TakeOptions } from './rate-limiter.ts';

const { redis, prefixes } = useTestRedis();
const T0 = 1_000_000;

type Command = (...args: unknown[]) => Promise<unknown>;

/** The test's Redis, with a count of the limiter script's calls (each one round trip). */
function counted(): { redis: RateLimitRedis; calls: () => number } {
  let calls = 0;
  const wrapper: RateLimitRedis & Record<string, unknown> = {
    defineCommand(name, definition) {
      redis.defineCommand(name, definition);
      const command = (redis as unknown as Record<string, Command>)[name] as Command;
      wrapper[name] = (...args: unknown[]) => {
        calls++;
        return command.apply(redis, args);
      };
    },
  };
  return { redis: wrapper, calls: () => calls };
}

/** A limiter (one API process) on a fresh prefix, or on `prefix` to share its buckets. */
function limiter(prefix: string, leaseTtlMs?: number) {
  const r = counted();
  return { ...r, limiter: createRateLimiter(r.redis, { prefix, leaseTtlMs }) };
}

async function bucketTokens(prefix: string, key: string): Promise<number> {
  return Number(await redis.hget(rateLimitKey(prefix, key), 'tokens'));
}

/** Takes until one is refused, or `max` are allowed (a limiter that never refuses fails, not hangs); the number allowed. */
async function takeUntilRefused(take: () => Promise<{ allowed: boolean }>, max = 10_000): Promise<number> {
  let n = 0;
  while (n < max && (await take()).allowed) n++;
  return n;
}

describe('rate limiter leases', () => {
  it('caps a lease at a tenth of a second of the rate and a tenth of the burst, at least one token', () => {
    expect(leaseCap(50, 100)).toBe(5);
    expect(leaseCap(1000, 100)).toBe(10);
    expect(leaseCap(30 / 60, 30)).toBe(1); // the auth-failure bucket: one token at a time, as before
    expect(leaseCap(32 * 2 ** 20, 64 * 2 ** 20)).toBe(Math.floor(3.2 * 2 ** 20));
  });

  it('asks Redis once per lease, not per take, and the bucket is charged exactly the leases', async () => {
    const prefix = prefixes.take('rl');
    const { limiter: l, calls } = limiter(prefix);
    const clock = new ManualClock(T0);
    const opts: TakeOptions = { now: clock.now(), rps: 1000, burst: 1000 }; // cap 100
    for (let i = 0; i < 500; i++) expect((await l.take('tenant-a', opts)).allowed).toBe(true);
    // Leases of 1 (nothing known of the pace yet), 10, then the cap: 1 + 10 + 5 × 100 = 511 taken.
    expect(calls()).toBe(7);
    expect(await bucketTokens(prefix, 'tenant-a')).toBe(1000 - 511);
  });

  it('lets concurrent takes of one key share the lease in flight instead of each asking Redis', async () => {
    const { limiter: l, calls } = limiter(prefixes.take('rl'));
    const opts: TakeOptions = { now: T0, rps: 1000, burst: 1000 };
    const answers = await Promise.all(Array.from({ length: 50 }, () => l.take('tenant-a', opts)));
    expect(answers.every((a) => a.allowed)).toBe(true);
    // 1, then 10 while 49 wait, then 100 for the other 39; 50 calls without the sharing.
    expect(calls()).toBe(3);
  });

  it('refuses with the wait when the shared bucket is empty, asks Redis once per wait, and then serves single requests in turn', async () => {
    const prefix = prefixes.take('rl');
    const a = limiter(prefix);
    const b = limiter(prefix);
    const clock = new ManualClock(T0);
    const take = (l: typeof a) => l.limiter.take('tenant-a', { now: clock.now(), rps: 100, burst: 100 }); // 1 token / 10 ms, cap 10
    expect(await takeUntilRefused(() => take(a))).toBe(100);
    expect(await take(b)).toEqual({ allowed: false, retryAfterMs: 10 });
    const asked = a.calls();
    // Remembered: a's refusal needs no call until its wait is over, and says what is left of it.
    await clock.advance(4);
    expect(await take(a)).toEqual({ allowed: false, retryAfterMs: 6 });
    expect(a.calls()).toBe(asked);
    await clock.advance(6);
    // A nearly empty bucket cannot grant a lease, but grants one token to whichever asks.
    expect(await take(b)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await take(a)).toEqual({ allowed: false, retryAfterMs: 10 });
    expect(a.calls()).toBe(asked + 1);
    await clock.advance(10);
    expect((await take(a)).allowed).toBe(true);
    expect((await take(b)).allowed).toBe(false);
  });

  it('two limiters on one bucket admit no more than the bucket plus one lease each, and no less than the bucket minus what they hold', async () => {
    const prefix = prefixes.take('rl');
    const processes = [limiter(prefix), limiter(prefix)];
    const clock = new ManualClock(T0);
    const rps = 200;
    const burst = 100;
    const cap = leaseCap(rps, burst); // 10
    const stepMs = 7;
    const steps: { admitted: number; refused: boolean }[] = [];
    // Both ask for more than the rate (5 takes per 7 ms ≈ 714/s against 200/s), for 2.1 s; the
    // second asks last, so when it was refused the bucket held under a token as the step ended.
    for (let step = 0; step < 300; step++) {
      let admitted = 0;
      let refused = false;
      for (const [i, p] of processes.entries()) {
        const max = 3 - i;
        const n = await takeUntilRefused(() => p.limiter.take('tenant-a', { now: clock.now(), rps, burst }), max);
        admitted += n;
        refused = n < max;
      }
      steps.push({ admitted, refused });
      await clock.advance(stepMs);
    }
    const total = steps.reduce((sum, s) => sum + s.admitted, 0);
    const supplied = burst + (rps * (steps.length - 1) * stepMs) / 1000; // the burst, and the refill until the last step
    // Every token spent was taken from the bucket first: never more than it supplied, and at
    // most the two stocks still held (each under one lease) less.
    expect(total).toBeLessThanOrEqual(supplied);
    expect(total).toBeGreaterThanOrEqual(Math.floor(supplied) - 2 * cap);
    // After a step that left the bucket under a token, the steps that follow admit at most its
    // refill over them, the token, and one lease per process.
    let windows = 0;
    for (let from = 1; from < steps.length; from++) {
      if (!steps[from - 1]?.refused) continue;
      let admitted = 0;
      for (let to = from; to < steps.length; to++) {
        admitted += steps[to]?.admitted ?? 0;
        expect(admitted).toBeLessThanOrEqual((rps * (to - from + 1) * stepMs) / 1000 + 1 + 2 * cap);
        windows++;
      }
    }
    expect(windows).toBeGreaterThan(0);
  });

  it('drops leased tokens once they expire, or when the clock goes back before their lease', async () => {
    const prefix = prefixes.take('rl');
    const a = limiter(prefix, 1000);
    const b = limiter(prefix, 1000);
    const clock = new ManualClock(T0);
    const take = (l: typeof a) => l.limiter.take('tenant-a', { now: clock.now(), rps: 100, burst: 100 });
    for (let i = 0; i < 2; i++) await take(a); // leases of 1, then 10: a holds 9
    expect(a.calls()).toBe(2);
    await clock.advance(999);
    // b empties the bucket; a still spends what it holds, without asking.
    expect(await takeUntilRefused(() => take(b))).toBe(100);
    expect((await take(a)).allowed).toBe(true);
    expect(a.calls()).toBe(2);
    // At 1 s the 8 left are gone: a asks Redis, which has 0.1 of a token.
    await clock.advance(1);
    expect(await take(a)).toEqual({ allowed: false, retryAfterMs: 9 });
    expect(a.calls()).toBe(3);

    // Refilled; a leases 1, then 10 (holds 9). The clock goes back: they are dropped, and so is a
    // refusal remembered from a time that has not come.
    await clock.advance(10_000);
    for (let i = 0; i < 2; i++) await take(a);
    await takeUntilRefused(() => take(b));
    expect(await take(b)).toMatchObject({ allowed: false });
    const before = { a: a.calls(), b: b.calls() };
    clock.set(clock.now() - 60_000);
    expect((await take(a)).allowed).toBe(false);
    expect((await take(b)).allowed).toBe(false);
    expect({ a: a.calls(), b: b.calls() }).toEqual({ a: before.a + 1, b: before.b + 1 });
  });

  it('charges costs of many tokens (body bytes) in full: the held rest first, then the bucket, and remembers a refusal per need', async () => {
    const prefix = prefixes.take('rl');
    const { limiter: l, calls } = limiter(prefix);
    const take = (cost: number) => l.take('bytes:tenant-a', { now: T0, rps: 1000, burst: 5000, cost }); // cap 100
    expect((await take(30)).allowed).toBe(true); // leases 30
    expect((await take(30)).allowed).toBe(true); // leases 100: holds 70
    expect((await take(50)).allowed).toBe(true); // from what it holds: 20 left
    expect((await take(3000)).allowed).toBe(true); // 20 held + 2980 leased
    expect(await bucketTokens(prefix, 'bytes:tenant-a')).toBe(5000 - 30 - 100 - 2980);
    expect(await take(2000)).toEqual({ allowed: false, retryAfterMs: 110 }); // 1890 there
    expect(await take(1900)).toEqual({ allowed: false, retryAfterMs: 10 }); // a smaller need asks again
    const asked = calls();
    // A larger need than the refused one is refused without asking, with the wait Redis would give.
    expect(await take(2500)).toEqual({ allowed: false, retryAfterMs: 610 });
    expect(calls()).toBe(asked);
    expect((await take(1890)).allowed).toBe(true);
    expect(await bucketTokens(prefix, 'bytes:tenant-a')).toBe(0);
  });
});
