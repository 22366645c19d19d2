/**
 * Arrival history on a real Redis: minutes across a UTC day boundary, expiry, retention, the
 * 28-day read the forecaster makes, and counter limits. Times are near the real clock because
 * Redis expires keys against its own clock (a 2001 date would expire at once). Each test has its
 * own prefix and deletes its keys.
 */
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import { ManualClock } from '../kernel/clock.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { scanKeys } from '../redis/client.ts';
import { createArrivalHistory } from './arrival-history.ts';

const MIN = 60_000;
const DAY = 86_400_000;
const { redis, prefixes } = useTestRedis();

/** Tonight's UTC midnight: the day boundary the tests straddle. */
const midnight = Math.floor(Date.now() / DAY) * DAY + DAY;
const stamp = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '');

function setup(startAt = midnight - 90_000) {
  const prefix = prefixes.take('arrivals');
  const clock = new ManualClock(startAt);
  return { prefix, clock, history: createArrivalHistory(redis, prefix, clock) };
}

describe('arrival history', () => {
  it('counts per minute across a day boundary and fills unrecorded minutes with 0', async () => {
    const { clock, history } = setup(); // 23:58:30
    await history.recordArrival('scorer');
    await history.recordArrival('scorer', 3, midnight - 50_000); // 23:59:10
    await clock.advance(95_000); // 00:00:05
    await history.recordArrival('scorer', 2);
    await history.recordArrival('scorer', 4, midnight + 119_000); // 00:01:59
    await history.recordArrival('other', 9, midnight);

    const series = await history.series('scorer', midnight - 3 * MIN, midnight + 150_000);
    expect(series).toEqual({ startMs: midnight - 3 * MIN, perMinute: [0, 1, 3, 2, 4, 0] });
    expect((await history.series('other', midnight - MIN, midnight)).perMinute).toEqual([0, 9]);
    expect((await history.series('scorer', midnight, midnight - 1)).perMinute).toEqual([]);
  });

  it('keeps completions apart from arrivals', async () => {
    const { history } = setup();
    await history.recordArrival('scorer', 7, midnight - MIN);
    await history.recordCompletion('scorer', 5, midnight - MIN);
    await history.recordCompletion('scorer', 1, midnight + 10_000);
    expect((await history.completions('scorer', midnight - MIN, midnight)).perMinute).toEqual([5, 1]);
    expect((await history.series('scorer', midnight - MIN, midnight)).perMinute).toEqual([7, 0]);
  });

  it('sets each day key to expire 35 days after its day ends, and drops what is already older', async () => {
    const { prefix, history } = setup();
    await history.recordArrival('scorer', 1, midnight - MIN);
    await history.recordCompletion('scorer', 1, midnight + MIN);
    const today = midnight - DAY;
    expect(await redis.pexpiretime(`${prefix}:arrivals:scorer:${stamp(today)}`)).toBe(today + DAY + 35 * DAY);
    expect(await redis.pexpiretime(`${prefix}:completions:scorer:${stamp(midnight)}`)).toBe(midnight + DAY + 35 * DAY);

    const longAgo = midnight - 40 * DAY;
    await history.recordArrival('scorer', 5, longAgo);
    expect(await redis.exists(`${prefix}:arrivals:scorer:${stamp(longAgo)}`)).toBe(0);
    expect((await history.series('scorer', longAgo, longAgo)).perMinute).toEqual([0]);
  });

  it('reads 28 days (40,320 minutes) in one call, unaligned to days', async () => {
    const { history } = setup();
    const from = midnight - 27 * DAY - 10 * 3_600_000 + 37 * MIN + 12_000; // mid-minute, mid-day
    const to = from + 28 * DAY - MIN;
    const marks = [0, 1, 1439, 1440, 20_000, 40_319].map((i) => ({ i, count: i + 1 }));
    for (const { i, count } of marks) await history.recordArrival('scorer', count, from + i * MIN);
    await history.recordArrival('scorer', 99, to + MIN); // just past the range

    const series = await history.series('scorer', from, to);
    expect(series.startMs).toBe(Math.floor(from / MIN) * MIN);
    expect(series.perMinute).toHaveLength(40_320);
    for (const { i, count } of marks) expect(series.perMinute[i]).toBe(count);
    expect(series.perMinute.reduce((a, b) => a + b, 0)).toBe(marks.reduce((a, m) => a + m.count, 0));
  });

  it('rejects counts that are not whole and non-negative, writes nothing for 0, and saturates', async () => {
    const { prefix, history } = setup();
    await expect(history.recordArrival('scorer', -1)).rejects.toBeInstanceOf(InvalidInputError);
    await expect(history.recordArrival('scorer', 1.5)).rejects.toBeInstanceOf(InvalidInputError);
    await history.recordArrival('scorer', 0);
    // Every master, not KEYS on whichever node a cluster client picks.
    const left: string[] = [];
    for await (const keys of scanKeys(redis, `${prefix}:*`)) left.push(...keys);
    expect(left).toEqual([]);

    await history.recordArrival('scorer', 2 ** 32 - 2, midnight);
    await history.recordArrival('scorer', 5, midnight);
    expect((await history.series('scorer', midnight, midnight)).perMinute).toEqual([2 ** 32 - 1]);
  });
  it('writes many counts in one MULTI, summing repeats and expiring each key once', async () => {
    const { prefix, history } = setup();
    await history.recordMany([
      { kind: 'arrivals', model: 'scorer', count: 2, at: midnight - MIN },
      { kind: 'arrivals', model: 'scorer', count: 3, at: midnight - MIN + 5_000 },
      { kind: 'completions', model: 'scorer', count: 4, at: midnight },
      { kind: 'arrivals', model: 'scorer', count: 0, at: midnight },
    ]);
    expect((await history.series('scorer', midnight - MIN, midnight)).perMinute).toEqual([5, 0]);
    expect((await history.completions('scorer', midnight - MIN, midnight)).perMinute).toEqual([0, 4]);
    expect(await redis.pexpiretime(`${prefix}:completions:scorer:${stamp(midnight)}`)).toBe(midnight + DAY + 35 * DAY);

    // One bad count refuses the whole batch; an expired day stays gone even when written twice.
    await expect(history.recordMany([{ kind: 'arrivals', model: 'scorer', count: -1, at: midnight }])).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    const longAgo = midnight - 40 * DAY;
    await history.recordMany([
      { kind: 'arrivals', model: 'old', count: 1, at: longAgo },
      { kind: 'arrivals', model: 'old', count: 1, at: longAgo + MIN },
    ]);
    expect(await redis.exists(`${prefix}:arrivals:old:${stamp(longAgo)}`)).toBe(0);
  });
});
