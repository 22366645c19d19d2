/**
 * The region's catalog (GET /v1/edge/catalog, api/use-cases/edge-catalog.ts) cached in the
 * isolate for the TTL the region names, read by one request at a time (concurrent requests wait
 * for the same read). A name the catalog lacks makes it read again, at most once per
 * `UNKNOWN_REFRESH_MS`, so a model published a moment ago is known at once while a flood of bad
 * names costs the region one request per interval. When the region cannot be read, the last
 * catalog is used past its TTL: stale specs still refuse what they refused, and the region checks
 * every request again anyway.
 */
import type { EdgeCatalog, EdgeCatalogModel } from '../use-cases/edge-catalog.ts';

/** How often a name the catalog does not know may make it read again. */
export const UNKNOWN_REFRESH_MS = 5_000;

export interface CatalogReader {
  /** The catalog, fresh within its TTL when the region answers; undefined when it never has. */
  current(now: number): Promise<EdgeCatalog | undefined>;
  /** The model, reading the catalog again if it is not there (rate-bounded). */
  model(name: string, now: number): Promise<EdgeCatalogModel | 'unknown' | undefined>;
}

export function createCatalogReader(read: () => Promise<EdgeCatalog>): CatalogReader {
  let held: { catalog: EdgeCatalog; at: number } | undefined;
  let reading: Promise<void> | undefined;
  let lastAttempt = Number.NEGATIVE_INFINITY;

  const refresh = (now: number): Promise<void> => {
    lastAttempt = now;
    reading ??= read()
      .then((catalog) => {
        held = { catalog, at: now };
      })
      .catch(() => {
        // The region is down or answered badly: keep what is held.
      })
      .finally(() => {
        reading = undefined;
      });
    return reading;
  };

  const current = async (now: number) => {
    if (!held || now - held.at >= held.catalog.ttlS * 1000) {
      if (now - lastAttempt >= 1000 || !held) await refresh(now);
    }
    return held?.catalog;
  };

  return {
    current,
    async model(name, now) {
      const catalog = await current(now);
      const found = catalog?.models.find((m) => m.name === name);
      if (found || !catalog) return found;
      if (now - lastAttempt >= UNKNOWN_REFRESH_MS) await refresh(now);
      return held?.catalog.models.find((m) => m.name === name) ?? 'unknown';
    },
  };
}
