/**
 * Redis connections. BullMQ needs `maxRetriesPerRequest: null` on connections it blocks on;
 * every connection here is created on demand (never at import time) and closed by its owner.
 */
import { Redis, type RedisOptions } from 'ioredis';

/**
 * ioredis reconnects by itself and fails the commands issued meanwhile, so callers see the
 * outage where it matters; without a listener it would also print every connection error as
 * "Unhandled error event". `onError` receives them (default: ignored, the commands report).
 */
export function createRedis(url: string, options: RedisOptions = {}, onError: (err: Error) => void = () => {}): Redis {
  const redis = new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false, ...options });
  redis.on('error', onError);
  return redis;
}

/** Closes politely (QUIT), falling back to disconnect when the server is already gone. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return;
  try {
    await redis.quit();
  } catch {
    redis.disconnect();
  }
}
