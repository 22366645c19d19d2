import { describe, expect, it } from 'vitest';
import { createBusyWindow } from './busy-window.ts';

describe('createBusyWindow', () => {
  it('averages each worker over the last window, the newest sample always in', () => {
    const w = createBusyWindow();
    w.note(0, 30_000, [['a', 1]]);
    w.note(10_000, 30_000, [['a', 0.5]]);
    w.note(20_000, 30_000, [['a', 0]]);
    expect(w.share('a')).toBeCloseTo(0.5);
    // At 40 s the samples of 0 and 10 s have left a 30 s window.
    w.note(40_000, 30_000, [['a', 1]]);
    expect(w.share('a')).toBeCloseTo(0.5);
    // A window shorter than a tick keeps the newest only.
    w.note(50_000, 1_000, [['a', 0.2]]);
    expect(w.share('a')).toBeCloseTo(0.2);
  });

  it('forgets a worker absent from a tick, clamps shares and skips what is not a number', () => {
    const w = createBusyWindow();
    w.note(0, 30_000, [
      ['a', 3],
      ['b', -1],
    ]);
    expect([w.share('a'), w.share('b')]).toEqual([1, 0]);
    w.note(5_000, 30_000, [
      ['a', 0],
      ['b', Number.NaN],
    ]);
    expect(w.share('a')).toBeCloseTo(0.5);
    expect(w.share('b')).toBeUndefined();
    expect(w.share('never')).toBeUndefined();
  });

  it('drops samples from the future when the clock goes back', () => {
    const w = createBusyWindow();
    w.note(10_000, 30_000, [['a', 1]]);
    w.note(5_000, 30_000, [['a', 0]]);
    expect(w.share('a')).toBe(0);
  });
});
