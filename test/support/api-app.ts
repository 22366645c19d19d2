/**
 * The API as api/main.ts builds it, on the real services, with what a test wants to drive
 * swapped in (a ManualClock, tighter rate limits, other app deps), served on a free port.
 * Workers come from test/support/stack.ts on the same Config.
 */

import type { AppDeps } from '../../api/app.ts';
import { createRateLimiter } from '../../api/http/rate-limiter.ts';
import { startApiServer } from '../../api/main.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import type { BullJobQueue } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';

export interface TestApi {
  url: string;
  /** `/metrics` on METRICS_PORT's listener, when the Config sets one. */
  metricsUrl?: string;
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
  const store = createS3ObjectStore(config.s3);
  const redis = createRedis(config.redisUrl);
  const deps: Partial<AppDeps> = {
    // Tests publish versions and read them back at once: no manifest cache in between.
    catalog: createModelRegistry({ store, prefix: config.s3.prefix }),
    ...options.deps,
  };
  if (options.rateLimit) deps.rateLimit = { limiter: createRateLimiter(redis, { prefix: config.queuePrefix }), ...options.rateLimit };
  const server = await startApiServer(
    // apiKeys and metricsToken are non-enumerable (secrets never serialise): a spread drops them.
    { ...config, api: { ...config.api, apiKeys: config.api.apiKeys, metricsToken: config.api.metricsToken, host: '127.0.0.1', port: 0 } },
    createLogger('silent'),
    {
      ...(options.clock ? { clock: options.clock } : {}),
      deps,
    },
  );
  return {
    url: server.url,
    ...(server.metricsUrl ? { metricsUrl: server.metricsUrl } : {}),
    jobs: server.jobs,
    call(path, init = {}) {
      const { key = null, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key !== null) headers.set('authorization', `Bearer ${key}`);
      if (rest.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${server.url}${path}`, { ...rest, headers });
    },
    async close() {
      await server.close();
      await closeRedis(redis);
      store.close();
    },
  };
}
