/**
 * Bearer authentication: `Authorization: Bearer <key>` against the configured `tenant:key`
 * pairs. Keys are compared as SHA-256 digests with timingSafeEqual, against every configured key
 * without stopping at a match, so timing says nothing about which key (or how much of one) matched.
 * A wrong key (not a missing one) is reported to `onFailure`, which may answer 429 instead of 401
 * (api/http/auth-failures.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, MiddlewareHandler } from 'hono';
import type { ApiKey } from '../../infra/kernel/config.ts';
import { UnauthorizedError } from '../../infra/kernel/errors.ts';
import type { AuthFailureGuard } from './auth-failures.ts';
import { bearerKey } from './bearer-key.ts';

export interface AuthEnv {
  Variables: { tenant: string };
}

export interface BearerAuthOptions {
  /** Told of each wrong key; a response it returns is sent instead of the 401. */
  onFailure?: AuthFailureGuard;
}

export function bearerAuth(apiKeys: readonly ApiKey[], options: BearerAuthOptions = {}): MiddlewareHandler<AuthEnv> {
  const tenantOfKey = keyLookup(apiKeys);
  return async (c, next) => {
    const tenant = tenantOfKey(bearerToken(c));
    if (tenant === undefined) {
      const refused = await options.onFailure?.(c);
      if (refused) return refused;
      throw new UnauthorizedError('unauthorized', 'unknown API key');
    }
    c.set('tenant', tenant);
    await next();
  };
}

/** The request's bearer token; throws 401 when there is none. */
export function bearerToken(c: Context): string {
  const key = bearerKey(c.req.header('authorization'));
  if (key === undefined) throw new UnauthorizedError('unauthorized', 'missing bearer token: send Authorization: Bearer <key>');
  return key;
}

/** Key → tenant, compared in constant time against every configured key. */
export function keyLookup(apiKeys: readonly ApiKey[]): (key: string) => string | undefined {
  const digests = apiKeys.map((k) => ({ tenant: k.tenant, digest: sha256(k.key) }));
  return (key) => tenantOf(digests, sha256(key));
}

function tenantOf(keys: Array<{ tenant: string; digest: Buffer }>, candidate: Buffer): string | undefined {
  let found: string | undefined;
  for (const k of keys) {
    if (timingSafeEqual(k.digest, candidate) && found === undefined) found = k.tenant;
  }
  return found;
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
