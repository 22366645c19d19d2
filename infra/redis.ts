/**
 * Redis connections. BullMQ needs `maxRetriesPerRequest: null` on connections it blocks on;
 * every connection here is created on demand (never at import time) and closed by its owner.
 */
import { Redis, type RedisOptions } from 'ioredis';

export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, lazyConnect: false, ...options });
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
