/**
 * The API app built from a Config on the real services, as api/main.ts builds it, but with the
 * dependencies a test wants to drive (a ManualClock, tighter rate limits) swapped in, and served
 * on a free port. Workers come from test/support/stack.ts on the same Config.
 */
import { serve } from '@hono/node-server';
import type { AddressInfo } from 'node:net';
import { Registry } from 'prom-client';
import { createApp, type AppDeps } from '../../api/app.ts';
import { createBullJobQueue, type BullJobQueue } from '../../infra/bullmq-job-queue.ts';
import { systemClock, type Clock } from '../../infra/clock.ts';
import type { Config } from '../../infra/config.ts';
import { createDeploymentStore } from '../../infra/deployments.ts';
import { createIdempotencyStore } from '../../infra/idempotency.ts';
import { createRateLimiter } from '../../infra/rate-limiter.ts';
import { closeRedis, createRedis } from '../../infra/redis.ts';
import { createModelRegistry } from '../../infra/registry.ts';
import { createS3ObjectStore } from '../../infra/s3-object-store.ts';

export interface TestApi {
  url: string;
  jobs: BullJobQueue;
  /** fetch against this API with `key` as the bearer token (none when null). */
  call(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  close(): Promise<void>;
}

export interface TestApiOptions {
  clock?: Clock;
  /** Default: the Config's RATE_LIMIT_RPS / RATE_LIMIT_BURST. */
  rateLimit?: { rps: number; burst: number };
  deps?: Partial<AppDeps>;
}

export async function startTestApi(config: Config, options: TestApiOptions = {}): Promise<TestApi> {
  const clock = options.clock ?? systemClock;
  const redis = createRedis(config.redisUrl);
  const store = createS3ObjectStore(config.s3);
  const jobs = createBullJobQueue({
    connection: config.redisUrl,
    prefix: config.queuePrefix,
    retentionS: config.jobs.retentionS,
    attempts: config.jobs.attempts,
    clock,
  });
  const metrics = new Registry();
  const app = createApp({
    jobs,
    catalog: createModelRegistry({ store, prefix: config.s3.prefix }),
    deployments: createDeploymentStore(redis, config.queuePrefix),
    apiKeys: config.api.apiKeys,
    metrics: { registry: metrics, render: () => metrics.metrics() },
    clock,
    bodyLimitBytes: config.api.bodyLimitBytes,
    syncTimeoutMs: config.api.syncTimeoutMs,
    idempotency: createIdempotencyStore(redis, { prefix: config.queuePrefix, ttlS: config.jobs.idempotencyTtlS, clock }),
    rateLimit: { limiter: createRateLimiter(redis, { prefix: config.queuePrefix }), ...(options.rateLimit ?? config.rateLimit) },
    webhookAllowedPrivateHosts: config.webhooks.allowedPrivateHosts,
    ...options.deps,
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () => resolve(s));
  });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closing: Promise<void> | undefined;
  return {
    url,
    jobs,
    call(path, init = {}) {
      const { key = null, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key !== null) headers.set('authorization', `Bearer ${key}`);
      if (rest.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${url}${path}`, { ...rest, headers });
    },
    close() {
      closing ??= (async () => {
        // Open streams (SSE) would keep server.close() waiting: end them first.
        if ('closeAllConnections' in server) server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
        await jobs.close();
        await closeRedis(redis);
        store.close();
      })();
      return closing;
    },
  };
}
