/**
 * Bearer authentication: `Authorization: Bearer <key>` against the configured `tenant:key`
 * pairs. Keys are compared as SHA-256 digests with timingSafeEqual, against every configured key
 * without stopping at a match, so timing says nothing about which key (or how much of one) matched.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { ApiKey } from '../../infra/kernel/config.ts';
import { UnauthorizedError } from '../../infra/kernel/errors.ts';

export interface AuthEnv {
  Variables: { tenant: string };
}

export function bearerAuth(apiKeys: readonly ApiKey[]): MiddlewareHandler<AuthEnv> {
  const digests = apiKeys.map((k) => ({ tenant: k.tenant, digest: sha256(k.key) }));
  return async (c, next) => {
    const header = c.req.header('authorization') ?? '';
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    if (!match) throw new UnauthorizedError('unauthorized', 'missing bearer token: send Authorization: Bearer <key>');
    const tenant = tenantOf(digests, sha256(match[1] as string));
    if (tenant === undefined) throw new UnauthorizedError('unauthorized', 'unknown API key');
    c.set('tenant', tenant);
    await next();
  };
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
