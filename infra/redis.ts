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

/**
 * Options for a connection that answers on a request's path (the API's): while Redis is
 * unreachable a command fails at once instead of waiting in ioredis' offline queue until
 * Redis returns. Without them a submission made during an outage hangs for as long as the
 * outage lasts, and is then carried out after its client has given up (a job nobody was told
 * about). Never for BullMQ Workers or QueueEvents: their blocking reads must wait out outages.
 *
 * - enableOfflineQueue false: no queueing while disconnected or reconnecting;
 * - maxRetriesPerRequest 0: a command already sent when the connection drops is failed, not
 *   resent after the reconnect (its effect is unknown: the caller's 503 says "retry");
 * - commandTimeout: a Redis that accepts connections but does not answer (paused, swapping)
 *   fails the command after this long instead of holding the request;
 * - retryStrategy: reconnect soon after Redis returns.
 */
export const FAIL_FAST_REDIS_OPTIONS: Readonly<RedisOptions> = {
  enableOfflineQueue: false,
  maxRetriesPerRequest: 0,
  commandTimeout: 5_000,
  // Reconnect attempts at most 500 ms apart (ioredis' default backs off to 2 s): while the
  // connection is down every request is a 503, so coming back soon after Redis does matters.
  retryStrategy: (times) => Math.min(times * 50, 500),
};

/** Options for a blocking connection (BullMQ QueueEvents/Worker) derived from a fail-fast one's. */
export function blockingOptions(options: RedisOptions): RedisOptions {
  // No auto-pipelining either: a blocking read must not hold other commands behind it.
  return { ...options, enableOfflineQueue: true, maxRetriesPerRequest: null, commandTimeout: undefined, enableAutoPipelining: false };
}

const UNAVAILABLE_MESSAGES = [
  /Stream isn't writeable/i,
  /Connection is closed/i,
  /Command timed out/i,
  /max retries per request/i,
  // Replies of a Redis that is up but cannot serve yet (loading its AOF after a restart) or now.
  /^(LOADING|BUSY|MASTERDOWN|TRYAGAIN|CLUSTERDOWN|READONLY)\b/,
];
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'ENOTCONN', 'EHOSTUNREACH']);

/**
 * True when `err` (or one of its causes) says Redis could not be reached or could not serve,
 * rather than that the command was wrong: the API answers 503 `unavailable` with Retry-After.
 * The connection codes (ECONNREFUSED, …) are matched on any cause, so a store reached over
 * TCP that is down (S3: the registry behind GET /v1/models) is answered the same way.
 */
export function isUnavailableError(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (e.name === 'MaxRetriesPerRequestError') return true;
    const code = (e as NodeJS.ErrnoException).code;
    if (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) return true;
    if (UNAVAILABLE_MESSAGES.some((re) => re.test(e instanceof Error ? e.message : ''))) return true;
    if (e instanceof AggregateError && e.errors.some(isUnavailableError)) return true;
  }
  return false;
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
