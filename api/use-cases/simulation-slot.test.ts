import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../infra/kernel/clock.ts';
import { OverloadedError } from '../../infra/kernel/errors.ts';
import { createSimulationSlot } from './simulation-slot.ts';

/** 'ok' when the slot was taken (and is held), else the refusal's code. */
function attempt(slot: ReturnType<typeof createSimulationSlot>, tenant: string): string {
  try {
    slot.take(tenant);
    return 'ok';
  } catch (err) {
    if (err instanceof OverloadedError) return err.code;
    throw err;
  }
}

describe('the simulation slot', () => {
  it('is one tenant’s whenever free when nobody else asks', () => {
    const slot = createSimulationSlot(new ManualClock(0));
    for (let i = 0; i < 5; i++) {
      expect(attempt(slot, 'a')).toBe('ok');
      expect(attempt(slot, 'a')).toBe('simulation_busy');
      slot.release();
    }
  });

  it('goes in turns: a tenant turned away gets the slot before the tenant that just had it', async () => {
    const clock = new ManualClock(0);
    const slot = createSimulationSlot(clock);
    const order: string[] = [];
    expect(attempt(slot, 'a')).toBe('ok');
    order.push('a');
    await clock.advance(100);
    expect(attempt(slot, 'b')).toBe('simulation_busy');
    slot.release();
    // a asks again the moment its replay ended: b was turned away first and has the turn.
    for (let round = 0; round < 6; round++) {
      await clock.advance(100);
      const last = order.at(-1) as string;
      const next = last === 'a' ? 'b' : 'a';
      expect(attempt(slot, last)).toBe('simulation_busy');
      expect(attempt(slot, next)).toBe('ok');
      order.push(next);
      await clock.advance(100);
      expect(attempt(slot, last)).toBe('simulation_busy');
      slot.release();
    }
    expect(order).toEqual(['a', 'b', 'a', 'b', 'a', 'b', 'a']);
  });

  it('lets an abandoned turn lapse after turnMs', async () => {
    const clock = new ManualClock(0);
    const slot = createSimulationSlot(clock, 10_000);
    expect(attempt(slot, 'a')).toBe('ok');
    expect(attempt(slot, 'b')).toBe('simulation_busy');
    slot.release();
    expect(attempt(slot, 'a')).toBe('simulation_busy');
    await clock.advance(10_001);
    // b never came back: a is served again (its own refusal lapsed too).
    expect(attempt(slot, 'a')).toBe('ok');
  });
});
