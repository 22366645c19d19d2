// The holdings channel on a real Redis: the key is the truth, the doorbell carries the same
// message, rev only grows, askLoad adds without a lost update, and foreign values are no message.
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import { closeRedis, duplicateClient } from '../redis/client.ts';
import { holdingsChannel, holdingsKey } from '../redis/keys.ts';
import { askLoad, parseHoldings, readHoldings, sendHoldings } from './pool-holdings.ts';

const { redis, prefixes } = useTestRedis();
const A = { model: 'a', version: '1' };
const B = { model: 'b', version: '2' };

describe('pool holdings', () => {
  it('sets the whole set, and a later write has a higher rev even at the same or an earlier time', async () => {
    const prefix = prefixes.take('holdings');
    const first = await sendHoldings(redis, prefix, 'w1', [A, B], { now: 5000 });
    expect(first).toBe(5000);
    expect(await readHoldings(redis, prefix, 'w1')).toEqual({ models: [A, B], rev: 5000, sentAt: 5000 });
    // The sender's clock went backwards: rev still grows.
    expect(await sendHoldings(redis, prefix, 'w1', [B], { now: 4000 })).toBe(5001);
    expect(await readHoldings(redis, prefix, 'w1')).toEqual({ models: [B], rev: 5001, sentAt: 4000 });
  });

  it('reads an empty set as no models (Lua writes an empty list as {})', async () => {
    const prefix = prefixes.take('holdings');
    await sendHoldings(redis, prefix, 'w1', [A], { now: 1 });
    await askLoad(redis, prefix, 'w1', B, { now: 2 });
    await sendHoldings(redis, prefix, 'w1', [], { now: 3 });
    expect(await readHoldings(redis, prefix, 'w1')).toEqual({ models: [], rev: 3, sentAt: 3 });
  });

  it('askLoad adds one model (once) and names it, and concurrent asks lose none', async () => {
    const prefix = prefixes.take('holdings');
    await sendHoldings(redis, prefix, 'w1', [A], { now: 10 });
    await askLoad(redis, prefix, 'w1', B, { now: 11 });
    expect(await readHoldings(redis, prefix, 'w1')).toEqual({ models: [A, B], rev: 11, sentAt: 11, loadNow: B });
    await askLoad(redis, prefix, 'w1', A, { now: 12 });
    expect(await readHoldings(redis, prefix, 'w1')).toMatchObject({ models: [A, B], loadNow: A, rev: 12 });
    const many = Array.from({ length: 20 }, (_, i) => ({ model: `m${i}`, version: '1' }));
    await Promise.all(many.map((ref) => askLoad(redis, prefix, 'w1', ref, { now: 13 })));
    expect((await readHoldings(redis, prefix, 'w1'))?.models).toHaveLength(22);
    // A plain set clears the ask.
    await sendHoldings(redis, prefix, 'w1', [A], { now: 14 });
    expect((await readHoldings(redis, prefix, 'w1'))?.loadNow).toBeUndefined();
  });

  it('rings the doorbell with the message it stored, and the key expires with its TTL', async () => {
    const prefix = prefixes.take('holdings');
    const subscriber = duplicateClient(redis);
    try {
      const heard = new Promise<string>((resolve) => subscriber.on('message', (_channel: string, raw: string) => resolve(raw)));
      await subscriber.subscribe(holdingsChannel(prefix, 'w1'));
      await sendHoldings(redis, prefix, 'w1', [A], { now: 20, ttlMs: 60_000 });
      expect(parseHoldings(await heard)).toEqual(await readHoldings(redis, prefix, 'w1'));
      const ttl = await redis.pttl(holdingsKey(prefix, 'w1'));
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(60_000);
    } finally {
      await closeRedis(subscriber);
    }
  });

  it('parses only well-formed messages and drops malformed or repeated entries', () => {
    expect(parseHoldings(null)).toBeUndefined();
    expect(parseHoldings('not json')).toBeUndefined();
    expect(parseHoldings('{"models":[]}')).toBeUndefined();
    const raw = JSON.stringify({ rev: 7, sentAt: 1, models: [A, { model: '' }, { model: 'c' }, A, 'x', B], loadNow: { model: 3 } });
    expect(parseHoldings(raw)).toEqual({ models: [A, B], rev: 7, sentAt: 1 });
  });
});
