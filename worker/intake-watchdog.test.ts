import { describe, expect, it } from 'vitest';
import { ManualClock } from '../infra/kernel/clock.ts';
import { createIntakeWatchdog, type IntakeWatchdogOptions, type StallInfo } from './intake-watchdog.ts';

function setup(overrides: Partial<IntakeWatchdogOptions> = {}) {
  const clock = new ManualClock(1_000_000);
  const state = { wants: true, lastTaken: clock.now(), waiting: 5 as number | undefined };
  const stalls: StallInfo[] = [];
  const watchdog = createIntakeWatchdog({
    clock,
    stallMs: 30_000,
    wantsJobs: () => state.wants,
    lastTakenAt: () => state.lastTaken,
    waiting: async () => state.waiting,
    onStall: async (info) => {
      stalls.push(info);
      state.lastTaken = clock.now(); // a fresh intake starts its own idle count
    },
    ...overrides,
  });
  return { clock, state, stalls, watchdog };
}

describe('createIntakeWatchdog', () => {
  it('calls a stall once the intake took nothing for stallMs while jobs wait', async () => {
    const { clock, stalls, watchdog } = setup();
    await clock.advance(29_999);
    expect(await watchdog.check()).toBe(false);
    await clock.advance(1);
    expect(await watchdog.check()).toBe(true);
    expect(stalls).toEqual([{ waiting: 5, idleMs: 30_000 }]);
    // The replacement's idle time counts from its start.
    expect(await watchdog.check()).toBe(false);
  });

  it('leaves an idle intake alone when nothing waits, or when Redis does not answer', async () => {
    const { clock, state, stalls, watchdog } = setup();
    await clock.advance(60_000);
    state.waiting = 0;
    expect(await watchdog.check()).toBe(false);
    state.waiting = undefined;
    expect(await watchdog.check()).toBe(false);
    expect(stalls).toEqual([]);
  });

  it('leaves a worker alone that does not want jobs (standby, paused, full, draining)', async () => {
    const { clock, state, stalls, watchdog } = setup();
    state.wants = false;
    await clock.advance(60_000);
    expect(await watchdog.check()).toBe(false);
    expect(stalls).toEqual([]);
  });

  it('does not count a job taken while it asked Redis', async () => {
    const { clock, state, stalls, watchdog } = setup({
      waiting: async () => {
        state.lastTaken = clock.now();
        return 3;
      },
    });
    await clock.advance(45_000);
    expect(await watchdog.check()).toBe(false);
    expect(stalls).toEqual([]);
  });

  it('looks every stallMs / 3 once started, and stops when closed', async () => {
    const { clock, stalls, watchdog } = setup();
    watchdog.start();
    await clock.advance(30_000);
    expect(stalls).toHaveLength(1);
    await clock.advance(30_000);
    expect(stalls).toHaveLength(2);
    watchdog.close();
    await clock.advance(60_000);
    expect(stalls).toHaveLength(2);
    expect(clock.pending).toBe(0);
  });
});
