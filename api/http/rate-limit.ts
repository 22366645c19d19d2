/**
 * Per-tenant rate limits (issue 3 §5): a token bucket per tenant in Redis (api/http/rate-limiter.ts),
 * shared by every API process. Runs after auth, so the bucket is the tenant's, not the caller's
 * address. Over the limit: 429 `rate_limited` with `Retry-After` in whole seconds, rounded up.
 * Both buckets are taken through the process's leases on them (api/http/rate-lease.ts): a request
 * usually spends tokens its process already holds, and Redis is asked once per lease, not twice
 * per request; the header there bounds what that can admit beyond the rate.
 *
 * A second bucket per tenant counts request-body bytes (issue 20): reading and JSON-parsing a
 * body costs the API in proportion to its size, so a tenant sending large bodies slowed every
 * tenant while staying under the request rate. The cost is taken from `Content-Length` before
 * the body is read; a body without one (chunked) takes the whole body limit up front: its size is
 * unknown until read, and counting while reading would mean reading it first. Refused, the body is
 * never read; the answer says `Connection: close` (as the body limit's 413 does), so the client
 * opens a new connection for its next request instead of racing the server's close of this one:
 * without it, a kept-alive socket with an unread body was closed under the client's next request
 * (a reset). The server discards what is still in flight (a bounded drain, no parsing) and closes.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { Clock } from '../ports.ts';
import type { AuthEnv } from './auth.ts';
import { errorBody } from './errors.ts';
import type { RateLimiter } from './rate-limiter.ts';

export interface RateLimitSettings {
  limiter: RateLimiter;
  /** Sustained requests per second per tenant (RATE_LIMIT_RPS). */
  rps: number;
  /** Requests a tenant may make at once after a quiet spell (RATE_LIMIT_BURST). */
  burst: number;
  /** Request-body bytes per second per tenant (RATE_LIMIT_BYTES_PER_S); no byte budget when absent or 0. */
  bytesPerS?: number;
  /** Body bytes a tenant may send at once after a quiet spell (RATE_LIMIT_BYTES_BURST, ≥ the body limit). */
  bytesBurst?: number;
}

/** `bodyLimitBytes`: what a body without Content-Length is charged (BODY_LIMIT_BYTES, the most it may be). */
export function rateLimit(settings: RateLimitSettings, clock: Clock, bodyLimitBytes: number): MiddlewareHandler<AuthEnv> {
  const { limiter, rps, burst, bytesPerS = 0, bytesBurst = 0 } = settings;
  return async (c, next) => {
    const tenant = c.get('tenant');
    const now = clock.now();
    const bytes = bodyBytes(c.req.raw.headers, bodyLimitBytes);
    const requests = await limiter.take(tenant, { now, rps, burst });
    if (!requests.allowed) return refuse(c, requests.retryAfterMs, `${rps} per second with bursts of ${burst}`, bytes > 0);
    if (bytesPerS > 0 && bytes > 0) {
      const taken = await limiter.take(`bytes:${tenant}`, { now, rps: bytesPerS, burst: bytesBurst, cost: bytes });
      if (!taken.allowed) return refuse(c, taken.retryAfterMs, `${bytesPerS} body bytes per second with bursts of ${bytesBurst}`, true);
    }
    await next();
  };
}

/** `unreadBody`: the request has a body this answer leaves unread, so its connection ends with it. */
function refuse(c: Context, retryAfterMs: number, limit: string, unreadBody: boolean): Response {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  const message = `too many requests: the limit is ${limit}; retry in ${seconds} s`;
  const headers: Record<string, string> = { 'Retry-After': String(seconds) };
  if (unreadBody) headers.Connection = 'close';
  return c.json(errorBody('rate_limited', message), 429, headers);
}

/** The body's size as declared; the whole limit when it is sent without a length (chunked); 0 without a body. */
function bodyBytes(headers: Headers, bodyLimitBytes: number): number {
  const length = headers.get('content-length');
  if (length !== null) return Math.min(Number(length) || 0, bodyLimitBytes);
  return headers.has('transfer-encoding') ? bodyLimitBytes : 0;
}
