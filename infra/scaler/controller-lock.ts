/**
 * The scaler's leader lock: only the holder acts, so two scalers never launch or drain at once.
 * One Redis key, `SET key token NX PX ttl`; the holder renews it every tick and deletes it on
 * close, each through a script that first checks the token is still its own (a holder that
 * stalled past the TTL must not renew or delete its successor's lock).
 *
 *   follower --acquire() wins SET NX--> leader
 *   leader --acquire() renews (token matches)--> leader
 *   leader --the key expired and another took it--> follower (the renewal finds another token)
 *   leader --release()--> follower (key deleted: the next scaler takes over on its next tick)
 *
 * The TTL runs on Redis's clock, not the injected one: it is the same clock for every contender.
 */
import type { RedisClient } from '../redis/client.ts';

/** PEXPIRE only if the key still holds our token. */
const RENEW = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
/** DEL only if the key still holds our token. */
const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface LeaderLock {
  readonly token: string;
  /** Takes the lock if free, renews it if ours; true while we hold it. */
  acquire(): Promise<boolean>;
  /** Gives it up if ours (idempotent). */
  release(): Promise<void>;
}

export function createLeaderLock(redis: Pick<RedisClient, 'set' | 'eval'>, key: string, token: string, ttlMs: number): LeaderLock {
  const ttl = Math.max(1, Math.round(ttlMs));
  return {
    token,
    async acquire() {
      if ((await redis.eval(RENEW, 1, key, token, ttl)) === 1) return true;
      return (await redis.set(key, token, 'PX', ttl, 'NX')) === 'OK';
    },
    async release() {
      await redis.eval(RELEASE, 1, key, token);
    },
  };
}
