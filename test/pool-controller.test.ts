/**
 * The pool controller on a real Redis (the planner, the claims, the decision log and the demand
 * doorbell real; the provider and the holdings channel recording fakes): a shared pool's first
 * requests for a model no worker holds cause one placement however many rings and controllers
 * race, and a tick plans the pool from its members and applies the plan.
 */
import { Registry } from 'prom-client';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { Backlog, PoolProvider, PoolWorker } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { createSharedPoolStore } from '../infra/deployments/pool-store.ts';
import { createDemandBell } from '../infra/fleet/pool-demand.ts';
import { type HeartbeatPayload, listHeartbeats, type PoolModelView } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { createPoolController, type PoolController, type PoolControllerDeps, type PoolHoldings } from '../infra/scaler/pool-controller.ts';
import { createPoolDecisionLog } from '../infra/scaler/pool-decisions.ts';
import { type PoolPlanInput, planPool } from '../infra/scaler/pool-plan.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { writePoolBeat as writeBeat } from './support/pool-beat.ts';
import { redisPrefixes, testServices } from './support/services.ts';
import { until } from './support/until.ts';

const redis = createRedis(testServices().redisUrl);
const second = createRedis(testServices().redisUrl); // as a second scaler process would have
const T0 = Date.UTC(2025, 0, 6, 12, 0, 0);
const POOL = 'tail';
const prefixes = redisPrefixes(redis);
const cleanups: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await prefixes.cleanup();
});

afterAll(async () => {
  await closeRedis(redis);
  await closeRedis(second);
});

/** Holdings writes, in order, as `set <worker> <models>` and `ask <worker> <model>`. */
function recordingHoldings(): PoolHoldings & { calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    async set(workerId, models) {
      calls.push(`set ${workerId} ${models.map((m) => `${m.model}@${m.version}`).join(',')}`);
    },
    async askLoad(workerId, ref) {
      calls.push(`ask ${workerId} ${ref.model}@${ref.version}`);
    },
  };
}

/** The pool's workers from their heartbeats (as the local provider lists them), recording launches and drains. */
function beatProvider(prefix: string): PoolProvider & { calls: string[] } {
  const calls: string[] = [];
  return {
    name: 'beats',
    calls,
    async list(target) {
      const beats = await listHeartbeats(redis, prefix);
      return beats
        .filter((b) => 'pool' in target && b.pool === target.pool)
        .map((b): PoolWorker => ({ id: b.id, state: b.state, handle: b.id }));
    },
    async launch(target, count, { startAs }) {
      calls.push(`launch ${'pool' in target ? target.pool : '?'} ${count} ${startAs}`);
    },
    async setState() {},
    async drain(_target, workerId) {
      calls.push(`drain ${workerId}`);
    },
    async close() {},
  };
}

function writePoolBeat(prefix: string, id: string, models: PoolModelView[] = [], extra: Partial<HeartbeatPayload> = {}): Promise<void> {
  return writeBeat(redis, prefix, { id, pool: POOL, now: T0, models, ...extra });
}

const noBacklog: Backlog = { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };

async function fixture(options: { max?: number; min?: number; standby?: number } = {}) {
  const prefix = prefixes.take('pool-ctl');
  const clock = new ManualClock(T0);
  const pools = createSharedPoolStore(redis, prefix);
  const deployments = createDeploymentStore(redis, prefix);
  await pools.put({ name: POOL, max: options.max ?? 3, min: options.min ?? 0, standby: options.standby ?? 0, memoryMb: 400 });
  const backlogs = new Map<string, Backlog>();
  const holdings = recordingHoldings();
  const provider = beatProvider(prefix);
  const make = (overrides: Partial<PoolControllerDeps> = {}): PoolController => {
    const c = createPoolController({
      redis,
      prefix,
      pools,
      deployments,
      history: { series: async (_m, from) => ({ startMs: from, perMinute: [0] }) },
      queueStats: { backlog: async (t) => backlogs.get(`${t.model}@${t.versions?.[0]}`) ?? noBacklog },
      provider,
      holdings,
      forecast: ({ horizonS }) => ({ ratePerSec: 0, burstRatePerSec: 0, horizonS, method: 'reactive', components: {} }),
      plan: planPool,
      clock,
      log: silentLog,
      settings: scalerSettingsFrom(SCALER_DEFAULTS),
      tickMs: 1000,
      historyWindowMs: 3600_000,
      identity: 'first',
      isLeader: () => true,
      ...overrides,
    });
    cleanups.push(() => c.close());
    return c;
  };
  const tickContext = async () => ({
    now: clock.now(),
    beats: await listHeartbeats(redis, prefix),
    deployments: await deployments.list(),
    stillLeader: async () => true,
  });
  return { prefix, clock, pools, deployments, backlogs, holdings, provider, make, tickContext };
}

