/**
 * A read-through cache of manifests for the API's hot path: every submit resolves a manifest,
 * and an S3 GET per request would cost more than the rest of the request. A version's manifest
 * changes only through `publish --overwrite`, so entries live `ttlMs`; "latest" is resolved
 * through a shorter-lived entry so a new version shows up quickly. Misses are not cached: a
 * model published a moment ago is found on the next request.
 */

import type { ModelManifest } from '../contracts/manifest.ts';
import type { Clock } from '../kernel/clock.ts';
import type { ModelRegistry } from './model-registry.ts';

export interface ManifestCacheOptions {
  ttlMs?: number;
  latestTtlMs?: number;
  clock: Pick<Clock, 'now'>;
}

type Catalog = Pick<ModelRegistry, 'getManifest' | 'list' | 'listVersions'>;

export function cacheManifests(registry: Catalog, options: ManifestCacheOptions): Catalog {
  const ttlMs = options.ttlMs ?? 60_000;
  const latestTtlMs = options.latestTtlMs ?? 5_000;
  const entries = new Map<string, { value: Promise<ModelManifest>; expiresAt: number }>();

  const cached = (key: string, ttl: number, load: () => Promise<ModelManifest>): Promise<ModelManifest> => {
    const now = options.clock.now();
    const hit = entries.get(key);
    // A clock that went backwards makes expiresAt - now larger than ttl: treat it as expired.
    if (hit && hit.expiresAt > now && hit.expiresAt - now <= ttl) return hit.value;
    const value = load();
    entries.set(key, { value, expiresAt: now + ttl });
    value.catch(() => entries.delete(key));
    return value;
  };

  return {
    getManifest(name, version) {
      if (version !== undefined) return cached(`${name}@${version}`, ttlMs, () => registry.getManifest(name, version));
      return cached(`${name}@`, latestTtlMs, () => registry.getManifest(name));
    },
    list: () => registry.list(),
    listVersions: (name) => registry.listVersions(name),
  };
}
