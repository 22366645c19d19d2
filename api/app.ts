/**
 * The HTTP API as a hono app, built from its dependencies (no I/O at import): served by
 * @hono/node-server in api/main.ts, wrapped by `handle()` on Lambda, and exercised with
 * `app.request()` in tests.
 *
 * Auth, then the tenant's rate limit, cover `/v1/*` and `/v2/models/*`; health is open, and so
 * is `GET /`, a small index of where things are (the docs, the OpenAPI document, the dashboard,
 * health), so a newcomer's first curl finds its way instead of a bare 404.
 * `/metrics` takes an admin tenant's key or METRICS_TOKEN (api/http/metrics-auth.ts); api/main.ts
 * may also serve it without auth on METRICS_PORT (DESIGN §5).
 */
import { createRequire } from 'node:module';
import { Hono, type MiddlewareHandler } from 'hono';
import { routePath } from 'hono/route';
import type { Registry } from 'prom-client';
import type { CanaryPolicy } from '../infra/canary/index.ts';
import type { BulkRuns } from '../infra/contracts/bulk.ts';
import type { Backlog } from '../infra/contracts/pool.ts';
import { createDemandBell } from '../infra/fleet/pool-demand.ts';
import { API_LIMIT_DEFAULTS, type ApiKey, type Config, type ScalerTuning } from '../infra/kernel/config.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import type { ReplayThreads } from '../infra/simulator/index.ts';
import type { ApiMetrics } from '../infra/telemetry/metrics.ts';
import { dashboardPageRoutes } from './dashboard/page.ts';
import { dashboardRoutes, sessionRoutes } from './dashboard/routes.ts';
import { type AuthEnv, bearerAuth } from './http/auth.ts';
import { type AuthFailureLimit, authFailureGuard } from './http/auth-failures.ts';
import { bodyLimit } from './http/body-limit.ts';
import { compressResponses } from './http/content-encoding.ts';
import { errorBody } from './http/error-body.ts';
import { errorHandler, notFoundHandler } from './http/errors.ts';
import type { IdempotencyStore } from './http/idempotency.ts';
import { answerLimits } from './http/infer-response.ts';
import { metricsAuth } from './http/metrics-auth.ts';
import { type RateLimitSettings, rateLimit } from './http/rate-limit.ts';
import { createStreamSlots } from './http/stream-slots.ts';
import { openApiRoutes } from './openapi/routes.ts';
import type { Clock, DeploymentLookup, JobQueue, JobView, ModelCatalog } from './ports.ts';
import { bulkRunRoutes } from './routes/bulk-runs.ts';
import { canaryRoutes } from './routes/canary.ts';
import { deploymentRoutes } from './routes/deployments.ts';
import { edgeCatalogRoutes } from './routes/edge-catalog.ts';
import { type JobWatcher, jobEventRoutes, WAIT_CHECK_MS } from './routes/job-events.ts';
import { jobRoutes } from './routes/jobs.ts';
import { oipRoutes } from './routes/oip.ts';
import { poolRoutes } from './routes/pool.ts';
import { sharedPoolRoutes } from './routes/shared-pools.ts';
import { webhookRoutes } from './routes/webhooks.ts';
import type { JobCanceler } from './use-cases/cancel-job.ts';
import type { DeploymentAdmin } from './use-cases/deployments.ts';
import { type FleetView, redisFleetView } from './use-cases/fleet-view.ts';
import type { InferSyncDeps } from './use-cases/infer-sync.ts';
import type { PoolUseCaseDeps } from './use-cases/shared-pools.ts';
import { newJobId, type SubmitJobDeps } from './use-cases/submit-job.ts';
import { type WaitReason, type WaitReasonDeps, waitReason } from './use-cases/wait-reason.ts';

/** The job queue as the app uses it: the JobQueue port plus cancel and watch. */
export type AppJobQueue = JobQueue & JobCanceler & JobWatcher;

