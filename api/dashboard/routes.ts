/**
 * The dashboard's JSON routes, behind the same auth as the rest of `/v1/*` (app.ts applies it):
 *
 *   GET /v1/session                            who this key is, and whether it may change deployments
 *   GET /v1/deployments/:model/series          the charts' series (use-cases/deployment-series.ts)
 *   GET /v1/deployments/:model/simulation      the recorded arrivals replayed through a policy (use-cases/simulate-deployment.ts)
 *
 * The pool, the decision log and the deployment's settings come from the routes that already
 * serve them (`GET /v1/pool`, `GET/PUT /v1/deployments/:model`).
 */
import { Hono } from 'hono';
import type { z } from 'zod';
import type { Backlog } from '../../infra/contracts/pool.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import type { ScalerTuning } from '../../infra/kernel/config.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { decisionStreamKey } from '../../infra/redis/keys.ts';
import type { DecisionRecord } from '../../infra/scaler/index.ts';
import { createArrivalHistory } from '../../infra/telemetry/arrival-history.ts';
import type { AuthEnv } from '../http/auth.ts';
import { createPoolSamples } from '../insights/samples.ts';
import { deploymentSeries } from '../use-cases/deployment-series.ts';
import { createDeploymentSimulator } from '../use-cases/simulate-deployment.ts';
import { SeriesQuery, SimulationQuery } from './schemas.ts';

export interface DashboardRoutesDeps {
  redis: RedisClient;
  prefix: string;
  clock: Clock;
  backlog: (target: { model: string; versions: readonly string[] }) => Promise<Backlog>;
  /** Least time between two pool samples of a model; default 2 s. */
  sampleIntervalMs?: number;
  /** The live scaler's settings (config's `scaler`): what the simulator replays. */
  scaler: ScalerTuning;
}

/** `GET /v1/session`: the page's sign-in check, and whether to offer changes or say why not. */
export function sessionRoutes(adminTenants: readonly string[]): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  app.get('/v1/session', (c) => c.json({ tenant: c.get('tenant'), admin: adminTenants.includes(c.get('tenant')) }));
  return app;
}

export function dashboardRoutes(deps: DashboardRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const data = {
    deployments: createDeploymentStore(deps.redis, deps.prefix),
    arrivals: createArrivalHistory(deps.redis, deps.prefix, deps.clock),
    samples: createPoolSamples({ ...deps, minIntervalMs: deps.sampleIntervalMs }),
    decisionsSince: (model: string, fromMs: number) => decisionsSince(deps.redis, deps.prefix, model, fromMs),
    heartbeats: () => listHeartbeats(deps.redis, deps.prefix),
    clock: deps.clock,
  };
  const simulate = createDeploymentSimulator({ ...data, scaler: deps.scaler });

  app.get('/v1/deployments/:model/series', async (c) => {
    const { minutes } = parseQuery(SeriesQuery, c.req.query());
    return c.json(await deploymentSeries(data, c.req.param('model'), minutes));
  });

  app.get('/v1/deployments/:model/simulation', async (c) => {
    const { minutes, sloMs, ...choice } = parseQuery(SimulationQuery, c.req.query());
    return c.json(await simulate(c.req.param('model'), minutes, { ...choice, sloQueueWaitMs: sloMs }));
  });

  return app;
}

/** The model's decision records from `fromMs` on, oldest first (stream ids are the records' times). */
async function decisionsSince(redis: RedisClient, prefix: string, model: string, fromMs: number): Promise<DecisionRecord[]> {
  const entries = await redis.xrange(decisionStreamKey(prefix, model), String(Math.max(0, Math.floor(fromMs))), '+');
  const records: DecisionRecord[] = [];
  for (const [, fields] of entries) {
    const i = fields.indexOf('record');
    try {
      if (i >= 0 && i % 2 === 0) records.push(JSON.parse(fields[i + 1] ?? '') as DecisionRecord);
    } catch {
      // A malformed entry is skipped, as decision-log.ts does.
    }
  }
  return records;
}

function parseQuery<T>(schema: z.ZodType<T>, query: Record<string, string>): T {
  const parsed = schema.safeParse(query);
  if (parsed.success) return parsed.data;
  const message = parsed.error.issues.map((i) => `${i.path.join('.') || 'query'}: ${i.message}`).join('; ');
  throw new InvalidInputError('invalid_query', message, { cause: parsed.error });
}
