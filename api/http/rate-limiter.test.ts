/**
 * The token bucket on a real Redis: burst, refusal with the wait, refill, a clock going
 * backwards, and that the script's text crosses the wire once, not with every request (seen in
 * what this test's own connection writes). Leases over it: rate-lease.test.ts.
 */
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { isClusterUrl } from '../../infra/kernel/redis-url.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { testServices, useTestRedis } from '../../test/support/services.ts';
import { createRateLimiter } from './rate-limiter.ts';

const { redis, prefixes } = useTestRedis();

describe('rate limiter', () => {
  it('allows the burst, refuses with the wait until a token is back, and refills at rps', async () => {
    const limiter = createRateLimiter(redis, { prefix: prefixes.take('rl') });
    const t0 = 1_000_000;
    const take = (now: number, key = 'tenant-a') => limiter.take(key, { now, rps: 2, burst: 3 });
    for (let i = 0; i < 3; i++) expect(await take(t0)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await take(t0)).toEqual({ allowed: false, retryAfterMs: 500 });
    expect(await take(t0 + 200)).toEqual({ allowed: false, retryAfterMs: 300 }); // 0.4 token back
    expect(await take(t0, 'tenant-b')).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await take(t0 + 500)).toEqual({ allowed: true, retryAfterMs: 0 });
    // A clock that went backwards refills nothing.
    expect((await take(t0 - 60_000)).allowed).toBe(false);
  });

  it("takes a cost per take (a body's bytes), waits for the cost to refill, and clamps a cost above the burst", async () => {
    const limiter = createRateLimiter(redis, { prefix: prefixes.take('rl') });
    const t0 = 1_000_000;
    const take = (now: number, cost: number) => limiter.take('bytes:tenant-a', { now, rps: 1000, burst: 5000, cost });
    expect(await take(t0, 3000)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect(await take(t0, 3000)).toEqual({ allowed: false, retryAfterMs: 1000 }); // 2000 left, 1000 short
    expect(await take(t0, 2000)).toEqual({ allowed: true, retryAfterMs: 0 });
    // More than the bucket holds would never pass: it costs the whole bucket instead.
    expect(await take(t0 + 5000, 1e9)).toEqual({ allowed: true, retryAfterMs: 0 });
    expect((await take(t0 + 5000, 1)).allowed).toBe(false);
  });

  // Read from what the connection writes to its socket, not through MONITOR: ioredis marks a
  // connection as monitoring a tick after MONITOR's OK, so another client's traffic in that tick
  // failed the test ("Command queue state error"). One node's socket; on a Redis Cluster the other
  // tests cover the limiter.
  it.skipIf(isClusterUrl(testServices().redisUrl))('sends the script once, then calls it by its SHA', async () => {
    const conn = createRedis(testServices().redisUrl) as Redis;
    try {
      await conn.ping();
      const sent: string[] = [];
      const stream = conn.stream;
      const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
      // Each command is a RESP array whose first bulk string is its name.
      stream.write = ((chunk: unknown, ...rest: unknown[]) => {
        for (const m of String(chunk).matchAll(/\*\d+\r\n\$\d+\r\n([a-z]+)\r\n/gi)) sent.push(String(m[1]).toLowerCase());
        return write(chunk, ...rest);
      }) as typeof stream.write;
      const limiter = createRateLimiter(conn, { prefix: prefixes.take('rl') });
      const take = (i: number) => limiter.take('tenant-a', { now: 1_000 + i, rps: 10, burst: 10 });
      const calls = () => sent.filter((c) => c === 'eval' || c === 'evalsha');
      for (let i = 0; i < 3; i++) await take(i);
      expect(calls()).toEqual(['eval', 'evalsha', 'evalsha']);
      sent.length = 0;
      await conn.script('FLUSH'); // as after a Redis restart: NOSCRIPT, then the text once more
      for (let i = 3; i < 6; i++) await take(i);
      // The script cache is the server's: another test's client may have loaded it again already.
      expect(['evalsha,eval,evalsha,evalsha', 'evalsha,evalsha,evalsha']).toContain(calls().join(','));
    } finally {
      await closeRedis(conn);
    }
  });
});