const asks = (calls: string[]) => calls.filter((c) => c.startsWith('ask'));

describe('placement at once', () => {
  it('50 concurrent first requests over two controllers cause exactly one load, on the standby', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w-busy', [
      { model: 'other', version: '1', state: 'active', residentBytes: 350 * 1024 * 1024, lastUsedAt: T0, jobsInFlight: 1 },
    ]);
    await writePoolBeat(f.prefix, 'w-standby');
    const controllers = [f.make(), f.make({ redis: second, identity: 'second' })];
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (controllers[i % 2] as PoolController).place({ pool: POOL, model: 'm', version: '1' })),
    );
    expect(outcomes.filter((o) => o === 'placed')).toHaveLength(1);
    expect(outcomes.filter((o) => o === 'claimed')).toHaveLength(49);
    expect(asks(f.holdings.calls)).toEqual(['ask w-standby m@1']);
    expect(f.provider.calls).toEqual([]);
  });

  it('rings of the demand doorbell from many API processes reach the leader and cause one load', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.deployments.put({ model: 'sentinel', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w1');
    const subscriber = duplicateClient(redis);
    cleanups.push(() => closeRedis(subscriber));
    const leader = f.make();
    const follower = f.make({ identity: 'follower', isLeader: () => false });
    await leader.listen(subscriber);
    const followerSubscriber = duplicateClient(redis);
    cleanups.push(() => closeRedis(followerSubscriber));
    await follower.listen(followerSubscriber);
    // Fifty API processes, each with its own bell (so the per-process throttle does not dedupe them).
    const publisher: Pick<RedisClient, 'publish'> = redis;
    for (let i = 0; i < 50; i++) createDemandBell(publisher, f.prefix, f.clock).ring(POOL, 'm', '1');
    // Pub/sub keeps one connection's order: once the sentinel is placed, every ring before it was heard.
    createDemandBell(publisher, f.prefix, f.clock).ring(POOL, 'sentinel', '1');
    await until('the sentinel placed', async () => (f.holdings.calls.some((c) => c.includes('sentinel')) ? true : undefined));
    await leader.close();
    await follower.close();
    expect(asks(f.holdings.calls).filter((c) => c.endsWith(' m@1'))).toEqual(['ask w1 m@1']);
  });

  it('does nothing for a model a worker holds, a model not in the pool, or a follower', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.deployments.put({ model: 'own', version: '1', min: 0, max: 1, standby: 0 });
    await writePoolBeat(f.prefix, 'w1', [{ model: 'm', version: '1', state: 'warming', residentBytes: 0, lastUsedAt: 0, jobsInFlight: 0 }]);
    const c = f.make();
    expect(await c.place({ pool: POOL, model: 'm', version: '1' })).toBe('held');
    expect(await c.place({ pool: POOL, model: 'own', version: '1' })).toBe('not-member');
    expect(await c.place({ pool: POOL, model: 'm', version: '9' })).toBe('not-member');
    expect(await f.make({ isLeader: () => false }).place({ pool: POOL, model: 'm', version: '1' })).toBe('follower');
    expect(f.holdings.calls).toEqual([]);
  });

  it('launches a worker when the pool has none, and the tick then places the model on it', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    const c = f.make();
    expect(await c.place({ pool: POOL, model: 'm', version: '1' })).toBe('launched');
    expect(f.provider.calls).toEqual(['launch tail 1 standby']);
    await writePoolBeat(f.prefix, 'w-new');
    f.backlogs.set('m@1', { ...noBacklog, waiting: 1 });
    await c.tick(await f.tickContext());
    expect(f.holdings.calls).toEqual(['set w-new m@1']);
  });
});

