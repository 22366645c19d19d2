/**
 * Who may read `/metrics` on the API's port (issue 20): its series name every model and its
 * traffic, across tenants. An admin tenant's key (ADMIN_TENANTS) or METRICS_TOKEN, a bearer token
 * for a Prometheus scraper that is no tenant; another tenant's key is 403, no key or a wrong one
 * 401 (a wrong one counts against its address like any failed authentication). A scraper on a
 * private network can instead read METRICS_PORT's listener, which has no auth (api/main.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { MiddlewareHandler } from 'hono';
import type { ApiKey } from '../../infra/kernel/config.ts';
import { InvalidInputError, UnauthorizedError } from '../../infra/kernel/errors.ts';
import { bearerToken, keyLookup } from './auth.ts';
import type { AuthFailureGuard } from './auth-failures.ts';

export interface MetricsAuthOptions {
  apiKeys: readonly ApiKey[];
  adminTenants: readonly string[];
  /** METRICS_TOKEN; none when absent. */
  token?: string;
  onFailure?: AuthFailureGuard;
}

export function metricsAuth(options: MetricsAuthOptions): MiddlewareHandler {
  const tenantOfKey = keyLookup(options.apiKeys);
  const tokenDigest = options.token === undefined ? undefined : sha256(options.token);
  return async (c, next) => {
    const presented = bearerToken(c);
    // Both compared every time, so timing does not say whether the token or a key matched.
    const isToken = tokenDigest !== undefined && timingSafeEqual(tokenDigest, sha256(presented));
    const tenant = tenantOfKey(presented);
    if (isToken) return next();
    if (tenant === undefined) {
      const refused = await options.onFailure?.(c);
      if (refused) return refused;
      throw new UnauthorizedError('unauthorized', 'unknown API key');
    }
    if (!options.adminTenants.includes(tenant)) {
      throw new InvalidInputError(
        'forbidden',
        `tenant ${tenant} may not read /metrics: it is not in ADMIN_TENANTS (a scraper uses METRICS_TOKEN or METRICS_PORT)`,
        { status: 403 },
      );
    }
    return next();
  };
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s).digest();
}
