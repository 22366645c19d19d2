/**
 * A shared pool's demand doorbell (issue 31 §3): the API rings it right after it queues a job for
 * a model that joined a shared pool, so the pool controller's leader can place a model no worker
 * holds at once instead of at its next tick. One pub/sub channel per pool,
 * `${prefix}:pool-demand:<pool>`, carrying a DemandRing as JSON.
 *
 * A ring is a hint, never the truth: the job is already in its queue (the scaler's tick sees the
 * backlog and places the model anyway), so a ring lost while the leader reconnects costs at most a
 * tick. That is why the bell is pub/sub alone, with no key beside it (unlike worker-control.ts).
 *
 * The bell is throttled per API process: one ring per model version per `minIntervalMs` (1 s),
 * so 50 concurrent first requests publish once, and a busy model rings once a second at most.
 * Across processes and controllers the placement is single-flight by the controller's claim
 * (infra/scaler/pool-controller.ts), not by this throttle.
 */

import type { Clock } from '../kernel/clock.ts';
import type { RedisClient } from '../redis/client.ts';
import { poolDemandChannel } from '../redis/keys.ts';

/** What a ring says: which model version of the pool just got a job. */
export interface DemandRing {
  pool: string;
  model: string;
  version: string;
  /** Epoch ms when it was rung (for logs). */
  at: number;
}

export interface DemandBell {
  /** Rings unless this model version rang less than `minIntervalMs` ago; never throws (a lost ring costs a tick). */
  ring(pool: string, model: string, version: string): void;
}

export interface DemandBellOptions {
  /** Default 1 s. */
  minIntervalMs?: number;
  onError?: (err: unknown) => void;
}

export const DEMAND_RING_INTERVAL_MS = 1_000;

export function createDemandBell(
  redis: { publish(channel: string, message: string): Promise<unknown> },
  prefix: string,
  clock: Pick<Clock, 'now'>,
  options: DemandBellOptions = {},
): DemandBell {
  const minIntervalMs = options.minIntervalMs ?? DEMAND_RING_INTERVAL_MS;
  const last = new Map<string, number>();
  return {
    ring(pool, model, version) {
      const now = clock.now();
      const key = `${pool}\u0000${model}@${version}`;
      const previous = last.get(key);
      // A clock that went back rings again rather than falling silent until it catches up.
      if (previous !== undefined && now >= previous && now - previous < minIntervalMs) return;
      last.set(key, now);
      if (last.size > 10_000) forgetOld(last, now - minIntervalMs);
      const ring: DemandRing = { pool, model, version, at: now };
      redis.publish(poolDemandChannel(prefix, pool), JSON.stringify(ring)).catch((err: unknown) => options.onError?.(err));
    },
  };
}

function forgetOld(last: Map<string, number>, before: number): void {
  for (const [key, at] of last) if (at < before) last.delete(key);
}

/**
 * Listens to every pool's doorbell on `subscriber` (a connection of its own: a subscribed
 * connection can do nothing else). `onRing` gets each well-formed ring; a malformed one is dropped.
 * Returns an idempotent stop.
 */
export async function listenForDemand(
  subscriber: Pick<RedisClient, 'psubscribe' | 'punsubscribe' | 'on' | 'off'>,
  prefix: string,
  onRing: (ring: DemandRing) => void,
): Promise<() => Promise<void>> {
  const pattern = poolDemandChannel(prefix, '*');
  const listener = (_pattern: string, _channel: string, message: string) => {
    const ring = parseRing(message);
    if (ring) onRing(ring);
  };
  subscriber.on('pmessage', listener);
  await subscriber.psubscribe(pattern);
  let stopped = false;
  return async () => {
    if (stopped) return;
    stopped = true;
    subscriber.off('pmessage', listener);
    await subscriber.punsubscribe(pattern).catch(() => undefined);
  };
}

export function parseRing(raw: string): DemandRing | undefined {
  try {
    const v = JSON.parse(raw) as Record<string, unknown>;
    const { pool, model, version, at } = v;
    if (typeof pool !== 'string' || typeof model !== 'string' || typeof version !== 'string') return undefined;
    if (pool === '' || model === '' || version === '') return undefined;
    return { pool, model, version, at: typeof at === 'number' ? at : 0 };
  } catch {
    return undefined;
  }
}