describe('placement at once and the tick, together', () => {
  it("a ring after the tick placed a cold model, before the worker's heartbeat shows it, loads nothing more", async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w1');
    await writePoolBeat(f.prefix, 'w2');
    f.backlogs.set('m@1', { ...noBacklog, waiting: 1 });
    const c = f.make();
    await c.tick(await f.tickContext());
    const placedBy = f.holdings.calls.filter((x) => x.startsWith('set') && x.includes('m@1'));
    expect(placedBy).toHaveLength(1);
    expect(await c.place({ pool: POOL, model: 'm', version: '1' })).toBe('claimed');
    // A second tick, the heartbeats still stale: the model stays where the first tick put it.
    f.holdings.calls.length = 0;
    await c.tick(await f.tickContext());
    expect(f.holdings.calls.filter((x) => x.includes('m@1'))).toEqual(placedBy);
    expect(asks(f.holdings.calls)).toEqual([]);
  });

  it('records a placement at once in the pool decision log, and drains the workers of a pool that is gone', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w1');
    const c = f.make();
    expect(await c.place({ pool: POOL, model: 'm', version: '1' })).toBe('placed');
    const [record] = await createPoolDecisionLog(redis, f.prefix).recent(POOL, 1);
    expect(record).toMatchObject({ trigger: 'demand', applied: [{ action: 'load-now', workerId: 'w1', model: 'm@1' }] });
    expect(record?.plan.loads).toEqual([{ workerId: 'w1', model: 'm@1', reason: 'first request, no worker held it: standby' }]);

    const gone = { ...JSON.parse((await redis.get(workerKey(f.prefix, 'w1'))) as string), id: 'w-gone', pool: 'deleted-pool' };
    await redis.set(workerKey(f.prefix, 'w-gone'), JSON.stringify(gone), 'PX', 60_000);
    await c.tick(await f.tickContext());
    expect(f.provider.calls).toContain('drain w-gone');
    expect(f.provider.calls).not.toContain('drain w1');
  });
});

