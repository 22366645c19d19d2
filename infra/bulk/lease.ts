/**
 * One driver per run: a Redis key holding the driver's owner name with a TTL, taken with
 * `SET NX PX`, renewed and released by scripts that first check the key still names us (a driver
 * that stalled past the TTL must neither renew nor delete its successor's lease). A driver that
 * finds its lease gone stops driving; whoever took it carries on from the run's record.
 *
 * The TTL runs on Redis's clock, the same for every contender.
 */
import type { RedisClient } from '../redis/client.ts';

const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface Lease {
  /** Takes the lease when free, renews it when ours; true while we hold it. */
  acquire(): Promise<boolean>;
  /** True while still ours (and extended by the TTL). */
  renew(): Promise<boolean>;
  /** Gives it up if ours (idempotent). */
  release(): Promise<void>;
  /** Who holds it now; null when nobody. */
  holder(): Promise<string | null>;
}

export function createLease(redis: Pick<RedisClient, 'set' | 'get' | 'eval'>, key: string, owner: string, ttlMs: number): Lease {
  const ttl = Math.max(1, Math.round(ttlMs));
  const renew = async () => (await redis.eval(RENEW, 1, key, owner, ttl)) === 1;
  return {
    async acquire() {
      if (await renew()) return true;
      return (await redis.set(key, owner, 'PX', ttl, 'NX')) === 'OK';
    },
    renew,
    async release() {
      await redis.eval(RELEASE, 1, key, owner);
    },
    holder: () => redis.get(key),
  };
}
