/** A plan as actions, and the holdings channel's writes: the same set is not re-sent every tick. */
import { describe, expect, it } from 'vitest';
import { redisHoldings } from './pool-actions.ts';

function recorder() {
  const writes: string[] = [];
  const redis = {
    eval: async (...args: unknown[]) => {
      // KEYS[1], channel, mode, body: see pool-holdings.ts WRITE_SCRIPT.
      writes.push(`${String(args[4])} ${String(args[5])}`);
      return 1;
    },
  };
  return { writes, redis: redis as unknown as Parameters<typeof redisHoldings>[0] };
}

describe('redisHoldings', () => {
  it('writes a changed set at once, the same set again only after the refresh, and always after an askLoad', async () => {
    const { writes, redis } = recorder();
    let now = 0;
    const h = redisHoldings(redis, 'wp', { now: () => now }, 10_000);
    const a = [{ model: 'a', version: '1' }];
    await h.set('w1', a);
    now = 1_000;
    await h.set('w1', a); // unchanged: skipped
    await h.set('w2', a); // another worker
    await h.set('w1', [...a, { model: 'b', version: '1' }]); // changed
    now = 2_000;
    await h.askLoad('w1', { model: 'c', version: '1' });
    await h.set('w1', [...a, { model: 'b', version: '1' }]); // same as before the ask, but the key changed
    now = 20_000;
    await h.set('w2', a); // refreshed
    expect(writes.map((w) => w.split(' ')[0])).toEqual(['set', 'set', 'set', 'add', 'set', 'set']);
  });
});
