/**
 * The one place warmpool errors become HTTP responses (hono `onError`), plus the JSON 404 for
 * unknown routes. Every error body is `{ error: { code, message } }` (DESIGN §5).
 */
import type { Context } from 'hono';
import type { Log } from '../../infra/kernel/log.ts';
import { isStorageFullError, isUnavailableError } from '../../infra/redis/client.ts';
import { decisionResponse, errorBody } from './error-body.ts';

/** Retry-After of a 503 `unavailable`: about what a Redis restart or failover takes. */
export const UNAVAILABLE_RETRY_AFTER_S = 2;

/**
 * Retry-After of a 503 `storage_full`: Redis frees memory as workers end the queued jobs (their
 * inputs are deleted then), in seconds to minutes; half a minute keeps clients from hammering
 * a full Redis without leaving them away long once it has room.
 */
export const STORAGE_FULL_RETRY_AFTER_S = 30;
export const STORAGE_FULL_MESSAGE =
  'the job store (Redis) is full: no new work is taken until jobs already accepted have ended and freed room; retry later';

export function errorHandler(log: Log | undefined) {
  return (err: Error, c: Context): Response => {
    closeIfBodyUnread(c);
    const answered = decisionResponse(err, c);
    if (answered) return answered;
    if (isStorageFullError(err)) {
      // Redis is at its maxmemory (noeviction): it refuses writes, so no new work is taken. What
      // was accepted is kept, and workers go on ending jobs, which frees their inputs.
      log?.error({ err: err.message, method: c.req.method, path: c.req.path }, 'redis is full (maxmemory): new work refused');
      c.header('Retry-After', String(STORAGE_FULL_RETRY_AFTER_S));
      return c.json(errorBody('storage_full', STORAGE_FULL_MESSAGE, { retry_after_s: STORAGE_FULL_RETRY_AFTER_S }), 503);
    }
    if (isUnavailableError(err)) {
      // Redis (or S3) is down or restarting; the API's Redis connections fail fast
      // (infra/redis/client.ts). No 202 was given, so the caller retries (with the same
      // Idempotency-Key, a job a cut-off request did create is not created twice). An outage,
      // not a bug: no stack in the log.
      log?.error({ err: err.message, method: c.req.method, path: c.req.path }, 'backing store unavailable');
      c.header('Retry-After', String(UNAVAILABLE_RETRY_AFTER_S));
      return c.json(
        errorBody('unavailable', 'a backing store (Redis or S3) is unreachable; retry shortly', {
          retry_after_s: UNAVAILABLE_RETRY_AFTER_S,
        }),
        503,
      );
    }
    // Anything else is ours, not the caller's: log it whole, answer without internals.
    log?.error({ err, method: c.req.method, path: c.req.path }, 'request failed');
    return c.json(errorBody('internal', 'internal error; the server has logged it'), 500);
  };
}

/**
 * An error answered before the request body was read (auth, an unknown route) leaves the
 * body's bytes on the connection; the server drains them only briefly before dropping the
 * socket, and a client that reuses it meanwhile sees its *next* request fail ("other side
 * closed"), found by the chaos suite's fuzzer. `Connection: close` tells the client not to.
 */
function closeIfBodyUnread(c: Context): void {
  const raw = c.req.raw;
  if (raw.body !== null && !raw.bodyUsed) c.header('Connection', 'close');
}

export function notFoundHandler(c: Context): Response {
  closeIfBodyUnread(c);
  return c.json(errorBody('route_not_found', `no route for ${c.req.method} ${c.req.path}`), 404);
}
