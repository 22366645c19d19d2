/**
 * `warmpool api`: the API process's one entry. Wires BullMQ, the registry, deployments and
 * metrics into `createApp`, serves it with @hono/node-server (under Bun, with Bun's own server:
 * api/http-listener.ts), and drains on SIGTERM. With GRPC_PORT set it also serves the Open
 * Inference Protocol over gRPC (api/grpc/), on the same dependencies as the HTTP routes;
 * grpc-js is loaded only then.
 */

import { Registry } from 'prom-client';
import { createBulkRuns, createBulkWiring } from '../infra/bulk/index.ts';
import { cacheDeployments } from '../infra/deployments/deployment-cache.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { type Clock, systemClock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { closeAll, onShutdownSignals } from '../infra/kernel/lifecycle.ts';
import { createLogger, type Logger } from '../infra/kernel/log.ts';
import { type BullJobQueue, createBullJobQueue, createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, FAIL_FAST_REDIS_OPTIONS } from '../infra/redis/client.ts';
import { createOpenJobs } from '../infra/redis/open-jobs.ts';
import { createStoredBytes } from '../infra/redis/stored-bytes.ts';
import { cacheManifests } from '../infra/registry/manifest-cache.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { createReplayThreads } from '../infra/simulator/index.ts';
import { createArrivalCounter } from '../infra/telemetry/arrival-counter.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { createApiMetrics, readMetricsSnapshots, renderClusterMetrics } from '../infra/telemetry/metrics.ts';
import { type AppDeps, createApp, inferenceDeps } from './app.ts';
import type { GrpcServiceDeps } from './grpc/service.ts';
import { createIdempotencyStore } from './http/idempotency.ts';
import { createRateLimiter } from './http/rate-limiter.ts';
import { listen } from './http-listener.ts';
import { startMetricsServer } from './metrics-server.ts';
import { createBulkNotifier } from './webhooks/bulk-notifier.ts';
import { createDeliveryStore } from './webhooks/delivery-store.ts';

export interface ApiServer {
  url: string;
  /** `/metrics` without auth on METRICS_PORT; absent when that is unset. */
  metricsUrl?: string;
  /** The OIP gRPC service's `host:port` (a gRPC target, no scheme) on GRPC_PORT; absent when that is unset. */
  grpcUrl?: string;
  grpcPort?: number;
  /** The server it runs on: @hono/node-server, or Bun's own under Bun (api/http-listener.ts). */
  runtime: 'node' | 'bun';
  jobs: BullJobQueue;
  close(): Promise<void>;
}

/**
 * The API's connections: fail fast (infra/redis/client.ts), and auto-pipelined. A submit issues several
 * commands from concurrent requests in the same event-loop turn (rate limit, idempotency, cache
 * lookup, Queue.add); ioredis then writes them to the socket together. Measured: API CPU −5 to
 * −15%, Redis CPU per submit −25 to −35% (docs/BENCHMARKS.md). Only the API's: the worker gained
 * nothing, and BullMQ Workers have reported trouble with it (bull #2276, bullmq #457).
 */
const API_REDIS_OPTIONS = { ...FAIL_FAST_REDIS_OPTIONS, enableAutoPipelining: true } as const;

/** How long an API entry waits for its first Redis connection before serving anyway. */
export const STARTUP_REDIS_WAIT_MS = 3_000;

/**
 * SIGTERM's drain limit: the API closes its sockets at once (a client retries elsewhere); what
 * remains is closing connections, which must not wait long on a Redis that is gone.
 */
const API_DRAIN_LIMIT_MS = 10_000;

function redisReady(
  redis: { status: string; once(event: 'ready', fn: () => void): unknown; off(event: 'ready', fn: () => void): unknown },
  timeoutMs: number,
): Promise<boolean> {
  if (redis.status === 'ready') return Promise.resolve(true);
  return new Promise((resolve) => {
    const onReady = () => {
      clearTimeout(timer);
      resolve(true);
    };
    const timer = setTimeout(() => {
      redis.off('ready', onReady);
      resolve(false);
    }, timeoutMs);
    timer.unref();
    redis.once('ready', onReady);
  });
}

