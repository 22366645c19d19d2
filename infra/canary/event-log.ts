/**
 * The canary event log: what the guard did and why, per model, newest first, capped:
 *
 *   <prefix>:canary:events:<model>   list of JSON CanaryEvent
 *
 * Written only by the guard whose deployment write took effect, so two guards racing on one
 * rollback leave one event.
 */
import type { RedisClient } from '../redis/client.ts';
import { canaryEventsKey } from '../redis/keys.ts';
import type { WindowStats } from './outcomes.ts';

/** Events kept per model. */
export const CANARY_EVENTS_KEPT = 100;

export interface VersionSnapshot {
  version: string;
  /** Weight (%) when the decision was taken, before the rollback. */
  weight: number;
  window: WindowStats;
}

export interface CanaryEvent {
  model: string;
  /** The canary version acted on. */
  version: string;
  action: 'rollback';
  /** ISO 8601, by the guard's clock. */
  at: string;
  reason: string;
  /** The deployment revision the rollback wrote (visible in the deployment's history). */
  revision: number;
  stable: VersionSnapshot;
  canary: VersionSnapshot;
}

export async function recordCanaryEvent(redis: RedisClient, prefix: string, event: CanaryEvent): Promise<void> {
  await redis
    .multi()
    .lpush(canaryEventsKey(prefix, event.model), JSON.stringify(event))
    .ltrim(canaryEventsKey(prefix, event.model), 0, CANARY_EVENTS_KEPT - 1)
    .exec();
}

/** Newest first. */
export async function listCanaryEvents(redis: RedisClient, prefix: string, model: string): Promise<CanaryEvent[]> {
  return (await redis.lrange(canaryEventsKey(prefix, model), 0, -1)).map((raw) => JSON.parse(raw) as CanaryEvent);
}
