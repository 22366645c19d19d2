/**
 * `GET /v1/pool` on a real Redis: deployments from the real store, workers from heartbeats as
 * workers write them, queues from real BullMQ queues through the real QueueStats, and decisions
 * written by a real controller tick (real forecaster and policy, an in-memory provider) — the
 * route only reads what the scaler and the workers left in Redis. Cleans up its keys.
 */
import { Queue } from 'bullmq';
import { Hono } from 'hono';
import { afterAll, expect, it } from 'vitest';
import type { AuthEnv } from '../api/http/auth.ts';
import { errorHandler, notFoundHandler } from '../api/http/errors.ts';
import { POOL_DECISIONS_SHOWN, type PoolView, poolRoutes } from '../api/routes/pool.ts';
import { queueName } from '../infra/contracts/job.ts';
import type { PoolProvider, PoolWorker } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { createScalerController } from '../infra/scaler/controller.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { decide } from '../infra/scaler/policy.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { testServices, uniqueId } from './support/services.ts';

const redis = createRedis(testServices().redisUrl);
const prefix = uniqueId('pool-route');
const T0 = Date.UTC(2025, 0, 6, 12, 0, 0);
const clock = new ManualClock(T0);
const queueStats = createQueueStats({ redis, prefix, clock });
const queue = new Queue(queueName('ranker', '2'), { connection: redis, prefix });