export interface ApiRuntime {
  app: ReturnType<typeof createApp>;
  jobs: BullJobQueue;
  /**
   * Resolves true once the Redis connection is ready, false after `timeoutMs`. Commands fail
   * fast while it is not (FAIL_FAST_REDIS_OPTIONS), so an entry waits for this before its first
   * request rather than answering that request 503 on a cold start.
   */
  connected(timeoutMs: number): Promise<boolean>;
  /** The Prometheus text `/metrics` serves, for METRICS_PORT's listener. */
  renderMetrics(): Promise<string>;
  /** What the gRPC service runs on: the app's own inference dependencies, auth and limits (api/grpc/service.ts). */
  grpc: GrpcServiceDeps;
  /** Closes the connections the app uses; idempotent. */
  close(): Promise<void>;
}

/** What a test (or an embedding) may swap: the clock, and any of the app's dependencies. */
export interface ApiOverrides {
  clock?: Clock;
  deps?: Partial<AppDeps>;
}

/** The app and the connections behind it: shared by the node server and the Lambda entry. */
export function createApiRuntime(config: Config, log: Logger, overrides: ApiOverrides = {}): ApiRuntime {
  const clock = overrides.clock ?? systemClock;
  const { enabled: _guardRunsElsewhere, tickMs: _tick, ...canaryPolicy } = config.canary;
  if (config.api.apiKeys.length === 0) log.warn('API_KEYS is empty: every authenticated route will answer 401');
  const redisError = (err: Error) => log.warn({ err: err.message }, 'redis connection error');
  // Fail fast while Redis is down: a request answers 503 at once instead of hanging (infra/redis/client.ts).
  const redis = createRedis(config.redisUrl, API_REDIS_OPTIONS, redisError);
  const store = createS3ObjectStore(config.s3);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  // Read by every submit: from memory for a second (infra/deployments/deployment-cache.ts).
  const deployments = cacheDeployments(createDeploymentStore(redis, config.queuePrefix), { clock });
  // A tenant's queued + running jobs, capped at submit; an entry left behind ages out after a retention.
  const openJobs = createOpenJobs(redis, { prefix: config.queuePrefix, horizonMs: config.jobs.retentionS * 1000, clock });
  const metricsRegistry = new Registry();
  const apiMetrics = createApiMetrics(metricsRegistry);
  const jobs = createBullJobQueue({
    connection: config.redisUrl,
    redisOptions: API_REDIS_OPTIONS,
    prefix: config.queuePrefix,
    retentionS: config.jobs.retentionS,
    attempts: config.jobs.attempts,
    onError: redisError,
    clock,
    openJobs,
    coalesceMaxRequests: config.jobs.coalesceMaxRequests,
    // Admission's backlog read, once a second per queue rather than once per request.
    depthCacheMs: 1000,
    onEntryWritten: ({ queue, members }) => {
      apiMetrics.queueEntries.inc({ queue });
      apiMetrics.queueEntryJobs.inc({ queue }, members);
    },
  });
  const queueStats = createQueueStats({ redis, prefix: config.queuePrefix, clock });
  // Summed in memory, one write a second: a MULTI per submit cost the API 3% of its CPU.
  const arrivals = createArrivalCounter(createArrivalHistory(redis, config.queuePrefix, clock), clock, {
    onError: (err) => log.warn({ err }, 'arrivals not recorded'),
  });
  const renderMetrics = async () => renderClusterMetrics(metricsRegistry, await readMetricsSnapshots(redis, config.queuePrefix));
  const catalog = overrides.deps?.catalog ?? cacheManifests(registry, { clock });
  // The API starts, reads and cancels runs; the dispatcher's supervisor drives them. A cancel's
  // webhook event is stored from here, for the dispatcher to deliver.
  const bulk = createBulkWiring(config, {
    redis,
    log: log.child({ component: 'bulk' }),
    clock,
    getManifest: (model, version) => catalog.getManifest(model, version),
    notify: createBulkNotifier({ store: createDeliveryStore(redis, config.queuePrefix), clock }),
  });
  // A simulation's replay and its baselines' search share a thread, and the next minute's (someone
  // trying settings on the page) finds it started; an idle one is ended after a minute.
  const replayThreads = createReplayThreads({ idleMs: 60_000 });
  const appDeps: AppDeps = {
    jobs,
    catalog,
    deployments,
    pools: createSharedPoolStore(redis, config.queuePrefix),
    apiKeys: config.api.apiKeys,
    metrics: {
      registry: metricsRegistry,
      api: apiMetrics,
      render: renderMetrics,
      token: config.api.metricsToken,
    },
    clock,
    bodyLimitBytes: config.api.bodyLimitBytes,
    syncTimeoutMs: config.api.syncTimeoutMs,
    maxRows: config.jobs.maxRowsPerJob,
    maxElements: config.jobs.maxElementsPerJob,
    maxBytesElements: config.jobs.maxBytesElementsPerJob,
    maxJsonOutputElements: config.api.maxJsonOutputElements,
    openJobs: { store: openJobs, maxPerTenant: config.jobs.maxOpenJobsPerTenant },
    // What a tenant's jobs keep in Redis, charged at submit; each charge expires with its retention.
    ...(config.jobs.maxStoredBytesPerTenant > 0
      ? {
          storedBytes: {
            ledger: createStoredBytes(redis, { prefix: config.queuePrefix, ttlMs: config.jobs.retentionS * 1000, clock }),
            maxPerTenant: config.jobs.maxStoredBytesPerTenant,
          },
        }
      : {}),
    idempotency: createIdempotencyStore(redis, { prefix: config.queuePrefix, ttlS: config.jobs.idempotencyTtlS, clock }),
    rateLimit: { limiter: createRateLimiter(redis, { prefix: config.queuePrefix }), ...config.rateLimit },
    ...(config.api.authFailureLimitPerMin > 0
      ? {
          authFailures: {
            limiter: createRateLimiter(redis, { prefix: config.queuePrefix }),
            perMinute: config.api.authFailureLimitPerMin,
            trustProxyHops: config.api.trustProxyHops,
          },
        }
      : {}),
    webhookAllowedPrivateHosts: config.webhooks.allowedPrivateHosts,
    webhooks: { redis, prefix: config.queuePrefix },
    adminTenants: config.api.adminTenants,
    arrivals,
    bulkRuns: createBulkRuns(bulk.deps),
    backlog: (target) => queueStats.backlog(target),
    scaler: config.scaler,
    simulation: config.api.simulation,
    replayThreads,
    sse: config.api.sse,
    canary: { policy: canaryPolicy, tickMs: config.canary.tickMs },
    ready: async () => redis.status === 'ready',
    log,
    ...overrides.deps,
  };
  const app = createApp(appDeps);
  let closing: Promise<void> | undefined;
  return {
    app,
    jobs,
    grpc: grpcDeps(appDeps),
    connected: (timeoutMs) => redisReady(redis, timeoutMs),
    renderMetrics: overrides.deps?.metrics?.render ?? renderMetrics,
    close() {
      closing ??= closeAll([
        ['jobs', () => jobs.close()],
        ['queue-stats', () => queueStats.close()],
        ['arrivals', () => arrivals.close()],
        ['redis', () => closeRedis(redis)],
        ['s3', () => store.close()],
        ['bulk-s3', () => bulk.close()],
        ['replay-threads', () => replayThreads.close()],
      ]);
      return closing;
    },
  };
}