export interface AppDeps {
  jobs: AppJobQueue;
  catalog: ModelCatalog;
  /** Read by submit (which version, what bound); administered by the deployments routes. */
  deployments: DeploymentLookup & DeploymentAdmin;
  apiKeys: readonly ApiKey[];
  /** Webhook secrets and deliveries (api/webhooks) and canary status; absent without it. */
  webhooks?: { redis: RedisClient; prefix: string };
  /** Bulk scoring runs (infra/bulk): `/v1/bulk-runs`; api/main.ts always wires it, absent = no such routes. */
  bulkRuns?: BulkRuns;
  /**
   * Arrivals per minute for the scaler's forecast, held in memory and flushed to the history
   * (infra/telemetry/arrival-counter.ts): recording never waits on Redis, and a failed flush is
   * the counter's to report, so a queued job never fails for it.
   */
  arrivals?: { recordArrival(model: string, count?: number): void; recordCached?(model: string, count?: number): void };
  /** The pool view (`GET /v1/pool`): a deployment's queues summed over its versions. */
  backlog?: (target: { model: string; versions: readonly string[] }) => Promise<Backlog>;
  /** The live scaler's settings (config's `scaler`), which the dashboard's simulator replays; no dashboard routes without them. */
  scaler?: ScalerTuning;
  /** The dashboard simulation's CPU-time budget and per-tenant rate (config's `api.simulation`); API_LIMIT_DEFAULTS when absent. */
  simulation?: Config['api']['simulation'];
  /** The dashboard simulations' replay threads, kept between calls; a thread per call without them. */
  replayThreads?: ReplayThreads;
  /** Concurrent job event streams per tenant and in all (config's `api.sse`); API_LIMIT_DEFAULTS when absent. */
  sse?: Config['api']['sse'];
  /** Shared pools (`/v1/pools`, infra/deployments/pool-store.ts); api/main.ts always wires them, absent = no such routes. */
  pools?: PoolUseCaseDeps['pools'];
  /** Tenants allowed to change deployments and shared pools (ADMIN_TENANTS); none when absent. */
  adminTenants?: readonly string[];
  /** The canary guard's policy, so the status route judges as the guard does. */
  canary?: { policy?: Partial<CanaryPolicy>; tickMs?: number };
  metrics: {
    registry: Registry;
    /** When given, the app counts requests and submitted jobs on it. */
    api?: ApiMetrics;
    /** Prometheus text for `/metrics`: the API's registry merged with the workers' snapshots. */
    render: () => Promise<string>;
    /** METRICS_TOKEN: a bearer token that may read `/metrics`, besides admin tenants' keys. */
    token?: string;
  };
  clock: Clock;
  bodyLimitBytes: number;
  syncTimeoutMs: number;
  /** Rows one request may carry (MAX_ROWS_PER_JOB); unlimited when absent. */
  maxRows?: number;
  /** Elements one input may declare, a zero-length axis counted as 1 (MAX_ELEMENTS_PER_JOB); unlimited when absent. */
  maxElements?: number;
  /** BYTES elements (strings) one request may carry over all its inputs (MAX_BYTES_ELEMENTS_PER_JOB); unlimited when absent. */
  maxBytesElements?: number;
  /** Output elements one JSON answer may carry (MAX_JSON_OUTPUT_ELEMENTS); unlimited when absent. */
  maxJsonOutputElements?: number;
  /** A tenant's open jobs (infra/redis/open-jobs.ts) and their cap (MAX_OPEN_JOBS_PER_TENANT); no cap when absent. */
  openJobs?: SubmitJobDeps['openJobs'];
  /** A tenant's bytes kept in Redis (infra/redis/stored-bytes.ts) and their budget (MAX_STORED_BYTES_PER_TENANT); none when absent. */
  storedBytes?: SubmitJobDeps['storedBytes'];
  /** Idempotency-Key on job submission (api/http/idempotency.ts, TTL IDEMPOTENCY_TTL_S). */
  idempotency: IdempotencyStore;
  /** Wrong API keys per source address (AUTH_FAILURE_LIMIT_PER_MIN, api/http/auth-failures.ts); no limit when absent. */
  authFailures?: AuthFailureLimit;
  /** Per-tenant token buckets on `/v1/*` and `/v2/models/*` (RATE_LIMIT_RPS/BURST, RATE_LIMIT_BYTES_PER_S/BURST); no limit when absent. */
  rateLimit?: RateLimitSettings;
  /** WEBHOOK_ALLOWED_PRIVATE_HOSTS: hosts a job's webhook may name although private; none when absent. */
  webhookAllowedPrivateHosts?: readonly string[];
  /** Keep-alive comment period of job event streams; default 15 s. */
  sseHeartbeatMs?: number;
  /**
   * The workers' heartbeats, read by submit for a version no deployment lists and by a sync
   * call that timed out (api/use-cases/fleet-view.ts). Default: the heartbeats on `webhooks.redis`;
   * none (no worker known) without either.
   */
  fleet?: FleetView;
  /**
   * The shared pools' demand doorbell, rung when a job is queued for a pool member (submit-job.ts
   * step 4). Default: one over `webhooks.redis`; none (placement waits for the scaler's tick) without it.
   */
  poolDemand?: SubmitJobDeps['poolDemand'];
  /** `/v2/health/ready`; ready when absent. */
  ready?: () => Promise<boolean>;
  newId?: () => string;
  log?: Log;
}

/** OIP server metadata's `version`: the package's. */
const SERVER_VERSION = (createRequire(import.meta.url)('../package.json') as { version: string }).version;

