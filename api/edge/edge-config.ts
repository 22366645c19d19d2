/**
 * The gateway's settings, read once per isolate from its bindings (deploy/edge/wrangler.toml
 * [vars] and secrets, or the workerd config's bindings) and typed from this schema. The API keys
 * are the region's own `tenant:key` list (infra/kernel/api-keys.ts), as a secret.
 */
import { z } from 'zod';
import { type ApiKey, parseApiKeys } from '../../infra/kernel/api-keys.ts';
import { ConfigError } from '../../infra/kernel/errors.ts';

const positive = (fallback: number) => z.coerce.number().positive().default(fallback);

const edgeEnvSchema = z.object({
  /** The regional API's base URL, e.g. https://api.eu-west-1.example.com. */
  REGION_URL: z.url({ protocol: /^https?$/ }).transform((u) => u.replace(/\/+$/, '')),
  /** `tenant:key,…`: the region's API_KEYS (a secret: `wrangler secret put API_KEYS`). */
  API_KEYS: z.string().min(1),
  /** The key the gateway reads the region's catalog with; default: the first of API_KEYS. */
  REGION_KEY: z.string().min(1).optional(),
  /** Per tenant, as the region's RATE_LIMIT_RPS / RATE_LIMIT_BURST. */
  RATE_LIMIT_RPS: positive(50),
  RATE_LIMIT_BURST: positive(100),
  /** Wrong keys per second allowed from one client address before 429 (as the region's auth failure guard). */
  AUTH_FAILURES_PER_S: positive(1),
  AUTH_FAILURES_BURST: positive(20),
  /** The body limit until the region's catalog says its own. */
  BODY_LIMIT_BYTES: positive(8 * 1024 * 1024),
  /** How long a forwarded request may wait for the region's answer headers. */
  FORWARD_TIMEOUT_MS: positive(30_000),
  /** Submissions one tenant may hold in the edge buffer while the region is down. */
  BUFFER_MAX_ENTRIES: positive(10_000),
});

export type EdgeEnvVars = z.input<typeof edgeEnvSchema>;

export interface EdgeConfig {
  regionUrl: string;
  apiKeys: ApiKey[];
  regionKey: string;
  rateLimit: { rate: number; burst: number };
  authFailures: { rate: number; burst: number };
  bodyLimitBytes: number;
  forwardTimeoutMs: number;
  bufferMaxEntries: number;
}

/** The config from the bindings; a ConfigError naming every bad one. */
export function loadEdgeConfig(env: Record<string, unknown>): EdgeConfig {
  const parsed = edgeEnvSchema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError('invalid_config', `edge gateway bindings: ${problems.join('; ')}`);
  }
  const e = parsed.data;
  const apiKeys = parseApiKeys(e.API_KEYS);
  const first = apiKeys[0];
  if (first === undefined) throw new ConfigError('invalid_config', 'edge gateway bindings: API_KEYS lists no key');
  return {
    regionUrl: e.REGION_URL,
    apiKeys,
    regionKey: e.REGION_KEY ?? first.key,
    rateLimit: { rate: e.RATE_LIMIT_RPS, burst: e.RATE_LIMIT_BURST },
    authFailures: { rate: e.AUTH_FAILURES_PER_S, burst: e.AUTH_FAILURES_BURST },
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    forwardTimeoutMs: e.FORWARD_TIMEOUT_MS,
    bufferMaxEntries: e.BUFFER_MAX_ENTRIES,
  };
}
