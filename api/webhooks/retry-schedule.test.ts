import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { MAX_RETRY_AFTER_MS, nextAttemptAt, parseRetryAfter } from './retry-schedule.ts';

const schedule = [5_000, 300_000, 1_800_000];
const middle = () => 0.5; // no jitter
const lowest = () => 0; // -20%
const highest = () => 0.999_999; // just under +20%

describe('nextAttemptAt', () => {
  it('follows the schedule, one delay per retry, then gives up', () => {
    const clock = new ManualClock(1_000_000);
    const at = (attempt: number) => nextAttemptAt({ attempt, now: clock.now(), scheduleMs: schedule, random: middle });
    expect(at(1)).toBe(1_000_000 + 5_000);
    expect(at(2)).toBe(1_000_000 + 300_000);
    expect(at(3)).toBe(1_000_000 + 1_800_000);
    expect(at(4)).toBeNull();
    expect(at(0)).toBeNull();
  });

  it('jitters each delay within ±20%', () => {
    const now = 0;
    expect(nextAttemptAt({ attempt: 2, now, scheduleMs: schedule, random: lowest })).toBe(240_000);
    const high = nextAttemptAt({ attempt: 2, now, scheduleMs: schedule, random: highest }) ?? 0;
    expect(high).toBeGreaterThan(359_000);
    expect(high).toBeLessThanOrEqual(360_000);
  });

  it('waits at least as long as Retry-After asks, in seconds or as an HTTP date', () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:00:00Z'));
    const now = clock.now();
    expect(nextAttemptAt({ attempt: 1, now, scheduleMs: schedule, random: middle, retryAfterHeader: '120' })).toBe(now + 120_000);
    const date = new Date(now + 60_000).toUTCString();
    expect(nextAttemptAt({ attempt: 1, now, scheduleMs: schedule, random: middle, retryAfterHeader: date })).toBe(now + 60_000);
  });

  it('never retries sooner than the schedule because of Retry-After', () => {
    expect(nextAttemptAt({ attempt: 2, now: 0, scheduleMs: schedule, random: middle, retryAfterHeader: '0' })).toBe(300_000);
    expect(nextAttemptAt({ attempt: 2, now: 0, scheduleMs: schedule, random: middle, retryAfterHeader: '10' })).toBe(300_000);
  });

  it('caps absurd Retry-After values at 24 h', () => {
    expect(nextAttemptAt({ attempt: 1, now: 0, scheduleMs: schedule, random: middle, retryAfterHeader: '99999999' })).toBe(
      MAX_RETRY_AFTER_MS,
    );
  });

  it('ignores Retry-After it cannot read', () => {
    for (const header of ['soon', '-5', '1.5', '']) {
      expect(nextAttemptAt({ attempt: 1, now: 0, scheduleMs: schedule, random: middle, retryAfterHeader: header })).toBe(5_000);
    }
  });

  it('still gives up after the last attempt even when Retry-After asks for more', () => {
    expect(nextAttemptAt({ attempt: 4, now: 0, scheduleMs: schedule, random: middle, retryAfterHeader: '5' })).toBeNull();
  });
});

describe('parseRetryAfter', () => {
  it('reads a date in the past as "now", and when the clock goes backwards, as later', () => {
    const clock = new ManualClock(Date.parse('2030-01-01T00:01:00Z'));
    const header = 'Tue, 01 Jan 2030 00:00:30 GMT';
    expect(parseRetryAfter(header, clock.now())).toBe(0);
    clock.set(Date.parse('2030-01-01T00:00:00Z'));
    expect(parseRetryAfter(header, clock.now())).toBe(30_000);
  });
});
