/**
 * The dashboard's JSON routes, behind the same auth as the rest of `/v1/*` (app.ts applies it):
 *
 *   GET /v1/session                            who this key is, and whether it may change deployments
 *   GET /v1/deployments/:model/series          the charts' series (use-cases/deployment-series.ts)
 *   GET /v1/deployments/:model/simulation      the recorded arrivals replayed through a policy (use-cases/simulate-deployment.ts)
 *
 * The pool, the decision log and the deployment's settings come from the routes that already
 * serve them (`GET /v1/pool`, `GET/PUT /v1/deployments/:model`).
 *
 * A simulation is the costliest request a tenant can make: besides its own bounds (the use case)
 * it is rate-limited per tenant, SIMULATIONS_PER_MIN in a token bucket in Redis shared by every
 * API process (a minute's worth may come at once), checked once the query is valid.
 */
import { Hono } from 'hono';
import type { z } from 'zod';
import type { Backlog } from '../../infra/contracts/pool.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import type { Clock } from '../../infra/kernel/clock.ts';
import type { Config, ScalerTuning } from '../../infra/kernel/config.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { decisionStreamKey, scalerWorkerRateKey } from '../../infra/redis/keys.ts';
import type { DecisionRecord } from '../../infra/scaler/index.ts';
import { type ReplayThreads, replayBounded, searchAtSloBounded } from '../../infra/simulator/index.ts';
import { createArrivalHistory } from '../../infra/telemetry/arrival-history.ts';
import type { AuthEnv } from '../http/auth.ts';
import { errorBody } from '../http/error-body.ts';
import type { RateLimiter } from '../http/rate-limiter.ts';
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
  /** A replay's CPU-time budget and the simulations a tenant may start per minute (SIMULATION_CPU_BUDGET_MS, SIMULATIONS_PER_MIN). */
  simulation: Config['api']['simulation'];
  /** The API's token buckets; simulations are not rate-limited without it. */
  limiter?: RateLimiter;
  /**
   * Replay threads kept between simulations (the process's, closed with it: api/main.ts); without
   * them each call starts a thread of its own.
   */
  replayThreads?: ReplayThreads;
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
    measuredWorkerRate: (model: string) => measuredWorkerRate(deps.redis, deps.prefix, model),
    clock: deps.clock,
  };
  const { cpuBudgetMs, perTenantPerMin } = deps.simulation;
  const threads = deps.replayThreads;
  const simulate = createDeploymentSimulator({
    ...data,
    scaler: deps.scaler,
    replay: (trace, tasks, signal) => replayBounded(trace, tasks, { cpuBudgetMs, signal, threads }),
    // The baselines' search has a budget of its own: the predictive replays may have spent theirs.
    searchAtSlo: (trace, settings, target, signal) => searchAtSloBounded(trace, settings, target, { cpuBudgetMs, signal, threads }),
  });

  app.get('/v1/deployments/:model/series', async (c) => {
    const { minutes } = parseQuery(SeriesQuery, c.req.query());
    return c.json(await deploymentSeries(data, c.req.param('model'), minutes));
  });

  app.get('/v1/deployments/:model/simulation', async (c) => {
    const { minutes, sloMs, ...choice } = parseQuery(SimulationQuery, c.req.query());
    if (deps.limiter) {
      const bucket = `simulation:${c.get('tenant')}`;
      const taken = await deps.limiter.take(bucket, { now: deps.clock.now(), rps: perTenantPerMin / 60, burst: perTenantPerMin });
      if (!taken.allowed) {
        const seconds = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
        const message = `too many simulations: a tenant may start ${perTenantPerMin} per minute; retry in ${seconds} s`;
        return c.json(errorBody('rate_limited', message, { retry_after_s: seconds }), 429, { 'Retry-After': String(seconds) });
      }
    }
    return c.json(await simulate(c.get('tenant'), c.req.param('model'), minutes, { ...choice, sloQueueWaitMs: sloMs }, c.req.raw.signal));
  });

  return app;
}

/**
 * The rows/s one busy worker of `model` sustained, as the scaler measured it under load (its EWMA,
 * infra/scaler/controller-observe.ts): the live scaler's, else a shadow scaler's; undefined when
 * neither has measured one (the batch profile it falls back on is not a measurement of load).
 */
async function measuredWorkerRate(redis: RedisClient, prefix: string, model: string): Promise<number | undefined> {
  for (const shadow of [false, true]) {
    const rate = Number(await redis.get(scalerWorkerRateKey(prefix, shadow, model)));
    if (Number.isFinite(rate) && rate > 0) return rate;
  }
  return undefined;
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
