/**
 * The HTTP API as a hono app, built from its dependencies (no I/O at import): served by
 * @hono/node-server in api/main.ts, wrapped by `handle()` on Lambda, and exercised with
 * `app.request()` in tests.
 *
 * Auth covers `/v1/*` and `/v2/models/*`; health and `/metrics` are open (DESIGN §5).
 */
import { Hono, type MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { routePath } from 'hono/route';
import type { Registry } from 'prom-client';
import type { ApiKey } from '../infra/config.ts';
import type { ApiMetrics } from '../infra/metrics.ts';
import { bearerAuth, type AuthEnv } from './auth.ts';
import { errorBody, errorHandler, notFoundHandler, type ErrorLog } from './errors.ts';
import type { Clock, DeploymentLookup, JobQueue, ModelCatalog } from './ports.ts';
import { jobRoutes } from './routes/jobs.ts';
import { oipRoutes } from './routes/oip.ts';
import { newJobId } from './use-cases/submit-job.ts';

export interface AppDeps {
  jobs: JobQueue;
  catalog: ModelCatalog;
  deployments: DeploymentLookup;
  apiKeys: readonly ApiKey[];
  metrics: {
    registry: Registry;
    /** When given, the app counts requests and submitted jobs on it. */
    api?: ApiMetrics;
    /** Prometheus text for `/metrics`: the API's registry merged with the workers' snapshots. */
    render: () => Promise<string>;
  };
  clock: Clock;
  bodyLimitBytes: number;
  syncTimeoutMs: number;
  /** Rows one request may carry; unlimited when absent. */
  maxRows?: number;
  /** `/v2/health/ready`; ready when absent. */
  ready?: () => Promise<boolean>;
  newId?: () => string;
  log?: ErrorLog;
}

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export function createApp(deps: AppDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.onError(errorHandler(deps.log));
  app.notFound(notFoundHandler);
  if (deps.metrics.api) app.use('*', requestMetrics(deps.metrics.api, deps.clock));
  app.use(
    '*',
    bodyLimit({
      maxSize: deps.bodyLimitBytes,
      onError: (c) => c.json(errorBody('body_too_large', `request body is larger than ${deps.bodyLimitBytes} bytes`), 413),
    }),
  );

  app.get('/v2/health/live', (c) => c.json({ live: true }));
  app.get('/v2/health/ready', async (c) => {
    const ready = deps.ready ? await deps.ready().catch(() => false) : true;
    return c.json({ ready }, ready ? 200 : 503);
  });
  app.get('/metrics', async (c) => c.body(await deps.metrics.render(), 200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE }));

  const auth = bearerAuth(deps.apiKeys);
  app.use('/v1/*', auth);
  app.use('/v2/models/*', auth);

  const jobMetrics = deps.metrics.api?.jobsSubmitted;
  const useCaseDeps = {
    jobs: deps.jobs,
    catalog: deps.catalog,
    deployments: deps.deployments,
    clock: deps.clock,
    newId: deps.newId ?? newJobId,
    maxRows: deps.maxRows,
    syncTimeoutMs: deps.syncTimeoutMs,
    onSubmitted: jobMetrics ? (e: { model: string; version: string; kind: 'async' | 'sync' }) => jobMetrics.inc(e) : undefined,
  };
  app.route('/', jobRoutes(useCaseDeps));
  app.route('/', oipRoutes(useCaseDeps));
  return app;
}

/** Counts and times every request by its route pattern (never the raw path: bounded labels). */
function requestMetrics(metrics: ApiMetrics, clock: Clock): MiddlewareHandler {
  return async (c, next) => {
    const started = clock.now();
    await next();
    const route = routePath(c, -1);
    metrics.httpRequests.inc({ route, method: c.req.method, status: String(c.res.status) });
    metrics.httpDuration.observe({ route, method: c.req.method }, Math.max(0, clock.now() - started) / 1000);
  };
}
