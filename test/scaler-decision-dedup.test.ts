import { afterAll, expect, it } from 'vitest';
import type { PoolView } from '../api/routes/pool.ts';
import type { PoolProvider, PoolWorker } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { decisionStreamKey, workerKey } from '../infra/redis/keys.ts';
import { createScalerController } from '../infra/scaler/controller.ts';
import { DECISION_HEARTBEAT_MS } from '../infra/scaler/decision-log.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { decide } from '../infra/scaler/policy.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { poolApp } from './support/pool-app.ts';
import { testServices, uniqueId } from './support/services.ts';

const redis = createRedis(testServices().redisUrl);
const prefix = uniqueId('decision-dedup');
const T0 = Date.UTC(2025, 0, 6, 12, 0, 0);
const TICK_MS = 2_000;
const clock = new ManualClock(T0);
const queueStats = createQueueStats({ redis, prefix, clock });

afterAll(async () => {
  await queueStats.close();
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

/** One warm active worker that stays as it is, whatever the controller asks. */
const worker: PoolWorker = { id: 'w-1', state: 'active', handle: '4242' };
const provider: PoolProvider = {
  name: 'static',
  list: async () => [worker],
  launch: async () => {},
  setState: async () => {},
  drain: async () => {},
  close: async () => {},
};

async function beat(): Promise<void> {
  const payload: HeartbeatPayload = {
    id: worker.id,
    model: 'steady',
    version: '1',
    state: 'active',
    pid: 4242,
    host: 'box-1',
    startedAt: T0 - 60_000,
    updatedAt: clock.now(),
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
  };
  await redis.set(workerKey(prefix, worker.id), JSON.stringify(payload), 'PX', 60_000);
}

it('a steady pool ticked every 2 s records its decision once a minute, and a change at once', async () => {
  const deployments = createDeploymentStore(redis, prefix);
  await deployments.put({ model: 'steady', version: '1', min: 1, max: 3, standby: 0 });
  const controller = createScalerController({
    redis,
    prefix,
    deployments,
    history: createArrivalHistory(redis, prefix, clock),
    queueStats,
    provider,
    forecast: forecastArrivals,
    decide,
    clock,
    log: silentLog,
    settings: scalerSettingsFrom(SCALER_DEFAULTS),
    tickMs: TICK_MS,
  });
  const tickFor = async (ms: number) => {
    for (const end = clock.now() + ms; clock.now() < end; await clock.advance(TICK_MS)) {
      await beat();
      await controller.tick();
    }
  };
  try {
    // 150 s of ticks (75 of them) on a pool that needs nothing: three records, a minute apart.
    await tickFor(150_000);
    const stream = decisionStreamKey(prefix, 'steady');
    expect(await redis.xlen(stream)).toBe(3);
    // An operator raises standby: the next tick's decision differs and is recorded at once.
    const changedAt = clock.now();
    await deployments.put({ model: 'steady', version: '1', min: 1, max: 3, standby: 1 });
    await tickFor(10_000);
    expect(await redis.xlen(stream)).toBe(4);

    const view = (await (await poolApp({ redis, prefix, queueStats, clock }).request('/v1/pool')).json()) as PoolView;
    const steady = view.deployments.find((d) => d.model === 'steady');
    expect(steady?.decisions.map((d) => d.at)).toEqual([changedAt, T0 + 2 * DECISION_HEARTBEAT_MS, T0 + DECISION_HEARTBEAT_MS, T0]);
    expect(steady?.decisions[0]?.settings.standby).toBe(1);
    expect(steady?.desired).toMatchObject({ standby: 1, at: changedAt });
  } finally {
    await controller.close();
  }
});
