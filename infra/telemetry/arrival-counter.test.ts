/**
 * The in-memory arrival counter over the real arrival history on a real Redis: counts are held
 * until the flush interval, written in one MULTI per flush, filed under the minute they were
 * recorded in, flushed by close(), and a refused flush is reported. Time is a ManualClock near
 * the real clock (Redis expires the day keys against its own).
 */
import { describe, expect, it } from 'vitest';
import { testServices, useTestRedis } from '../../test/support/services.ts';
import { ManualClock } from '../kernel/clock.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { createRedis, FAIL_FAST_REDIS_OPTIONS } from '../redis/client.ts';
import { createArrivalCounter } from './arrival-counter.ts';
import { type ArrivalCount, createArrivalHistory } from './arrival-history.ts';

const MIN = 60_000;
const { redis, prefixes } = useTestRedis();

/** A minute start in the recent past, so the day keys it writes are not already expired. */
const minute0 = Math.floor(Date.now() / MIN) * MIN - 10 * MIN;

function setup(startAt = minute0 + 20_000) {
  const clock = new ManualClock(startAt);
  const history = createArrivalHistory(redis, prefixes.take('counter'), clock);
  const writes: ArrivalCount[][] = [];
  const recording = {
    recordMany: (counts: readonly ArrivalCount[]) => {
      writes.push([...counts]);
      return history.recordMany(counts);
    },
  };
  const errors: unknown[] = [];
  const counter = createArrivalCounter(recording, clock, { onError: (err) => errors.push(err) });
  return { clock, history, counter, writes, errors };
}

describe('arrival counter', () => {
  it('holds counts until the flush interval, then writes them summed in one MULTI', async () => {
    const { clock, history, counter, writes } = setup();
    for (let i = 0; i < 50; i++) counter.recordArrival('scorer');
    counter.recordArrival('scorer', 10);
    counter.recordCompletion('scorer', 7);
    counter.recordArrival('other', 3);
    await clock.advance(999);
    expect(writes).toEqual([]);
    expect((await history.series('scorer', minute0, minute0)).perMinute).toEqual([0]);

    await clock.advance(1);
    await expect.poll(() => writes.length).toBe(1);
    await counter.flush(); // a flush with nothing held writes nothing
    expect(writes).toHaveLength(1);
    expect((await history.series('scorer', minute0, minute0)).perMinute).toEqual([60]);
    expect((await history.completions('scorer', minute0, minute0)).perMinute).toEqual([7]);
    expect((await history.series('other', minute0, minute0)).perMinute).toEqual([3]);
    expect(clock.pending).toBe(0); // no timer while nothing is held
    await counter.close();
  });

  it('files counts under the minute they were recorded in, even when flushed in the next', async () => {
    const { clock, history, counter } = setup(minute0 + MIN - 500); // 0.5 s before the boundary
    counter.recordArrival('scorer', 4);
    await clock.advance(499);
    counter.recordArrival('scorer', 1); // still minute 0
    await clock.advance(1);
    counter.recordArrival('scorer', 2); // minute 1, written by the same flush
    await counter.flush();
    expect((await history.series('scorer', minute0, minute0 + MIN)).perMinute).toEqual([5, 2]);
    await counter.close();
  });

  it('flushes on close, stops its timer, is idempotent, and writes later counts at once', async () => {
    const { clock, history, counter, writes } = setup();
    counter.recordCompletion('scorer', 9);
    expect(clock.pending).toBe(1);
    const closed = counter.close();
    expect(counter.close()).toBe(closed);
    await closed;
    expect(clock.pending).toBe(0);
    expect((await history.completions('scorer', minute0, minute0)).perMinute).toEqual([9]);

    counter.recordCompletion('scorer', 1); // a job finishing during a drain
    await expect.poll(() => writes.length).toBe(2);
    await expect.poll(async () => (await history.completions('scorer', minute0, minute0)).perMinute).toEqual([10]);
  });

  it('reports a flush Redis refuses and drops its counts', async () => {
    const clock = new ManualClock(minute0);
    const down = createRedis(testServices().redisUrl, { ...FAIL_FAST_REDIS_OPTIONS, lazyConnect: true });
    const errors: unknown[] = [];
    const counter = createArrivalCounter(createArrivalHistory(down, prefixes.take('down'), clock), clock, {
      onError: (err) => errors.push(err),
    });
    counter.recordArrival('scorer', 2);
    await counter.flush(); // never connected, no offline queue: refused at once
    expect(errors).toHaveLength(1);
    await counter.flush();
    expect(errors).toHaveLength(1); // dropped, not retried
    await counter.close();
    down.disconnect();
  });

  it('rejects counts that are not whole and non-negative, and holds nothing for 0', async () => {
    const { clock, counter, writes } = setup();
    expect(() => counter.recordArrival('scorer', -1)).toThrow(InvalidInputError);
    expect(() => counter.recordCompletion('scorer', 0.5)).toThrow(InvalidInputError);
    counter.recordArrival('scorer', 0);
    expect(clock.pending).toBe(0);
    await counter.close();
    expect(writes).toEqual([]);
  });
});