/** The gRPC service's dependencies from the app's: the same queue, admission, caps and metrics hook as the HTTP routes. */
function grpcDeps(deps: AppDeps): GrpcServiceDeps {
  return {
    inference: inferenceDeps(deps),
    apiKeys: deps.apiKeys,
    clock: deps.clock,
    ...(deps.rateLimit ? { rateLimit: deps.rateLimit } : {}),
    ...(deps.authFailures ? { authFailures: deps.authFailures } : {}),
    ...(deps.ready ? { ready: deps.ready } : {}),
    ...(deps.log ? { log: deps.log.child({ transport: 'grpc' }) } : {}),
  };
}

/** The gRPC listener on GRPC_PORT, or undefined when unset; grpc-js is imported only here. */
async function startGrpc(config: Config, deps: GrpcServiceDeps) {
  if (config.api.grpcPort === undefined) return undefined;
  const { startGrpcServer } = await import('./grpc/server.ts');
  return startGrpcServer({
    host: config.api.host,
    port: config.api.grpcPort,
    maxMessageBytes: config.api.bodyLimitBytes,
    // The preface deadline is HTTP's for its headers: the same slow-client bound on both listeners.
    limits: { ...config.api.grpc, handshakeTimeoutMs: config.api.headersTimeoutMs },
    deps: { ...deps, decode: { maxElements: config.jobs.maxElementsPerJob, maxBytesElements: config.jobs.maxBytesElementsPerJob } },
  });
}

