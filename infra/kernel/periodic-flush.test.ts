// The shared flush timer on a ManualClock: one timer per wait, none while idle, close flushes and then flushes at once.
import { describe, expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { periodicFlush } from './periodic-flush.ts';

describe('periodicFlush', () => {
  it('flushes one interval after the first add, with one timer however many adds, and holds no timer while idle', async () => {
    const clock = new ManualClock();
    let flushes = 0;
    const timer = periodicFlush(async () => void flushes++, clock, 1000);
    expect(clock.pending).toBe(0);
    timer.held();
    timer.held();
    expect(clock.pending).toBe(1);
    await clock.advance(999);
    expect(flushes).toBe(0);
    await clock.advance(1);
    expect(flushes).toBe(1);
    expect(clock.pending).toBe(0);
    timer.held();
    expect(clock.pending).toBe(1);
  });

  it('close() stops the timer and flushes once however often called; what is added afterwards is flushed at once', async () => {
    const clock = new ManualClock();
    let flushes = 0;
    const timer = periodicFlush(async () => void flushes++, clock, 1000);
    timer.held();
    const first = timer.close();
    expect(timer.close()).toBe(first);
    await first;
    expect(flushes).toBe(1);
    expect(clock.pending).toBe(0);
    timer.held();
    expect(flushes).toBe(2);
    expect(clock.pending).toBe(0);
  });
});
