/**
 * Failed authentication, limited per source address (issue 20): a token bucket per address in
 * Redis (api/http/rate-limiter.ts, shared by every API process) that only wrong keys draw from,
 * AUTH_FAILURE_LIMIT_PER_MIN of them, refilled over a minute. Once an address has used them up,
 * its wrong keys are answered 429 `rate_limited` with Retry-After instead of 401.
 *
 * A valid key keeps working from a limited address, and a request with no key at all draws
 * nothing. Behind a load balancer whose hops are not trusted (TRUST_PROXY_HOPS), every tenant
 * shares one address: refusing valid keys there would let anyone lock every tenant out with a
 * few wrong ones, the cheap denial of service issue 20 is about. The price: an attacker who
 * reads 200 from 429 is not slowed by the limit itself. Against guessing, keys are at least 16
 * characters (MIN_API_KEY_LENGTH); the limit bounds what failed attempts cost (a hash per
 * configured key, a log line) and tells a misconfigured client to back off.
 *
 * If Redis cannot be asked, the wrong key gets its 401: the key is wrong either way.
 */
import type { Context } from 'hono';
import type { Clock } from '../ports.ts';
import { addressBucket, clientAddress } from './client-address.ts';
import { errorBody } from './error-body.ts';
import type { RateLimiter } from './rate-limiter.ts';

export interface AuthFailureLimit {
  limiter: RateLimiter;
  /** Wrong keys one address may present per minute (the bucket holds a minute's worth). */
  perMinute: number;
  /** TRUST_PROXY_HOPS (api/http/client-address.ts). */
  trustProxyHops: number;
}

/** Called for each wrong key; answers the 429 when the address has no failures left. */
export type AuthFailureGuard = (c: Context) => Promise<Response | undefined>;

export function authFailureGuard(limit: AuthFailureLimit, clock: Clock): AuthFailureGuard {
  return async (c) => {
    const retryAfterMs = await takeAuthFailure(limit, clientAddress(c, limit.trustProxyHops), clock.now());
    if (retryAfterMs === undefined) return undefined;
    const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
    const message = `too many failed authentications from this address (at most ${limit.perMinute} a minute); retry in ${seconds} s`;
    return c.json(errorBody('rate_limited', message), 429, { 'Retry-After': String(seconds), 'WWW-Authenticate': 'Bearer' });
  };
}

/**
 * Draws one wrong key from `address`'s bucket (any transport's: HTTP's client address, gRPC's
 * peer); the wait in ms once the address has none left, else undefined — also when Redis cannot
 * be asked (the wrong key gets its plain refusal).
 */
export async function takeAuthFailure(
  limit: Pick<AuthFailureLimit, 'limiter' | 'perMinute'>,
  address: string | undefined,
  now: number,
): Promise<number | undefined> {
  const burst = Math.max(1, limit.perMinute);
  const taken = await limit.limiter.take(`auth-fail:${addressBucket(address)}`, { now, rps: burst / 60, burst }).catch(() => null);
  return !taken || taken.allowed ? undefined : taken.retryAfterMs;
}