export async function startApiServer(config: Config, log: Logger, overrides: ApiOverrides = {}): Promise<ApiServer> {
  const { app, jobs, close, connected, renderMetrics, grpc: grpcServiceDeps } = createApiRuntime(config, log, overrides);
  // Serve even when Redis is down (readiness and job routes answer 503 until it is back).
  if (!(await connected(STARTUP_REDIS_WAIT_MS))) log.warn({ waitedMs: STARTUP_REDIS_WAIT_MS }, 'redis not ready; serving anyway');
  // Before the HTTP listener: a port already taken fails the start with nothing left open.
  const grpc = await startGrpc(config, grpcServiceDeps).catch(async (err: unknown) => {
    await close();
    throw err;
  });
  const server = await listen({ host: config.api.host, port: config.api.port, fetch: app.fetch, limits: config.api });
  const { port } = server;
  const host = config.api.host === '0.0.0.0' ? '127.0.0.1' : config.api.host;
  const metrics =
    config.api.metricsPort === undefined
      ? undefined
      : await startMetricsServer({ ...config.api, port: config.api.metricsPort, render: renderMetrics, log });
  let closing: Promise<void> | undefined;
  return {
    url: `http://${host}:${port}`,
    ...(metrics ? { metricsUrl: metrics.url } : {}),
    ...(grpc ? { grpcUrl: grpc.url, grpcPort: grpc.port } : {}),
    runtime: server.runtime,
    jobs,
    close() {
      closing ??= closeAll([
        ['metrics-http', async () => metrics?.close()],
        ['grpc', async () => grpc?.close()],
        ['http', () => server.close()],
        ['runtime', close],
      ]);
      return closing;
    },
  };
}

export async function apiMain(config: Config): Promise<number> {
  const log = createLogger(config.logLevel, { role: 'api' });
  const server = await startApiServer(config, log);
  const extra = { ...(server.metricsUrl ? { metricsUrl: server.metricsUrl } : {}), ...(server.grpcUrl ? { grpcUrl: server.grpcUrl } : {}) };
  log.info({ url: server.url, runtime: server.runtime, ...extra }, 'api listening');
  return new Promise<number>((resolve) => {
    onShutdownSignals(
      {
        drain: async () => {
          await server.close();
          resolve(0);
        },
        force: (signal, reason) => log.warn({ signal, reason }, 'forced exit'),
      },
      { forceAfterMs: API_DRAIN_LIMIT_MS },
    );
  });
}
