import { Hono } from 'hono';
import type { AuthEnv } from '../../api/http/auth.ts';
import { errorHandler, notFoundHandler } from '../../api/http/errors.ts';
import { poolRoutes } from '../../api/routes/pool.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import type { QueueStats } from '../../infra/queue/index.ts';
import type { RedisClient } from '../../infra/redis/client.ts';

/** The `/v1/pool` routes as `tenant` calls them (auth is app.ts's, stood in for here); `ops` is the admin. */
export function poolApp(
  deps: { redis: RedisClient; prefix: string; queueStats: Pick<QueueStats, 'backlog'>; clock: Clock },
  tenant = 'ops',
): Hono<AuthEnv> {
  const a = new Hono<AuthEnv>();
  a.onError(errorHandler(undefined));
  a.notFound(notFoundHandler);
  a.use('*', async (c, next) => {
    c.set('tenant', tenant);
    await next();
  });
  const { redis, prefix, queueStats, clock } = deps;
  a.route('/', poolRoutes({ redis, prefix, backlog: (t) => queueStats.backlog(t), clock, adminTenants: ['ops'] }));
  return a;
}
