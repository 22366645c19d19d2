import { expect, it } from 'vitest';
import { ManualClock } from './clock.ts';
import { createTicker } from './ticker.ts';

it('ticks on the clock, reports a failing tick and goes on, stops on close', async () => {
  const clock = new ManualClock(0);
  const ticks: number[] = [];
  const errors: unknown[] = [];
  const ticker = createTicker({
    clock,
    intervalMs: 100,
    tick: async () => {
      ticks.push(clock.now());
      if (ticks.length === 2) throw new Error('boom');
    },
    onError: (err) => errors.push(err),
  });
  ticker.start();
  ticker.start(); // idempotent: still one loop
  await clock.advance(0);
  await clock.advance(100);
  await clock.advance(100);
  expect(ticks).toEqual([0, 100, 200]);
  expect(errors).toHaveLength(1);
  await ticker.close();
  await clock.advance(1000);
  expect(ticks).toEqual([0, 100, 200]);
  await ticker.close();
});
