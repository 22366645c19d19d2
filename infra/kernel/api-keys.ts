/** API keys: `tenant:key` pairs from API_KEYS, each key long enough that guessing it is hopeless. */
import { ConfigError } from './errors.ts';
import { TENANT_PATTERN } from './tenant.ts';

export interface ApiKey {
  tenant: string;
  key: string;
}

/**
 * Shortest API key accepted. Failed keys are rate-limited per address, but a valid key keeps
 * working while its address is limited (api/http/auth-failures.ts), so the limit does not stop
 * guessing by itself: length does. 16 characters of even a 36-letter alphabet are ~8e24 keys.
 */
export const MIN_API_KEY_LENGTH = 16;

/** `tenant:key` pairs, comma-separated. A key may contain ':' after the first one. */
export function parseApiKeys(raw: string): ApiKey[] {
  const keys: ApiKey[] = [];
  for (const pair of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = pair.indexOf(':');
    const tenant = at > 0 ? pair.slice(0, at) : '';
    const key = at > 0 ? pair.slice(at + 1) : '';
    // The entry itself is never echoed: it holds a key.
    if (!TENANT_PATTERN.test(tenant)) {
      throw new ConfigError(
        'invalid_config',
        `API_KEYS: each entry must be tenant:key, tenant of [A-Za-z0-9_-], key of ${MIN_API_KEY_LENGTH} characters or more`,
      );
    }
    if (key.length < MIN_API_KEY_LENGTH) {
      throw new ConfigError(
        'invalid_config',
        `API_KEYS: the key of tenant ${tenant} has ${key.length} characters; keys must have ${MIN_API_KEY_LENGTH} or more`,
      );
    }
    keys.push({ tenant, key });
  }
  return keys;
}
