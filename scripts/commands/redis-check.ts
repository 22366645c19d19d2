/**
 * Is Redis there? One connection attempt, bounded in time, before a command that cannot do
 * anything without Redis starts: the command's own clients retry (BullMQ's must wait out an
 * outage), which at a terminal looks like a hang or ends in a stack trace. Down, it throws a
 * ServiceUnreachableError, which cli-errors.ts words with the endpoint and where it came from.
 */
import { errorMessage } from '../../infra/kernel/errors.ts';
import { createRedis } from '../../infra/redis/client.ts';
import { ServiceUnreachableError } from './cli-errors.ts';

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET']);

export async function checkRedisReachable(url: string, timeoutMs = 3_000): Promise<void> {
  // ioredis rejects connect() with "Connection is closed"; the socket's own error (ECONNREFUSED …) comes as an event.
  let socketError: Error | undefined;
  const redis = createRedis(
    url,
    { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: timeoutMs, retryStrategy: () => null },
    (err) => {
      socketError ??= err;
    },
  );
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' })), timeoutMs);
  });
  try {
    await Promise.race([redis.connect().then(() => redis.ping()), timeout]);
  } catch (err) {
    const cause = socketError ?? err;
    if (!isNetworkFailure(cause) && !isNetworkFailure(err)) throw err;
    throw new ServiceUnreachableError('Redis', `cannot reach Redis at ${url}: ${errorMessage(cause)}`, { cause });
  } finally {
    clearTimeout(timer);
    // A connection that already ended must not be disconnected again: ioredis then holds the process ~2 s.
    if (redis.status !== 'end') redis.disconnect();
  }
}

/** Refused, unresolvable, timed out, or ioredis giving up on connecting (a cluster's "None of startup nodes"). */
function isNetworkFailure(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e instanceof Error && depth < 5; e = e.cause, depth++) {
    if (NETWORK_CODES.has(String((e as NodeJS.ErrnoException).code))) return true;
    if (/Connection is closed|None of startup nodes|Stream isn't writeable|max retries/i.test(e.message)) return true;
    if (e instanceof AggregateError && e.errors.some(isNetworkFailure)) return true;
  }
  return false;
}
