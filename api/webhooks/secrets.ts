/**
 * Per-tenant webhook signing secrets, in one Redis hash per tenant
 * (`<prefix>:webhooks:secret:<tenant>`: current, previous, previousExpiresAt).
 *
 * Rotation: the new secret becomes current at once; the previous one keeps signing alongside it
 * until `previousExpiresAt`, so receivers can switch at their own pace (Standard Webhooks'
 * multiple-signature header). Secrets are stored as given: signing needs the key itself.
 * `revokePrevious` ends that overlap at once (a leaked secret, or receivers all switched): from
 * then on, deliveries carry the current secret's signature only.
 */

import type { Clock } from '../../infra/kernel/clock.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { webhookSecretKey } from '../../infra/redis/keys.ts';
import { newSecret } from './signing.ts';

export interface TenantSecret {
  secret: string;
  /** Still signing until `expiresAt` (epoch ms). */
  previous?: { secret: string; expiresAt: number };
}

export interface WebhookSecrets {
  /** The tenant's secrets, creating the first one on first use. */
  getOrCreate(tenant: string): Promise<TenantSecret>;
  /** A new current secret; the old one signs too for `overlapMs`. */
  rotate(tenant: string, overlapMs: number): Promise<TenantSecret>;
  /** Stops the previous secret signing now; the current one is untouched. */
  revokePrevious(tenant: string): Promise<TenantSecret>;
  /** Every secret a message must be signed with now: current first. */
  activeSecrets(tenant: string, now: number): Promise<string[]>;
}

/** Atomic so that two rotations at once cannot lose a secret that already signed messages. */
const ROTATE = `
local current = redis.call('HGET', KEYS[1], 'current')
if current then
  redis.call('HSET', KEYS[1], 'previous', current, 'previousExpiresAt', ARGV[2])
end
redis.call('HSET', KEYS[1], 'current', ARGV[1])
return 1
`;

export function createWebhookSecrets(redis: RedisClient, prefix: string, clock: Pick<Clock, 'now'>): WebhookSecrets {
  const key = (tenant: string) => webhookSecretKey(prefix, tenant);

  async function read(tenant: string, now: number): Promise<TenantSecret> {
    // HSETNX: two first uses at once agree on one secret.
    await redis.hsetnx(key(tenant), 'current', newSecret());
    const h = await redis.hgetall(key(tenant));
    const result: TenantSecret = { secret: h.current ?? '' };
    const expiresAt = Number(h.previousExpiresAt);
    if (h.previous && expiresAt > now) result.previous = { secret: h.previous, expiresAt };
    return result;
  }

  return {
    getOrCreate: (tenant) => read(tenant, clock.now()),

    async rotate(tenant, overlapMs) {
      const now = clock.now();
      await redis.eval(ROTATE, 1, key(tenant), newSecret(), String(now + overlapMs));
      return read(tenant, now);
    },

    async revokePrevious(tenant) {
      await redis.hdel(key(tenant), 'previous', 'previousExpiresAt');
      return read(tenant, clock.now());
    },

    async activeSecrets(tenant, now) {
      const s = await read(tenant, now);
      return s.previous ? [s.secret, s.previous.secret] : [s.secret];
    },
  };
}