afterAll(async () => {
  await queue.close();
  await queueStats.close();
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

/** Lists a fixed set of workers per version and accepts every command (the route never calls a provider). */
function staticProvider(workers: Record<string, PoolWorker[]>): PoolProvider {
  return {
    name: 'static',
    list: async (target) => workers[target.version] ?? [],
    launch: async () => {},
    setState: async () => {},
    drain: async () => {},
    close: async () => {},
  };
}

async function beat(b: Pick<HeartbeatPayload, 'id' | 'model' | 'version' | 'state' | 'rowsPerS' | 'startedAt'>): Promise<void> {
  const payload: HeartbeatPayload = {
    ...b,
    pid: 4242,
    host: 'box-1',
    updatedAt: T0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
  };
  await redis.set(workerKey(prefix, b.id), JSON.stringify(payload), 'PX', 60_000);
}

/** The route as `tenant` calls it (auth is app.ts's); `ops` is the admin. */
function app(tenant = 'ops'): Hono<AuthEnv> {
  const a = new Hono<AuthEnv>();
  a.onError(errorHandler(undefined));
  a.notFound(notFoundHandler);
  a.use('*', async (c, next) => {
    c.set('tenant', tenant);
    await next();
  });
  a.route('/', poolRoutes({ redis, prefix, backlog: (t) => queueStats.backlog(t), clock, adminTenants: ['ops'] }));
  return a;
}

it("shows each deployment's workers, queues, forecast, targets and recent decisions", async () => {
  const deployments = createDeploymentStore(redis, prefix);
  await deployments.put({
    model: 'ranker',
    versions: [
      { version: '2', weight: 100 },
      { version: '1', weight: 0 },
    ],
    min: 1,
    max: 3,
    standby: 1,
  });
  await deployments.put({ model: 'idle', version: '1', min: 0, max: 1, standby: 0 });
  await beat({ id: 'r-1', model: 'ranker', version: '2', state: 'active', rowsPerS: 310, startedAt: T0 - 60_000 });
  await beat({ id: 'r-2', model: 'ranker', version: '2', state: 'standby', rowsPerS: 0, startedAt: T0 - 30_000 });
  await beat({ id: 'r-old', model: 'ranker', version: '1', state: 'draining', rowsPerS: 0, startedAt: T0 - 900_000 });
  await queue.add('infer', {}, { timestamp: T0 - 3_000 });
  await queue.add('infer', {}, { timestamp: T0 - 1_000, priority: 10 });

  const before = await app().request('/v1/pool');
  expect(before.status).toBe(200);
  const empty = (await before.json()) as PoolView;
  expect(empty.deployments.find((d) => d.model === 'ranker')).toMatchObject({ forecast: null, desired: null, decisions: [] });

  const controller = createScalerController({
    redis,
    prefix,
    deployments,
    history: createArrivalHistory(redis, prefix, clock),
    queueStats,
    provider: staticProvider({
      '2': [
        { id: 'r-1', state: 'active', handle: '4242' },
        { id: 'r-2', state: 'standby', handle: '4243' },
      ],
      '1': [{ id: 'r-old', state: 'draining', handle: '4100' }],
    }),
    forecast: forecastArrivals,
    decide,
    clock,
    log: silentLog,
    settings: scalerSettingsFrom(SCALER_DEFAULTS),
    tickMs: 1000,
  });
  await controller.tick();
  await clock.advance(1000);
  await controller.tick();
  await controller.close();

  const res = await app().request('/v1/pool');
  expect(res.status).toBe(200);
  const view = (await res.json()) as PoolView;
  expect(view.at).toBe(T0 + 1000);
  expect(view.deployments.map((d) => d.model)).toEqual(['idle', 'ranker']);
  const ranker = view.deployments.find((d) => d.model === 'ranker');
  expect(ranker).toMatchObject({
    model: 'ranker',
    version: '2',
    queue: { waiting: 1, prioritized: 1, delayed: 0, active: 0, oldestAgeMs: 4_000 },
    forecast: { ratePerSec: 0, horizonS: 61 },
  });
  expect(ranker?.workers.sort((a, b) => a.id.localeCompare(b.id))).toEqual([
    { id: 'r-1', version: '2', state: 'active', pid: 4242, host: 'box-1', rowsPerSec: 310, since: T0 - 60_000 },
    { id: 'r-2', version: '2', state: 'standby', pid: 4242, host: 'box-1', rowsPerSec: 0, since: T0 - 30_000 },
    { id: 'r-old', version: '1', state: 'draining', pid: 4242, host: 'box-1', rowsPerSec: 0, since: T0 - 900_000 },
  ]);
  const latest = ranker?.decisions[0];
  expect(ranker?.decisions.map((d) => d.at)).toEqual([T0 + 1000, T0]);
  expect(ranker?.desired).toEqual({
    active: latest?.decision.active,
    standby: latest?.decision.standby,
    launched: latest?.decision.launch,
    shadow: false,
    at: T0 + 1000,
  });
  expect(latest?.backlog).toEqual(ranker?.queue); // the same queues, read at the same time
  expect(latest?.decision.reasons.length).toBeGreaterThan(0);
  expect(ranker?.decisions.length).toBeLessThanOrEqual(POOL_DECISIONS_SHOWN);
  expect(view.deployments.find((d) => d.model === 'idle')).toMatchObject({ workers: [], queue: { waiting: 0, oldestAgeMs: 0 } });

  // Another tenant sees the same pool, except where its workers run (issue 20).
  const theirs = (await (await app('tenant-b').request('/v1/pool')).json()) as PoolView;
  const seen = theirs.deployments.find((d) => d.model === 'ranker');
  expect(seen?.queue).toEqual(ranker?.queue);
  expect(seen?.desired).toEqual(ranker?.desired);
  expect(seen?.workers.map((w) => [w.version, w.state, w.rowsPerSec]).sort()).toEqual(
    ranker?.workers.map((w) => [w.version, w.state, w.rowsPerSec]).sort(),
  );
  const text = JSON.stringify(theirs);
  for (const hidden of ['"pid"', '"host"', 'box-1', '"r-1"', '"r-2"', '"r-old"', latest?.leader ?? '(no leader)'])
    expect(text).not.toContain(hidden);
  // Aliases are stable: the decisions name the same workers the list does.
  const aliases = new Set(seen?.workers.map((w) => w.id));
  const named = seen?.decisions.flatMap((d) => [...d.planned, ...d.applied]).flatMap((a) => ('workerId' in a ? [a.workerId] : [])) ?? [];
  for (const id of named) expect(aliases.has(id)).toBe(true);
});