/** `GET /`: where things are. */
export const SERVER_INDEX = {
  name: 'warmpool',
  version: SERVER_VERSION,
  docs: '/docs',
  openapi: '/openapi.json',
  dashboard: '/dashboard',
  health: '/v2/health/ready',
} as const;

export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export function createApp(deps: AppDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.onError(errorHandler(deps.log));
  app.notFound(notFoundHandler);
  if (deps.metrics.api) app.use('*', requestMetrics(deps.metrics.api, deps.clock));
  app.use(
    '*',
    // Connection: close: the rest of the body is never read, so the connection cannot carry another request.
    bodyLimit(deps.bodyLimitBytes, (c) =>
      c.json(errorBody('body_too_large', `request body is larger than ${deps.bodyLimitBytes} bytes`), 413, { Connection: 'close' }),
    ),
  );

  // Accept-Encoding: gzip|deflate, as Triton answers; free for requests that do not ask.
  app.use('*', compressResponses());

  app.get('/', (c) => c.json(SERVER_INDEX));
  app.get('/v2', (c) => c.json({ name: 'warmpool', version: SERVER_VERSION, extensions: ['binary_tensor_data'] }));
  app.get('/v2/health/live', (c) => c.json({ live: true }));
  app.get('/v2/health/ready', async (c) => {
    const ready = deps.ready ? await deps.ready().catch(() => false) : true;
    return c.json({ ready }, ready ? 200 : 503);
  });
  // The API described (/openapi.json) and browsable (/docs), open like health.
  app.route('/', openApiRoutes());
  // The dashboard's page and assets are open too: the shell holds no data, its calls carry a key.
  app.route('/', dashboardPageRoutes());

  const onFailure = deps.authFailures ? authFailureGuard(deps.authFailures, deps.clock) : undefined;
  const auth = bearerAuth(deps.apiKeys, { onFailure });
  // Every model's name and traffic, across tenants: for admins and the scraper's token only.
  const metricsReader = metricsAuth({ apiKeys: deps.apiKeys, adminTenants: deps.adminTenants ?? [], token: deps.metrics.token, onFailure });
  app.get('/metrics', metricsReader, async (c) => c.body(await deps.metrics.render(), 200, { 'Content-Type': PROMETHEUS_CONTENT_TYPE }));
  for (const path of ['/v1/*', '/v2/models/*']) {
    app.use(path, auth);
    if (deps.rateLimit) app.use(path, rateLimit(deps.rateLimit, deps.clock, deps.bodyLimitBytes));
  }

  const useCaseDeps = inferenceDeps(deps);
  // Answers with outputs: bounded as JSON, and charged to the tenant's byte budget (api/http/infer-response.ts).
  const answers = answerLimits(deps.rateLimit, deps.clock, deps.maxJsonOutputElements);
  // Why a queued job waits, read once per version and interval for every poll and stream of this process.
  const why = sharedWaitReasons(useCaseDeps, deps.clock);
  app.route('/', jobRoutes({ ...useCaseDeps, answers, why }));
  const sse = deps.sse ?? API_LIMIT_DEFAULTS.sse;
  const slots = createStreamSlots({ perTenant: sse.maxStreamsPerTenant, total: sse.maxStreams });
  const events = { jobs: deps.jobs, clock: deps.clock, heartbeatMs: deps.sseHeartbeatMs ?? 15_000, slots, why, log: deps.log };
  app.route('/', jobEventRoutes({ ...events, maxJsonOutputElements: deps.maxJsonOutputElements }));
  app.route('/', oipRoutes({ ...useCaseDeps, answers }));
  const edgeLimits = {
    bodyLimitBytes: deps.bodyLimitBytes,
    ...(deps.maxRows !== undefined ? { maxRows: deps.maxRows } : {}),
    ...(deps.maxElements !== undefined ? { maxElements: deps.maxElements } : {}),
    ...(deps.maxBytesElements !== undefined ? { maxBytesElements: deps.maxBytesElements } : {}),
  };
  app.route('/', edgeCatalogRoutes({ catalog: deps.catalog, deployments: deps.deployments, limits: edgeLimits }));
  if (deps.bulkRuns) {
    app.route('/', bulkRunRoutes({ bulkRuns: deps.bulkRuns, webhookAllowedPrivateHosts: useCaseDeps.webhookAllowedPrivateHosts }));
  }
  // Reading deployments is for every tenant; changing one changes every tenant's jobs.
  app.use('/v1/deployments/*', adminOnly(deps.adminTenants ?? [], 'deployments'));
  app.route('/', deploymentRoutes({ deployments: deps.deployments, catalog: deps.catalog }));
  if (deps.pools) {
    // A shared pool's workers serve every tenant's jobs for the models that joined it.
    app.use('/v1/pools/*', adminOnly(deps.adminTenants ?? [], 'shared pools'));
    app.route('/', sharedPoolRoutes({ pools: deps.pools, deployments: deps.deployments }));
  }
  if (deps.webhooks) {
    app.route('/', webhookRoutes({ ...deps.webhooks, clock: deps.clock }));
    app.route('/', canaryRoutes({ ...deps.webhooks, ...deps.canary, clock: deps.clock }));
    if (deps.backlog) {
      app.route('/', poolRoutes({ ...deps.webhooks, backlog: deps.backlog, clock: deps.clock, adminTenants: deps.adminTenants }));
      if (deps.scaler) {
        const simulation = deps.simulation ?? API_LIMIT_DEFAULTS.simulation;
        const dashboard = { ...deps.webhooks, backlog: deps.backlog, clock: deps.clock, scaler: deps.scaler, simulation };
        app.route('/', dashboardRoutes({ ...dashboard, limiter: deps.rateLimit?.limiter, replayThreads: deps.replayThreads }));
      }
    }
  }
  app.route('/', sessionRoutes(deps.adminTenants ?? []));
  return app;
}