describe('tick', () => {
  it('places a queued model, keeps a claimed load where it was asked, records the decision with its inputs', async () => {
    const f = await fixture({ standby: 1 });
    await f.deployments.put({ model: 'a', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.deployments.put({ model: 'b', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.deployments.put({ model: 'own', version: '1', min: 0, max: 1, standby: 0 });
    await writePoolBeat(f.prefix, 'w1');
    await writePoolBeat(f.prefix, 'w2');
    const c = f.make();
    // b was placed at once on w2; its heartbeat does not show it yet.
    expect(await c.place({ pool: POOL, model: 'b', version: '1' })).toBe('placed');
    const placedOn = asks(f.holdings.calls)[0]?.split(' ')[1];
    f.backlogs.set('a@1', { ...noBacklog, waiting: 2 });
    f.backlogs.set('b@1', { ...noBacklog, waiting: 1 });
    f.holdings.calls.length = 0;
    await c.tick(await f.tickContext());
    const sets = f.holdings.calls.filter((x) => x.startsWith('set'));
    expect(sets.find((x) => x.includes('b@1'))?.split(' ')[1]).toBe(placedOn);
    expect(sets.filter((x) => x.includes('a@1'))).toHaveLength(1);
    expect(sets.filter((x) => x.includes('b@1'))).toHaveLength(1);
    const [record] = await createPoolDecisionLog(redis, f.prefix).recent(POOL, 5);
    expect(record?.trigger).toBe('tick');
    expect(record?.models.map((m) => m.model).sort()).toEqual(['a@1', 'b@1']);
    expect(record?.models.find((m) => m.model === 'a@1')?.backlog.waiting).toBe(2);
    expect(record?.plan.loads.map((l) => l.model)).toEqual(['a@1']);
    expect(record?.applied.filter((a) => a.action === 'hold')).toHaveLength(2);
    expect(record?.plan.terms?.perModel.map((p) => p.model).sort()).toEqual(['a@1', 'b@1']);
  });

  it("gives the planner each member's rows arrived and served since the last tick, a version its share", async () => {
    const f = await fixture();
    await f.deployments.put({
      model: 'a',
      versions: [
        { version: '1', weight: 75 },
        { version: '2', weight: 25 },
      ],
      min: 0,
      max: 1,
      standby: 0,
      pool: POOL,
    });
    let arrived = 100;
    let served = 40;
    // One minute, the one containing `to`, counted so far (all within T0's minute here).
    const minute = (count: () => number) => async (_m: string, _from: number, to: number) => ({
      startMs: Math.floor(to / 60_000) * 60_000,
      perMinute: [count()],
    });
    const inputs: PoolPlanInput[] = [];
    const plan = (input: PoolPlanInput) => {
      inputs.push(input);
      return planPool(input);
    };
    const c = f.make({ plan, history: { series: minute(() => arrived), completions: minute(() => served) } });
    await c.tick(await f.tickContext());
    arrived += 20;
    served += 8;
    f.clock.advance(1000);
    await c.tick(await f.tickContext());
    expect(inputs[0]?.models.map((m) => m.observed)).toEqual([undefined, undefined]);
    expect(Object.fromEntries((inputs[1]?.models ?? []).map((m) => [m.model, m.observed]))).toEqual({
      'a@1': { arrivedRows: 15, servedRows: 6, sinceMs: 1000 },
      'a@2': { arrivedRows: 5, servedRows: 2, sinceMs: 1000 },
    });
  });

  it("plans with each worker's busy share and each measured model's batch times, kept after the model is gone", async () => {
    const f = await fixture();
    for (const m of ['a', 'b']) await f.deployments.put({ model: m, version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    const a = (state: PoolModelView['state']): PoolModelView => ({
      model: 'a',
      version: '1',
      state,
      residentBytes: state === 'active' ? 50 * 1024 * 1024 : 0,
      lastUsedAt: T0,
      jobsInFlight: 0,
      ...(state === 'active' ? { profile: { threads: 1, chosenBatch: 16, rowsPerS: 800, batchOneMs: 2.5 } } : {}),
    });
    await writePoolBeat(f.prefix, 'w1', [a('active')], { busyFraction: 0.6 });
    await writePoolBeat(f.prefix, 'w2');
    const inputs: PoolPlanInput[] = [];
    const c = f.make({
      plan: (input) => {
        inputs.push(input);
        return planPool(input);
      },
    });
    await c.tick(await f.tickContext());
    const workers = new Map((inputs[0]?.workers ?? []).map((w) => [w.id, w]));
    expect(workers.get('w1')?.busyFraction).toBe(0.6);
    expect(workers.get('w2')).not.toHaveProperty('busyFraction');
    const models = new Map((inputs[0]?.models ?? []).map((m) => [m.model, m]));
    expect(models.get('a@1')).toMatchObject({ perWorkerRatePerSec: 800, batchServiceMs: 20, batchOneMs: 2.5 });
    // Never measured: planned at the pool's stand-in rate, with no batch times of its own.
    expect(models.get('b@1')).not.toHaveProperty('batchServiceMs');
    expect(models.get('b@1')).not.toHaveProperty('batchOneMs');

    await writePoolBeat(f.prefix, 'w1', [a('evicted')], { busyFraction: 0 });
    f.clock.advance(1000);
    await c.tick(await f.tickContext());
    // The busy share is the heartbeats' mean over the last SLO (busy-window.ts): 0.6 then 0, a second apart.
    expect(inputs[1]?.workers.find((w) => w.id === 'w1')?.busyFraction).toBeCloseTo(0.3);
    expect(inputs[1]?.models.find((m) => m.model === 'a@1')).toMatchObject({ batchServiceMs: 20, batchOneMs: 2.5 });
  });

  it("counts the pool's workers, plan, pooled vs per-model standby and placements on the scaler's registry", async () => {
    const f = await fixture({ standby: 1 });
    await f.deployments.put({ model: 'a', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.deployments.put({ model: 'b', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w1');
    f.backlogs.set('a@1', { ...noBacklog, waiting: 1 });
    const registry = new Registry();
    const c = f.make({ metrics: registry });
    await c.tick(await f.tickContext());
    expect(await c.place({ pool: POOL, model: 'b', version: '1' })).toBe('placed');
    const text = await registry.metrics();
    expect(text).toContain('warmpool_shared_pool_workers{pool="tail",state="warm"} 1');
    expect(text).toContain('warmpool_shared_pool_placements_total{pool="tail",trigger="tick"} 1');
    expect(text).toContain('warmpool_shared_pool_placements_total{pool="tail",trigger="demand"} 1');
    expect(text).toMatch(/warmpool_shared_pool_standby\{pool="tail",sizing="per-model-sum"\} \d/);
    expect(text).toMatch(/warmpool_shared_pool_desired\{pool="tail",kind="standby"\} 1/);
  });

  it("places a killed worker's models with jobs waiting on the workers left, and launches its replacement", async () => {
    const f = await fixture({ max: 3, min: 2 });
    const models = ['a', 'b', 'c'];
    for (const m of models) await f.deployments.put({ model: m, version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    const held = (m: string): PoolModelView => ({
      model: m,
      version: '1',
      state: 'active',
      residentBytes: 50 * 1024 * 1024,
      lastUsedAt: T0,
      jobsInFlight: 1,
    });
    await writePoolBeat(f.prefix, 'w-doomed', models.map(held));
    await writePoolBeat(f.prefix, 'w-left');
    for (const m of models) f.backlogs.set(`${m}@1`, { ...noBacklog, waiting: 2 });
    const c = f.make();
    await c.tick(await f.tickContext());
    expect(f.holdings.calls.find((x) => x.startsWith('set w-doomed'))).toBe('set w-doomed a@1,b@1,c@1');
    // SIGKILL: its heartbeat is gone; the provider no longer lists it.
    await redis.del(workerKey(f.prefix, 'w-doomed'));
    f.holdings.calls.length = 0;
    f.clock.advance(1000);
    await c.tick(await f.tickContext());
    const left = f.holdings.calls.find((x) => x.startsWith('set w-left'));
    expect(left?.split(' ')[2]?.split(',').sort()).toEqual(['a@1', 'b@1', 'c@1']);
    expect(f.provider.calls.some((x) => x.startsWith('launch tail'))).toBe(true);
  });

  it('asks a worker to load a model it evicted before, which its holdings alone would not bring back', async () => {
    const f = await fixture();
    await f.deployments.put({ model: 'm', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await writePoolBeat(f.prefix, 'w1', [{ model: 'm', version: '1', state: 'evicted', residentBytes: 0, lastUsedAt: 0, jobsInFlight: 0 }]);
    f.backlogs.set('m@1', { ...noBacklog, waiting: 1 });
    await f.make().tick(await f.tickContext());
    expect(f.holdings.calls).toEqual(['set w1 m@1', 'ask w1 m@1']);
  });

  it('grows a pool below its minimum through the provider, with the pool as the target', async () => {
    const f = await fixture({ min: 2 });
    await f.deployments.put({ model: 'a', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    await f.make().tick(await f.tickContext());
    expect(f.provider.calls).toEqual(['launch tail 2 standby']);
  });

  it('in shadow mode plans and records but touches neither the provider nor the holdings', async () => {
    const f = await fixture({ min: 1 });
    await f.deployments.put({ model: 'a', version: '1', min: 0, max: 1, standby: 0, pool: POOL });
    f.backlogs.set('a@1', { ...noBacklog, waiting: 1 });
    const c = f.make({ shadow: true });
    await c.tick(await f.tickContext());
    expect(await c.place({ pool: POOL, model: 'a', version: '1' })).toBe('follower');
    expect([...f.provider.calls, ...f.holdings.calls]).toEqual([]);
    const [record] = await createPoolDecisionLog(redis, f.prefix).recent(POOL, 1);
    expect(record).toMatchObject({ shadow: true, applied: [] });
    expect(record?.plan.launch).toBeGreaterThan(0);
  });
});
