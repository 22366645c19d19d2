/**
 * Per-tenant rate limits (issue 3 §5): a token bucket per tenant in Redis (api/http/rate-limiter.ts),
 * shared by every API process. Runs after auth, so the bucket is the tenant's, not the caller's
 * address. Over the limit: 429 `rate_limited` with `Retry-After` in whole seconds, rounded up.
 */
import type { MiddlewareHandler } from 'hono';
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
}

export function rateLimit(settings: RateLimitSettings, clock: Clock): MiddlewareHandler<AuthEnv> {
  const { limiter, rps, burst } = settings;
  return async (c, next) => {
    const { allowed, retryAfterMs } = await limiter.take(c.get('tenant'), { now: clock.now(), rps, burst });
    if (!allowed) {
      const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
      const message = `too many requests: the limit is ${rps} per second with bursts of ${burst}; retry in ${seconds} s`;
      return c.json(errorBody('rate_limited', message), 429, { 'Retry-After': String(seconds) });
    }
    await next();
  };
}