/**
 * What submitting and sync inference need, built from the app's dependencies: shared by the
 * HTTP routes and the OIP gRPC service (api/grpc/), so both place requests the same way and
 * count them on the same metrics.
 */
export function inferenceDeps(deps: AppDeps): InferSyncDeps & { jobs: AppJobQueue } {
  const jobMetrics = deps.metrics.api?.jobsSubmitted;
  const fleet = deps.fleet ?? (deps.webhooks ? redisFleetView(deps.webhooks.redis, deps.webhooks.prefix, deps.clock) : undefined);
  const poolDemand =
    deps.poolDemand ?? (deps.webhooks ? createDemandBell(deps.webhooks.redis, deps.webhooks.prefix, deps.clock) : undefined);
  return {
    jobs: deps.jobs,
    catalog: deps.catalog,
    deployments: deps.deployments,
    clock: deps.clock,
    newId: deps.newId ?? newJobId,
    idempotency: deps.idempotency,
    webhookAllowedPrivateHosts: deps.webhookAllowedPrivateHosts ?? [],
    ...(deps.maxRows !== undefined ? { maxRows: deps.maxRows } : {}),
    ...(deps.maxElements !== undefined ? { maxElements: deps.maxElements } : {}),
    ...(deps.maxBytesElements !== undefined ? { maxBytesElements: deps.maxBytesElements } : {}),
    ...(deps.openJobs ? { openJobs: deps.openJobs } : {}),
    ...(deps.storedBytes ? { storedBytes: deps.storedBytes } : {}),
    ...(fleet ? { fleet } : {}),
    ...(poolDemand ? { poolDemand } : {}),
    syncTimeoutMs: deps.syncTimeoutMs,
    onSubmitted: (e) => {
      jobMetrics?.inc({ model: e.model, version: e.version, kind: e.kind });
      // The scaler forecasts from these (rows, the unit of a worker's measured throughput).
      deps.arrivals?.recordArrival(e.model, e.rows);
    },
    // Beside the arrivals, never in them: the dashboard shows the traffic the cache took off the workers.
    onCached: (e) => deps.arrivals?.recordCached?.(e.model, e.rows),
  };
}

function adminOnly(admins: readonly string[], what: string): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    if (c.req.method !== 'GET' && c.req.method !== 'HEAD' && !admins.includes(c.get('tenant'))) {
      throw new InvalidInputError('forbidden', `tenant ${c.get('tenant')} may not change ${what}: it is not in ADMIN_TENANTS`, {
        status: 403,
      });
    }
    await next();
  };
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

/**
 * Why a queued job waits, read at most once per model version every WAIT_CHECK_MS for all the
 * event streams and job reads of this process: a thousand streams or polls on one cold deployment
 * cost one read, not a thousand (the reason is the version's, not the job's).
 */
function sharedWaitReasons(deps: WaitReasonDeps, clock: Clock): (view: JobView) => Promise<WaitReason | undefined> {
  const recent = new Map<string, { at: number; reason: Promise<WaitReason | undefined> }>();
  return (view) => {
    if (view.status !== 'queued') return waitReason(deps, view, view.status);
    const key = `${view.model}@${view.version}`;
    const now = clock.now();
    const kept = recent.get(key);
    if (kept && now >= kept.at && now - kept.at < WAIT_CHECK_MS) return kept.reason;
    const reason = waitReason(deps, view, view.status);
    recent.set(key, { at: now, reason });
    // Versions seen once stay one entry each; ones not asked about for a while are dropped.
    for (const [k, v] of recent) if (now - v.at > 10 * WAIT_CHECK_MS) recent.delete(k);
    return reason;
  };
}
