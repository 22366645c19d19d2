/**
 * Shared pool routes (DESIGN §2, §8): list, read (with the deployments that joined), set (PUT,
 * merge), delete. Reading is for every tenant, as deployments are; changing is for ADMIN_TENANTS
 * (api/app.ts). Thin: the body's shape is checked here, the rules live in the use case and the
 * contract (api/use-cases/shared-pools.ts, infra/contracts/shared-pool.ts), shared with `warmpool pool`.
 *
 * PUT merges: fields left out keep their values; a new pool needs `max` and gets min 1 (at most
 * max), standby 0 and memoryMb 1024. `ifRevision` makes it conditional (409 `revision_conflict`).
 * DELETE answers 409 `pool_in_use`, naming them, while deployments name the pool.
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { AuthEnv } from '../http/auth.ts';
import { parseBody, readJson } from '../http/read-json.ts';
import { deletePool, getPool, listPools, type PoolUseCaseDeps, putPool } from '../use-cases/shared-pools.ts';

const count = z.number().int().nonnegative();

const putBody = z.strictObject({
  max: count.optional(),
  min: count.optional(),
  standby: count.optional(),
  memoryMb: count.optional(),
  ifRevision: count.optional(),
});

export function sharedPoolRoutes(deps: PoolUseCaseDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.get('/v1/pools', async (c) => c.json({ pools: await listPools(deps) }));

  app.get('/v1/pools/:name', async (c) => c.json(await getPool(deps, c.req.param('name'))));

  app.put('/v1/pools/:name', async (c) => {
    const { ifRevision, ...change } = parseBody(putBody, await readJson(c));
    const { pool } = await putPool(deps, { name: c.req.param('name'), change, ifRevision });
    return c.json(pool);
  });

  app.delete('/v1/pools/:name', async (c) => c.json(await deletePool(deps, c.req.param('name'))));

  return app;
}
