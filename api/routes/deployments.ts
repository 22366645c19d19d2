/**
 * Deployment routes (DESIGN §5): list, read, change (PUT), roll back, history. Thin: the body is
 * checked for shape with zod here; the rules (weights sum to 100, min ≤ max, versions exist…)
 * live in infra/deployments/deployment-store.ts and the use case, shared with the CLI.
 *
 * PUT merges: fields left out keep their current values (a first deployment gets min 1,
 * max max(min, 1), standby 0 and the registry's latest version); `null` clears `policy` or
 * `backlogMax` or `fallback` (`{model, version?}`: where degradable requests go while the
 * backlog is over `backlogMax`) or `pool` (a shared pool that exists: 422 `pool_not_found`
 * otherwise; null goes back to a pool of the deployment's own). `ifRevision` makes it
 * conditional (409 `revision_conflict`).
 */
import { Hono } from 'hono';
import { z } from 'zod';
import type { AuthEnv } from '../http/auth.ts';
import { parseBody, readJson } from '../http/read-json.ts';
import {
  type DeploymentUseCaseDeps,
  deploymentHistory,
  getDeployment,
  listDeployments,
  putDeployment,
  rollbackDeployment,
} from '../use-cases/deployments.ts';

const count = z.number().int().nonnegative();

const putBody = z.strictObject({
  version: z.string().optional(),
  versions: z.array(z.strictObject({ version: z.string(), weight: z.number() })).optional(),
  min: count.optional(),
  max: count.optional(),
  standby: count.optional(),
  policy: z.record(z.string(), z.unknown()).nullable().optional(),
  backlogMax: z.number().int().positive().nullable().optional(),
  fallback: z.strictObject({ model: z.string(), version: z.string().optional() }).nullable().optional(),
  pool: z.string().nullable().optional(),
  ifRevision: count.optional(),
});

const rollbackBody = z.strictObject({ ifRevision: count.optional() });

export type DeploymentRoutesDeps = DeploymentUseCaseDeps;

export function deploymentRoutes(deps: DeploymentRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.get('/v1/deployments', async (c) => c.json({ deployments: await listDeployments(deps) }));

  app.get('/v1/deployments/:model', async (c) => c.json(await getDeployment(deps, c.req.param('model'))));

  app.put('/v1/deployments/:model', async (c) => {
    const { ifRevision, ...change } = parseBody(putBody, await readJson(c));
    return c.json(await putDeployment(deps, { model: c.req.param('model'), change, ifRevision }));
  });

  app.post('/v1/deployments/:model/rollback', async (c) => {
    // The body is optional: an empty POST rolls back unconditionally. (hono caches the body
    // text, so readJson reads the same bytes again.)
    const empty = (await c.req.text()).trim() === '';
    const { ifRevision } = empty ? {} : parseBody(rollbackBody, await readJson(c));
    return c.json(await rollbackDeployment(deps, c.req.param('model'), ifRevision));
  });

  app.get('/v1/deployments/:model/history', async (c) => {
    const model = c.req.param('model');
    return c.json({ model, revisions: await deploymentHistory(deps, model) });
  });

  return app;
}
