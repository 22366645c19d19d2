/**
 * GET /v1/edge/catalog: the models, specs and bounds an edge gateway validates requests against
 * (api/use-cases/edge-catalog.ts). Any tenant's key reads it; it holds nothing tenant-owned.
 */
import { Hono } from 'hono';
import type { AuthEnv } from '../http/auth.ts';
import { type EdgeCatalogDeps, edgeCatalog } from '../use-cases/edge-catalog.ts';

/**
 * How long an edge answers from one catalog. A new deployment or traffic split reaches the edge
 * within it; a name the edge does not know makes it ask again sooner (api/edge/edge-catalog.ts),
 * so a model published a moment ago is not refused for the rest of the TTL.
 */
export const EDGE_CATALOG_TTL_S = 30;

export function edgeCatalogRoutes(deps: Omit<EdgeCatalogDeps, 'ttlS'>): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get('/v1/edge/catalog', async (c) => {
    c.header('Cache-Control', `private, max-age=${EDGE_CATALOG_TTL_S}`);
    return c.json(await edgeCatalog({ ...deps, ttlS: EDGE_CATALOG_TTL_S }));
  });
  return app;
}
