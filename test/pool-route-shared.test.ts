/**
 * `GET /v1/pool` shows the shared pools: settings and members, the workers (heartbeats naming the
 * pool) with the models each holds, and the pool controller's latest decision — written by a real
 * pool controller tick (real planner; a recording provider and holdings) — with its loads, evictions
 * and terms. Tenants outside ADMIN_TENANTS see worker aliases wherever a worker is named.
 */
import { afterAll, expect, it } from 'vitest';
import { PoolView as PoolViewSchema } from '../api/openapi/schemas.ts';
import type { PoolView } from '../api/routes/pool.ts';
import { workerAlias } from '../api/routes/pool.ts';
import type { Backlog, PoolProvider } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { type HeartbeatPayload, listHeartbeats } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { createPoolController } from '../infra/scaler/pool-controller.ts';
import { planPool } from '../infra/scaler/pool-plan.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { poolApp } from './support/pool-app.ts';
import { writePoolBeat as writeBeat } from './support/pool-beat.ts';
import { testServices, uniqueId } from './support/services.ts';

const redis = createRedis(testServices().redisUrl);
const prefix = uniqueId('pool-route-shared');
const T0 = Date.UTC(2025, 0, 6, 12, 0, 0);
const clock = new ManualClock(T0);
const queueStats = createQueueStats({ redis, prefix, clock });

afterAll(async () => {
  await queueStats.close();
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

function writePoolBeat(
  id: string,
  models: NonNullable<HeartbeatPayload['models']>,
  poolCounts?: HeartbeatPayload['poolCounts'],
): Promise<void> {
  return writeBeat(redis, prefix, {
    id,
    pool: 'tail',
    now: T0,
    models,
    pid: 4242,
    host: 'pool-host',
    startedAt: T0 - 60_000,
    memoryBudgetBytes: 512 * 1024 * 1024,
    ...(poolCounts ? { poolCounts } : {}),
  });
}

it('shows each shared pool, what its workers hold, and the latest decision with its loads and terms', async () => {
  const pools = createSharedPoolStore(redis, prefix);
  const deployments = createDeploymentStore(redis, prefix);
  await pools.put({ name: 'tail', max: 3, min: 1, standby: 1, memoryMb: 512 });
  await deployments.put({ model: 'held', version: '1', min: 0, max: 1, standby: 0, pool: 'tail' });
  await deployments.put({ model: 'cold', version: '1', min: 0, max: 1, standby: 0, pool: 'tail' });
  await writePoolBeat(
    'w-held',
    [
      {
        model: 'held',
        version: '1',
        state: 'active',
        residentBytes: 32 * 1024 * 1024,
        lastUsedAt: T0 - 1000,
        jobsInFlight: 0,
        loadMs: 700,
      },
    ],
    { loads: 3, evictions: 2, jobsHit: 27, jobsMiss: 3 },
  );
  await writePoolBeat('w-standby', [], { loads: 1, evictions: 1, jobsHit: 9, jobsMiss: 1 });
  const backlog = (t: { model: string }): Backlog => ({
    waiting: t.model === 'cold' ? 3 : 0,
    prioritized: 0,
    delayed: 0,
    active: 0,
    oldestAgeMs: 0,
  });
  const noop = async () => {};
  const provider: PoolProvider = {
    name: 'beats',
    list: async () => [
      { id: 'w-held', state: 'active', handle: 'w-held' },
      { id: 'w-standby', state: 'standby', handle: 'w-standby' },
    ],
    launch: noop,
    setState: noop,
    drain: noop,
    close: noop,
  };
  const controller = createPoolController({
    redis,
    prefix,
    pools,
    deployments,
    history: { series: async (_m, from) => ({ startMs: from, perMinute: [0] }) },
    queueStats: { backlog: async (t) => backlog(t) },
    provider,
    holdings: { set: noop, askLoad: noop },
    forecast: ({ horizonS }) => ({ ratePerSec: 0, burstRatePerSec: 0, horizonS, method: 'reactive', components: {} }),
    plan: planPool,
    clock,
    log: silentLog,
    settings: scalerSettingsFrom(SCALER_DEFAULTS),
    tickMs: 1000,
    historyWindowMs: 3600_000,
    identity: 'scaler-host-1',
    isLeader: () => true,
  });
  await controller.tick({
    now: T0,
    beats: await listHeartbeats(redis, prefix),
    deployments: await deployments.list(),
    stillLeader: async () => true,
  });
  await controller.close();

  const admin = poolApp({ redis, prefix, queueStats, clock });
  const res = await admin.request('/v1/pool');
  expect(res.status).toBe(200);
  const view = (await res.json()) as PoolView;
  expect(PoolViewSchema.safeParse(view).success).toBe(true);
  const [pool] = view.sharedPools;
  expect(pool).toMatchObject({ name: 'tail', max: 3, min: 1, standby: 1, memoryMb: 512, members: ['cold', 'held'], resident: 1 });
  const byId = [...(pool?.workers ?? [])].sort((a, b) => a.id.localeCompare(b.id));
  expect(byId.map((w) => [w.id, w.host, w.models.map((m) => `${m.model}:${m.state}`)])).toEqual([
    ['w-held', 'pool-host', ['held:active']],
    ['w-standby', 'pool-host', []],
  ]);
  // Loads, evictions and the hit ratio: the workers' own counts, summed.
  expect(pool?.counts).toEqual({ loads: 4, evictions: 3, jobsHit: 36, jobsMiss: 4, hitRatio: 0.9 });
  expect(byId[0]?.counts).toEqual({ loads: 3, evictions: 2, jobsHit: 27, jobsMiss: 3 });
  expect(pool?.latest?.trigger).toBe('tick');
  expect(pool?.latest?.loads.map((l) => [l.model, l.reason])).toContainEqual(['cold@1', 'cold: no worker holds it']);
  expect(pool?.latest?.terms).toHaveProperty('pooledBurstStandby');
  expect(pool?.latest?.terms).toHaveProperty('perModelStandbySum');
  expect(pool?.decisions[0]?.leader).toBe('scaler-host-1');

  // Another tenant: aliases everywhere a worker is named, no host, no leader.
  const other = (await (await poolApp({ redis, prefix, queueStats, clock }, 'tenant-a').request('/v1/pool')).json()) as PoolView;
  const text = JSON.stringify(other.sharedPools);
  expect(text).not.toContain('w-held');
  expect(text).not.toContain('pool-host');
  expect(text).not.toContain('scaler-host-1');
  expect(other.sharedPools[0]?.latest?.loads[0]?.workerId).toBe(workerAlias(pool?.latest?.loads[0]?.workerId ?? ''));
});
