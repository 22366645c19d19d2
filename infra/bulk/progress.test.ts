import { describe, expect, it } from 'vitest';
import { ManualClock } from '../kernel/clock.ts';
import { computeProgress, estimateRowsTotal, RateWindow, rowsPerSecondNeeded } from './progress.ts';

const base = { rowsTotalExact: true, chunksDone: 0, badRows: 0 };

describe('RateWindow', () => {
  it('measures rows/s over the window on an injected clock', async () => {
    const clock = new ManualClock(1_000_000);
    const rate = new RateWindow(10_000);
    rate.add(clock.now(), 0);
    expect(rate.rowsPerSecond()).toBe(0);
    for (let i = 1; i <= 5; i++) {
      await clock.advance(1000);
      rate.add(clock.now(), i * 100);
    }
    expect(rate.rowsPerSecond()).toBe(100);
    // A stall: the window slides past the busy seconds and the rate falls.
    await clock.advance(20_000);
    rate.add(clock.now(), 500);
    expect(rate.rowsPerSecond()).toBe(0);
  });

  it('starts over when the clock goes backwards', () => {
    const rate = new RateWindow(10_000);
    rate.add(5000, 0);
    rate.add(6000, 1000);
    rate.add(1000, 1000);
    expect(rate.rowsPerSecond()).toBe(0);
    rate.add(2000, 1500);
    expect(rate.rowsPerSecond()).toBe(500);
  });
});

describe('computeProgress', () => {
  it('gives an ETA from the rate and says whether the deadline holds', () => {
    const clock = new ManualClock(0);
    const p = computeProgress({ ...base, now: clock.now(), rowsDone: 1000, rowsTotal: 11_000, rowsPerSecond: 100, deadline: 200_000 });
    expect(p.etaSeconds).toBe(100);
    expect(p.etaAt).toBe(100_000);
    expect(p.onTrack).toBe(true);
    const late = computeProgress({ ...base, now: 0, rowsDone: 1000, rowsTotal: 11_000, rowsPerSecond: 100, deadline: 50_000 });
    expect(late.onTrack).toBe(false);
    expect(rowsPerSecondNeeded(late, 0, 50_000)).toBe(200);
  });

  it('has no ETA before a rate, and is on track until the deadline passes', () => {
    const p = computeProgress({ ...base, now: 10, rowsDone: 0, rowsTotal: 100, rowsPerSecond: 0, deadline: 20 });
    expect(p.etaSeconds).toBeUndefined();
    expect(p.onTrack).toBe(true);
    expect(computeProgress({ ...base, now: 30, rowsDone: 0, rowsTotal: 100, rowsPerSecond: 0, deadline: 20 }).onTrack).toBe(false);
  });

  it('a finished run has ETA 0 and rowsTotal never below rowsDone', () => {
    const p = computeProgress({ ...base, now: 5, rowsDone: 100, rowsTotal: 90, rowsPerSecond: 0 });
    expect(p.rowsTotal).toBe(100);
    expect(p.etaSeconds).toBe(0);
  });
});

describe('estimateRowsTotal', () => {
  it('scales rows by bytes until the input was read whole', () => {
    expect(estimateRowsTotal({ rowsSeen: 100, bytesSeen: 1000, bytesTotal: 10_000, exact: false })).toBe(1000);
    expect(estimateRowsTotal({ rowsSeen: 100, bytesSeen: 1000, bytesTotal: 10_000, exact: true })).toBe(100);
    expect(estimateRowsTotal({ rowsSeen: 0, bytesSeen: 0, bytesTotal: 10_000, exact: false })).toBe(0);
    // Before any chunk was counted, the plan's rows per byte; after, what the counted chunks showed.
    expect(estimateRowsTotal({ rowsSeen: 0, bytesSeen: 0, bytesTotal: 10_000, exact: false, rowsPerByte: 0.05 })).toBe(500);
    expect(estimateRowsTotal({ rowsSeen: 100, bytesSeen: 1000, bytesTotal: 10_000, exact: false, rowsPerByte: 0.05 })).toBe(1000);
  });
});
