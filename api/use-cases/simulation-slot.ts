/**
 * The dashboard simulation's one slot per API process (docs/SECURITY.md), taken in turns between
 * tenants. A replay may hold the slot for its CPU budget, and a tenant within its rate
 * (SIMULATIONS_PER_MIN) could start the next one the moment its last ended, so another tenant
 * retrying on `simulation_busy` could find it busy every time. So a tenant turned away is
 * remembered, and when the slot is free it goes to whoever has waited longest: a tenant asking
 * while another was turned away earlier (and has not had its turn) is turned away too, and
 * waits its own turn. With one tenant asking, nothing changes: the slot is its whenever free.
 *
 * A turned-away tenant that never asks again stops holding its turn after `turnMs` (twice the
 * Retry-After the refusal carries: a client that honours it has come back by then), so an
 * abandoned turn delays others by at most that. The map holds one entry per tenant that asked:
 * its size is bounded by the configured tenants.
 */
import { OverloadedError } from '../../infra/kernel/errors.ts';
import type { Clock } from '../ports.ts';

/** Retry-After of a refusal, in seconds. */
export const SIMULATION_RETRY_AFTER_S = 5;

export interface SimulationSlot {
  /** Takes the slot for `tenant`, or throws 503 simulation_busy. */
  take(tenant: string): void;
  release(): void;
}

export function createSimulationSlot(clock: Pick<Clock, 'now'>, turnMs = 2 * SIMULATION_RETRY_AFTER_S * 1000): SimulationSlot {
  let held = false;
  let asked = 0;
  /** Tenant → when it was first turned away since its last turn: the order it asked in, and the time. */
  const waiting = new Map<string, { order: number; at: number }>();
  const busy = (message: string) => new OverloadedError('simulation_busy', message, SIMULATION_RETRY_AFTER_S);
  return {
    take(tenant) {
      const now = clock.now();
      for (const [other, since] of waiting) if (now - since.at > turnMs) waiting.delete(other);
      const mine = waiting.get(tenant) ?? { order: ++asked, at: now };
      if (held) {
        waiting.set(tenant, mine);
        throw busy('a simulation is running in this API process; try again shortly');
      }
      const earlier = [...waiting].some(([other, since]) => other !== tenant && since.order < mine.order);
      if (earlier) {
        waiting.set(tenant, mine);
        throw busy("another tenant is waiting for this API process's simulation slot; it has the next turn: try again shortly");
      }
      waiting.delete(tenant);
      held = true;
    },
    release() {
      held = false;
    },
  };
}
