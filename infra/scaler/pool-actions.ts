/**
 * What the pool controller does to a shared pool, as data: a plan (pool-plan.ts) becomes launches,
 * each warm worker's whole holdings and drains, in that order (a launched worker is on its way
 * before any is drained; holdings before drains, so a model leaving a drained worker is already
 * asked of another). And the narrow port to the workers' holdings channel the actions go through.
 */

import { askLoad, DEFAULT_HOLDINGS_TTL_MS, type ModelRef, sendHoldings } from '../fleet/pool-holdings.ts';
import type { Clock } from '../kernel/clock.ts';
import type { RedisClient } from '../redis/client.ts';
import type { PoolAction } from './pool-decisions.ts';
import type { MemberRef } from './pool-observe.ts';
import type { PoolPlan } from './pool-plan.ts';

/** What the controller needs of the holdings channel (infra/fleet/pool-holdings.ts sendHoldings / askLoad). */
export interface PoolHoldings {
  /** The worker's whole desired set. */
  set(workerId: string, models: readonly ModelRef[]): Promise<void>;
  /** Adds one model and asks the worker to load it first, evicting to make room. */
  askLoad(workerId: string, ref: ModelRef): Promise<void>;
}

/**
 * The holdings channel over Redis (infra/fleet/pool-holdings.ts). The controller sends every warm
 * worker its whole set every tick; a set equal to the last one sent to that worker is written again
 * only once `refreshMs` (a third of the key's TTL) has passed, so a steady pool does not ring every
 * worker's doorbell every tick. An askLoad changes the key, so the next set is written whatever it is.
 */
export function redisHoldings(
  redis: Pick<RedisClient, 'eval'>,
  prefix: string,
  clock: Pick<Clock, 'now'>,
  refreshMs = DEFAULT_HOLDINGS_TTL_MS / 3,
): PoolHoldings {
  const last = new Map<string, { models: string; at: number }>();
  return {
    set: async (workerId, models) => {
      const now = clock.now();
      const key = models.map((m) => `${m.model}@${m.version}`).join(',');
      const sent = last.get(workerId);
      if (sent && sent.models === key && now >= sent.at && now - sent.at < refreshMs) return;
      await sendHoldings(redis, prefix, workerId, models, { now });
      last.set(workerId, { models: key, at: now });
      if (last.size > 10_000) last.clear(); // workers come and go: forgetting costs one write each
    },
    askLoad: async (workerId, ref) => {
      last.delete(workerId);
      await askLoad(redis, prefix, workerId, ref, { now: clock.now() });
    },
  };
}

/** The plan as actions, in the order to apply: launches, then holdings (warm workers only, members only), then drains. */
export function actionsOf(plan: PoolPlan, refs: readonly MemberRef[], workers: ReadonlyArray<{ id: string; state: string }>): PoolAction[] {
  const known = new Set(refs.map((r) => r.key));
  const warm = new Set(workers.filter((w) => w.state === 'warm').map((w) => w.id));
  const actions: PoolAction[] = [];
  if (plan.launch > 0) actions.push({ action: 'launch', count: plan.launch });
  for (const p of plan.placement) {
    if (!warm.has(p.workerId)) continue;
    actions.push({ action: 'hold', workerId: p.workerId, models: p.models.filter((m) => known.has(m)) });
  }
  for (const id of plan.drain) actions.push({ action: 'drain', workerId: id });
  return actions;
}

/** Member keys (`model@version`) as the holdings channel names them. */
export function refsOf(keys: readonly string[], refs: readonly MemberRef[]): ModelRef[] {
  const byKey = new Map(refs.map((r) => [r.key, r]));
  return keys.flatMap((k) => {
    const r = byKey.get(k);
    return r ? [{ model: r.model, version: r.version }] : [];
  });
}
