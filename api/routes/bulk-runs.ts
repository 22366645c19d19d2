/**
 * Bulk run routes (DESIGN §7): start or resume, read, cancel. Thin: parse, call the use case
 * (api/use-cases/bulk-runs.ts over infra/bulk). The dispatcher role drives API-created runs.
 */
import { Hono } from 'hono';
import type { AuthEnv } from '../http/auth.ts';
import { readJson } from '../http/read-json.ts';
import { toBulkRunResource } from '../resources/bulk-run-resource.ts';
import { type BulkRunUseCaseDeps, cancelBulkRun, getBulkRun, startBulkRun } from '../use-cases/bulk-runs.ts';

export function bulkRunRoutes(deps: BulkRunUseCaseDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();

  app.post('/v1/bulk-runs', async (c) => {
    const body = await readJson(c);
    const { run, created } = await startBulkRun(deps, { tenant: c.get('tenant'), body });
    const resource = toBulkRunResource(run);
    c.header('Location', resource.links.self);
    // 202: accepted and driven in the background; 200: the run already existed (a resume).
    return c.json(resource, created ? 202 : 200);
  });

  app.get('/v1/bulk-runs/:id', async (c) => {
    const run = await getBulkRun(deps, { tenant: c.get('tenant'), id: c.req.param('id') });
    return c.json(toBulkRunResource(run));
  });

  app.delete('/v1/bulk-runs/:id', async (c) => {
    const run = await cancelBulkRun(deps, { tenant: c.get('tenant'), id: c.req.param('id') });
    return c.json(toBulkRunResource(run));
  });

  return app;
}
