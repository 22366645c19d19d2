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
 *
 * A compressed body costs what it inflates to (issue 33): the middleware leaves the tenant's byte
 * bucket on the context (`bodyByteBudget`), and the decoder (content-encoding.ts) takes from it
 * what the inflated bytes add beyond the declared length, as they are produced.
 */
import type { Context, MiddlewareHandler } from 'hono';
import type { Clock } from '../ports.ts';
import type { AuthEnv } from './auth.ts';
import { errorBody } from './error-body.ts';
import type { RateLimiter } from './rate-limiter.ts';

/**
 * The tenant's byte bucket as a body's decoder sees it: `paid` bytes were taken for this body
 * before it was read (its Content-Length, or the whole body limit when chunked); `take` takes more.
 */
export interface BodyByteBudget {
  paid: number;
  take(bytes: number): Promise<RateRefusal | undefined>;
}

declare module 'hono' {
  interface ContextVariableMap {
    /** Set by rateLimit when a byte rate is set; undefined on routes without a byte budget. */
    bodyByteBudget: BodyByteBudget | undefined;
  }
}

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
  return async (c, next) => {
    const bytes = bodyBytes(c.req.raw.headers, bodyLimitBytes);
    const tenant = c.get('tenant');
    const refused = await takeRequestBudget(settings, tenant, clock.now(), bytes, 'body bytes');
    if (refused) return refuse(c, refused.retryAfterMs, refused.limit, bytes > 0);
    // Only a compressed body inflates past what was paid: an identity body needs no budget here.
    if ((settings.bytesPerS ?? 0) > 0 && c.req.header('content-encoding') !== undefined) {
      const take = (more: number) => takeByteBudget(settings, tenant, clock.now(), more, 'body bytes (counted decompressed)');
      c.set('bodyByteBudget', { paid: bytes, take });
    }
    await next();
  };
}

/** Why a request was refused: when its bucket allows it again, and the limit in words. */
export interface RateRefusal {
  retryAfterMs: number;
  limit: string;
}

/**
 * One request from the tenant's request bucket, then `bytes` from its byte bucket (when a byte
 * rate is set): every transport's budget (this middleware; the gRPC service, with a message's
 * size). `unit` names the bytes in the refusal. Undefined when both allow it.
 */
export async function takeRequestBudget(
  settings: RateLimitSettings,
  tenant: string,
  now: number,
  bytes: number,
  unit: string,
): Promise<RateRefusal | undefined> {
  const { limiter, rps, burst } = settings;
  const requests = await limiter.take(tenant, { now, rps, burst });
  if (!requests.allowed) return { retryAfterMs: requests.retryAfterMs, limit: `${rps} per second with bursts of ${burst}` };
  return takeByteBudget(settings, tenant, now, bytes, unit);
}

/**
 * `bytes` from the tenant's byte bucket alone (when a byte rate is set): what a request costs
 * beyond its declared body — bytes decompressed as they are produced, an answer's bytes. `unit`
 * names the bytes in the refusal. Undefined when the bucket allows it (or there is none).
 */
export async function takeByteBudget(
  settings: RateLimitSettings,
  tenant: string,
  now: number,
  bytes: number,
  unit: string,
): Promise<RateRefusal | undefined> {
  const { limiter, bytesPerS = 0, bytesBurst = 0 } = settings;
  if (bytesPerS <= 0 || bytes <= 0) return undefined;
  // A cost past the burst could never be paid; bodies and messages are bounded below it (config checks).
  const taken = await limiter.take(`bytes:${tenant}`, { now, rps: bytesPerS, burst: bytesBurst, cost: Math.min(bytes, bytesBurst) });
  if (!taken.allowed) return { retryAfterMs: taken.retryAfterMs, limit: `${bytesPerS} ${unit} per second with bursts of ${bytesBurst}` };
  return undefined;
}

/** `unreadBody`: the request has a body this answer leaves unread, so its connection ends with it. */
function refuse(c: Context, retryAfterMs: number, limit: string, unreadBody: boolean): Response {
  const { seconds, message } = refusalAnswer({ retryAfterMs, limit });
  const headers: Record<string, string> = { 'Retry-After': String(seconds) };
  if (unreadBody) headers.Connection = 'close';
  return c.json(errorBody('rate_limited', message), 429, headers);
}

/** A refusal's Retry-After (whole seconds, rounded up, at least 1) and its message. */
export function refusalAnswer({ retryAfterMs, limit }: RateRefusal): { seconds: number; message: string } {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return { seconds, message: `too many requests: the limit is ${limit}; retry in ${seconds} s` };
}

/** The body's size as declared; the whole limit when it is sent without a length (chunked); 0 without a body. */
function bodyBytes(headers: Headers, bodyLimitBytes: number): number {
  const length = headers.get('content-length');
  if (length !== null) return Math.min(Number(length) || 0, bodyLimitBytes);
  return headers.has('transfer-encoding') ? bodyLimitBytes : 0;
}
