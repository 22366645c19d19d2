/**
 * The scaler controller on a real Redis: real deployment store, real BullMQ queues read by the
 * real QueueStats, decisions in the real Redis stream, ticks driven by hand on a ManualClock.
 * The provider is an in-memory PoolProvider that records every call (the narrow interface the
 * controller owns); heartbeats are written to Redis as workers write them. Policy and forecast
 * are scripted where a test needs exact numbers, and the real ones (with the real arrival
 * history) in the last test. Each test has its own prefix and deletes its keys.
 */
import { Queue, Worker } from 'bullmq';
import { Registry } from 'prom-client';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { queueName } from '../infra/contracts/job.ts';
import type {
  ArrivalSeries,
  Forecast,
  PolicyDecision,
  PolicyInput,
  PoolProvider,
  PoolTarget,
  PoolWorker,
} from '../infra/contracts/pool.ts';
import type { WorkerState } from '../infra/contracts/worker-state.ts';
import { createDeploymentStore, type DeploymentInput } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createQueueStats, type QueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { metricsKey, workerKey } from '../infra/redis/keys.ts';
import { createScalerController, type ScalerController, type ScalerControllerDeps } from '../infra/scaler/controller.ts';
import { createDecisionLog } from '../infra/scaler/decision-log.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { decide } from '../infra/scaler/policy.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { redisPrefixes, testServices } from './support/services.ts';

const redis = createRedis(testServices().redisUrl);
const second = createRedis(testServices().redisUrl); // as a second scaler process would have
const T0 = Date.UTC(2025, 0, 6, 12, 0, 0);
const MODEL = 'scorer';

const cleanups: Array<() => Promise<void>> = [];
const prefixes = redisPrefixes(redis);

afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  await prefixes.cleanup();
});

afterAll(async () => {
  await closeRedis(redis);
  await closeRedis(second);
});

/**
 * An in-memory pool: launch adds `launching` workers; every call is recorded in order. `lagging`:
 * commands do not change what `list` shows (as with real workers until their next heartbeat).
 */
function memoryProvider(options: { lagging?: boolean } = {}) {
  const workers = new Map<string, PoolWorker & { target: PoolTarget }>();
  const calls: string[] = [];
  let next = 0;
  const provider: PoolProvider & { calls: string[]; add(version: string, id: string, state: WorkerState): void } = {
    name: 'memory',
    calls,
    add(version, id, state) {
      workers.set(id, { id, state, handle: id, target: { model: MODEL, version } });
    },
    async list(target) {
      calls.push(`list ${target.version}`);
      return [...workers.values()]
        .filter((w) => w.target.model === target.model && w.target.version === target.version)
        .map(({ id, state, handle }) => ({ id, state, handle }));
    },
    async launch(target, count, { startAs }) {
      calls.push(`launch ${target.version} ${count} ${startAs}`);
      for (let i = 0; i < count; i++) provider.add(target.version, `new-${next++}`, 'launching');
    },
    async setState(target, workerId, state) {
      calls.push(`setState ${target.version} ${workerId} ${state}`);
      const w = workers.get(workerId);
      if (w && !options.lagging) w.state = state;
    },
    async drain(target, workerId) {
      calls.push(`drain ${target.version} ${workerId}`);
      const w = workers.get(workerId);
      if (w && !options.lagging) w.state = 'draining';
    },
    async close() {},
  };
  return provider;
}

const mutations = (calls: string[]) => calls.filter((c) => !c.startsWith('list'));

async function writeBeat(prefix: string, beat: Partial<HeartbeatPayload> & Pick<HeartbeatPayload, 'id' | 'state'>): Promise<void> {
  const payload: HeartbeatPayload = {
    model: MODEL,
    version: '1',
    pid: 1000,
    host: 'test-host',
    startedAt: T0 - 600_000,
    updatedAt: T0,
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    ...beat,
  };
  await redis.set(workerKey(prefix, beat.id), JSON.stringify(payload), 'PX', 60_000);
}

/** A flat forecast (a real Forecast, computed from the series' mean). */
function meanForecast(input: { series: ArrivalSeries; now: number; horizonS: number }): Forecast {
  const counts = input.series.perMinute;
  const perSec = counts.length === 0 ? 0 : counts.reduce((a, b) => a + b, 0) / counts.length / 60;
  return { ratePerSec: perSec, burstRatePerSec: perSec, horizonS: input.horizonS, method: 'reactive', components: { mean: perSec } };
}

/** A policy that answers `counts` (the test may change them) and remembers each tick, recording its inputs. */
function scriptedPolicy(counts: Pick<PolicyDecision, 'active' | 'standby' | 'launch' | 'drain'>) {
  const inputs: PolicyInput[] = [];
  const policy = (input: PolicyInput): PolicyDecision => {
    inputs.push(input);
    return {
      ...counts,
      reasons: [`scripted, memory of ${input.memory.recentDesired.length}`],
      memory: { recentDesired: [...input.memory.recentDesired, { at: input.now, active: counts.active }] },
    };
  };
  return { inputs, policy, counts };
}

interface Fixture {
  prefix: string;
  clock: ManualClock;
  queueStats: QueueStats;
  deploy(input?: Partial<DeploymentInput>): Promise<void>;
  controller(overrides?: Partial<ScalerControllerDeps>): ScalerController;
}

async function fixture(): Promise<Fixture> {
  const prefix = prefixes.take('scaler');
  const clock = new ManualClock(T0);
  const queueStats = createQueueStats({ redis, prefix, clock });
  cleanups.push(() => queueStats.close());
  const store = createDeploymentStore(redis, prefix);
  const history = { series: async (_model: string, from: number, to: number) => ({ startMs: from, perMinute: [to - from > 0 ? 120 : 0] }) };
  return {
    prefix,
    clock,
    queueStats,
    async deploy(input = {}) {
      const version = input.versions ? {} : { version: '1' };
      await store.put({ model: MODEL, ...version, min: 0, max: 8, standby: 1, ...input });
    },
    controller(overrides = {}) {
      const c = createScalerController({
        redis,
        prefix,
        deployments: store,
        history,
        queueStats,
        provider: memoryProvider(),
        forecast: meanForecast,
        decide: scriptedPolicy({ active: 1, standby: 1, launch: 0, drain: 0 }).policy,
        clock,
        log: silentLog,
        settings: scalerSettingsFrom(SCALER_DEFAULTS),
        tickMs: 1000,
        ...overrides,
      });
      cleanups.push(() => c.close());
      return c;
    },
  };
}

describe('leader lock', () => {
  it('lets one controller act; the other takes over once the first closes', async () => {
    const f = await fixture();
    await f.deploy();
    const [p1, p2] = [memoryProvider(), memoryProvider()];
    const scripted = scriptedPolicy({ active: 0, standby: 1, launch: 1, drain: 0 });
    const first = f.controller({ provider: p1, decide: scripted.policy, identity: 'first' });
    const other = f.controller({ redis: second, provider: p2, decide: scripted.policy, identity: 'second' });
    await first.tick();
    await other.tick();
    expect([first.isLeader(), other.isLeader()]).toEqual([true, false]);
    expect(mutations(p1.calls)).toEqual(['launch 1 1 standby']);
    expect(p2.calls).toEqual([]);
    const log = createDecisionLog(redis, f.prefix);
    expect((await log.recent(MODEL, 10)).map((r) => r.leader)).toEqual(['first']);

    await first.close();
    await other.tick();
    expect(other.isLeader()).toBe(true);
    expect(mutations(p2.calls)).toEqual(['launch 1 1 standby']);
    expect((await log.recent(MODEL, 10)).map((r) => r.leader)).toEqual(['second', 'first']);
  });

  it('takes over when the leader stops renewing, and the old leader cannot release the new lock', async () => {
    const f = await fixture();
    await f.deploy();
    const p2 = memoryProvider();
    const stalled = f.controller({ identity: 'stalled', lockTtlMs: 100 });
    const other = f.controller({ redis: second, provider: p2, identity: 'successor', lockTtlMs: 100 });
    await stalled.tick();
    expect(stalled.isLeader()).toBe(true);
    // The stalled leader ticks no more; its lock expires on Redis's clock.
    for (let i = 0; i < 200 && !other.isLeader(); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      await other.tick();
    }
    expect(other.isLeader()).toBe(true);
    await stalled.close();
    await stalled.tick(); // closed: does nothing
    await other.tick();
    expect(other.isLeader()).toBe(true);
    expect(await redis.get(`${f.prefix}:scaler:leader`)).toBe('successor');
  });
});

it('shadow mode decides and records, and calls no provider method', async () => {
  const f = await fixture();
  await f.deploy();
  await writeBeat(f.prefix, { id: 'w-active', state: 'active' });
  await writeBeat(f.prefix, { id: 'w-standby', state: 'standby' });
  const provider = memoryProvider();
  const scripted = scriptedPolicy({ active: 2, standby: 1, launch: 1, drain: 0 });
  const shadow = f.controller({ provider, decide: scripted.policy, shadow: true });
  await shadow.tick();
  expect(provider.calls).toEqual([]);
  expect(scripted.inputs[0]?.workers).toEqual({ starting: 0, standby: 1, active: 1, draining: 0 });
  const [record] = await createDecisionLog(redis, f.prefix).recent(MODEL, 5);
  expect(record?.shadow).toBe(true);
  expect(record?.applied).toEqual([]);
  expect(record?.planned).toEqual([
    { action: 'activate', version: '1', workerId: 'w-standby' },
    { action: 'launch', version: '1', count: 1, startAs: 'standby' },
  ]);
  // Its own lock: a live scaler beside it still leads.
  const live = f.controller({ provider });
  await live.tick();
  expect(live.isLeader()).toBe(true);
});

it('records each decision with all its inputs', async () => {
  const f = await fixture();
  await f.deploy({ min: 1, max: 6, standby: 2, policy: { sloQueueWaitMs: 12_000, targetUtilization: 0.5 } });
  const profile = { threads: 2, chosenBatch: 32, rowsPerS: 640, entries: [{ batch: 32, p50Ms: 40, p95Ms: 50, rowsPerS: 640 }] };
  await writeBeat(f.prefix, { id: 'w1', state: 'active', batchProfile: profile });
  const queue = new Queue(queueName(MODEL, '1'), { connection: redis, prefix: f.prefix });
  cleanups.push(() => queue.close());
  await queue.add('infer', { n: 1 }, { timestamp: T0 - 4_000 });
  await queue.add('infer', { n: 2 }, { timestamp: T0 - 1_000, priority: 5 });
  const provider = memoryProvider();
  provider.add('1', 'w1', 'active');
  const scripted = scriptedPolicy({ active: 2, standby: 2, launch: 3, drain: 0 });
  await f.controller({ provider, decide: scripted.policy, identity: 'me' }).tick();

  const [record] = await createDecisionLog(redis, f.prefix).recent(MODEL, 1);
  expect(record).toMatchObject({
    at: T0,
    model: MODEL,
    version: '1',
    shadow: false,
    leader: 'me',
    backlog: { waiting: 1, prioritized: 1, delayed: 0, active: 0, oldestAgeMs: 4_000 },
    workers: { starting: 0, standby: 0, active: 1, draining: 0 },
    perWorkerRatePerSec: 640,
    settings: { min: 1, max: 6, standby: 2, sloQueueWaitMs: 12_000, targetUtilization: 0.5, coldStartMs: 60_000 },
    decision: { active: 2, standby: 2, launch: 3, drain: 0, reasons: ['scripted, memory of 0'] },
    forecast: { ratePerSec: 2, method: 'reactive', horizonS: 61 },
  });
  expect(record?.applied).toEqual([
    { action: 'launch', version: '1', count: 1, startAs: 'active' },
    { action: 'launch', version: '1', count: 2, startAs: 'standby' },
  ]);
  expect(record?.planned).toEqual(record?.applied);
  expect(scripted.inputs[0]).toMatchObject({ now: T0, backlog: record?.backlog, perWorkerRatePerSec: 640 });
});

it('carries the policy memory across a controller restart', async () => {
  const f = await fixture();
  await f.deploy();
  const scripted = scriptedPolicy({ active: 1, standby: 1, launch: 0, drain: 0 });
  const first = f.controller({ decide: scripted.policy });
  await first.tick();
  await f.clock.advance(1000);
  await first.tick();
  await first.close();
  await f.clock.advance(1000);
  const restarted = f.controller({ decide: scripted.policy });
  await restarted.tick();
  expect(scripted.inputs.map((i) => i.memory.recentDesired.map((e) => e.at))).toEqual([[], [T0], [T0, T0 + 1000]]);
});

describe('apply', () => {
  it('activates standby workers before launching', async () => {
    const f = await fixture();
    await f.deploy({ versions: [{ version: '1', weight: 100 }] });
    const provider = memoryProvider();
    provider.add('1', 'a1', 'active');
    provider.add('1', 's1', 'standby');
    provider.add('1', 's2', 'standby');
    const up = f.controller({ provider, decide: scriptedPolicy({ active: 4, standby: 1, launch: 2, drain: 0 }).policy });
    await up.tick();
    expect(mutations(provider.calls)).toEqual(['setState 1 s1 active', 'setState 1 s2 active', 'launch 1 1 active', 'launch 1 1 standby']);
  });

  it('drains the least busy and newest workers, never the one holding jobs', async () => {
    const f = await fixture();
    await f.deploy({ standby: 0 });
    const provider = memoryProvider();
    for (const [id, jobs, startedAt] of [
      ['busy', 9, T0 - 1000],
      ['idle-old', 0, T0 - 90_000],
      ['idle-new', 0, T0 - 5_000],
    ] as const) {
      provider.add('1', id, 'active');
      await writeBeat(f.prefix, { id, state: 'active', jobsInFlight: jobs, startedAt });
    }
    const scripted = scriptedPolicy({ active: 1, standby: 0, launch: 0, drain: 2 });
    const c = f.controller({ provider, decide: scripted.policy });
    await c.tick();
    expect(mutations(provider.calls)).toEqual(['drain 1 idle-new', 'drain 1 idle-old']);
  });

  it('sees a worker in the state it was told until its heartbeat catches up', async () => {
    const f = await fixture();
    await f.deploy({ standby: 0 });
    const provider = memoryProvider({ lagging: true });
    provider.add('1', 'a', 'active');
    provider.add('1', 'b', 'active');
    const scripted = scriptedPolicy({ active: 1, standby: 0, launch: 0, drain: 1 });
    const c = f.controller({ provider, decide: scripted.policy });
    await c.tick();
    scripted.counts.drain = 0;
    await f.clock.advance(1000);
    await c.tick();
    // Without heartbeats the tie goes by id; the second tick drains no other worker.
    expect(mutations(provider.calls)).toEqual(['drain 1 a']);
    expect(scripted.inputs[1]?.workers).toEqual({ starting: 0, standby: 0, active: 1, draining: 1 });
  });

  it('keeps a worker on a version without traffic while its queue holds jobs, then drains it', async () => {
    const f = await fixture();
    await f.deploy({ versions: [{ version: '2', weight: 100 }], standby: 0 });
    const provider = memoryProvider();
    provider.add('2', 'new', 'active');
    provider.add('1', 'old', 'active');
    await writeBeat(f.prefix, { id: 'new', state: 'active', version: '2' });
    await writeBeat(f.prefix, { id: 'old', state: 'active', version: '1' });
    const queue = new Queue(queueName(MODEL, '1'), { connection: redis, prefix: f.prefix });
    cleanups.push(() => queue.close());
    const job = await queue.add('infer', { n: 1 });
    const c = f.controller({ provider, decide: scriptedPolicy({ active: 1, standby: 0, launch: 0, drain: 0 }).policy });
    await c.tick();
    expect(mutations(provider.calls)).toEqual([]);
    await job.remove();
    await c.tick();
    expect(mutations(provider.calls)).toEqual(['drain 1 old']);
  });
});

it("leaves a shared pool's workers alone: their heartbeats name no deployment's model", async () => {
  const f = await fixture();
  const provider = memoryProvider();
  // A provider that lists the pool worker whatever it is asked for (as one listing by host would).
  const listsAll: PoolProvider = { ...provider, list: async () => [{ id: 'pool-1', state: 'active', handle: 'pool-1' }] };
  await writeBeat(f.prefix, { id: 'pool-1', state: 'active', model: '', version: '', pool: 'shared' });
  const c = f.controller({ provider: listsAll });
  await c.tick();
  expect(mutations(provider.calls)).toEqual([]);
});

describe('measurements', () => {
  it('measures cold starts from heartbeats and feeds them to the policy and the histogram', async () => {
    const f = await fixture();
    await f.deploy();
    const scripted = scriptedPolicy({ active: 0, standby: 1, launch: 0, drain: 0 });
    const metrics = new Registry();
    const provider = memoryProvider();
    provider.add('1', 'cold', 'warming');
    const c = f.controller({ provider, decide: scripted.policy, metrics });
    await writeBeat(f.prefix, { id: 'cold', state: 'warming', startedAt: T0 - 10_000, updatedAt: T0 });
    await c.tick();
    provider.add('1', 'cold', 'standby');
    await writeBeat(f.prefix, { id: 'cold', state: 'standby', startedAt: T0 - 10_000, updatedAt: T0 + 32_000 });
    await f.clock.advance(33_000);
    await c.tick();
    expect(scripted.inputs.map((i) => i.settings.coldStartMs)).toEqual([60_000, 42_000]);
    expect(scripted.inputs[1]?.forecast.horizonS).toBe(43);
    const histogram = await metrics.getSingleMetricAsString('warmpool_cold_start_seconds');
    expect(histogram).toContain(`warmpool_cold_start_seconds_sum{model="${MODEL}"} 42`);
    expect(histogram).toContain(`warmpool_cold_start_seconds_bucket{le="60",model="${MODEL}"} 1`);
    const gauges = await metrics.getSingleMetricAsString('warmpool_pool_workers');
    expect(gauges).toContain(`warmpool_pool_workers{model="${MODEL}",state="standby"} 1`);
    // The leader publishes the registry for the API's /metrics.
    expect(await redis.get(metricsKey(f.prefix, 'scaler'))).toContain('warmpool_pool_desired');
  });

  it('takes per-worker throughput from busy workers, not idle ones', async () => {
    const f = await fixture();
    await f.deploy();
    const scripted = scriptedPolicy({ active: 1, standby: 1, launch: 0, drain: 0 });
    const provider = memoryProvider();
    provider.add('1', 'w', 'active');
    const c = f.controller({ provider, decide: scripted.policy });
    const profile = { threads: 1, chosenBatch: 8, rowsPerS: 100, entries: [] };
    await writeBeat(f.prefix, { id: 'w', state: 'active', rowsPerS: 3, jobsInFlight: 0, batchProfile: profile });
    await c.tick(); // idle: the profile stands in
    const queue = new Queue(queueName(MODEL, '1'), { connection: redis, prefix: f.prefix });
    cleanups.push(() => queue.close());
    await queue.add('infer', { n: 1 });
    await writeBeat(f.prefix, { id: 'w', state: 'active', rowsPerS: 250, jobsInFlight: 16, batchProfile: profile });
    await c.tick(); // busy with jobs queued: measured
    await writeBeat(f.prefix, { id: 'w', state: 'active', rowsPerS: 4, jobsInFlight: 0, batchProfile: profile });
    await c.tick(); // idle again: the measurement stays
    expect(scripted.inputs.map((i) => i.perWorkerRatePerSec)).toEqual([100, 250, 250]);
  });
});

it('computes the backlog over waiting, prioritized, delayed and active jobs of every version, with the oldest age', async () => {
  const f = await fixture();
  const q1 = new Queue(queueName(MODEL, '1'), { connection: redis, prefix: f.prefix });
  const q2 = new Queue(queueName(MODEL, '2'), { connection: redis, prefix: f.prefix });
  const q3 = new Queue(queueName(MODEL, '3'), { connection: redis, prefix: f.prefix });
  const taker = new Worker(queueName(MODEL, '1'), null, { connection: redis, prefix: f.prefix, autorun: false });
  cleanups.push(async () => {
    await taker.close();
    await Promise.all([q1.close(), q2.close(), q3.close()]);
  });
  await q1.add('infer', { taken: true }, { timestamp: T0 - 900_000 });
  expect(await taker.getNextJob('token')).toBeDefined(); // now active: not counted in the age
  await q1.add('infer', {}, { timestamp: T0 - 20_000 }); // wait list head
  await q1.add('infer', {}, { timestamp: T0 - 5_000 });
  await q1.add('infer', {}, { timestamp: T0 - 10_000, priority: 1 });
  await q2.add('infer', {}, { timestamp: T0 - 50_000, priority: 10 }); // the oldest, behind a higher priority
  await q2.add('infer', {}, { timestamp: T0 - 2_000, priority: 1 });
  await q2.add('infer', {}, { timestamp: T0 - 1_000, delay: 60_000 }); // not due yet
  await q3.add('infer', {}, { timestamp: T0 - 1_000, delay: 60_000 });

  expect(await f.queueStats.backlog({ model: MODEL, versions: ['1', '2'] })).toEqual({
    waiting: 2,
    prioritized: 3,
    delayed: 1,
    active: 1,
    oldestAgeMs: 50_000,
  });
  expect(await f.queueStats.backlog({ model: MODEL, versions: ['1'] })).toMatchObject({ active: 1, oldestAgeMs: 20_000 });
  // A delayed job counts from when it is due, not from when it was added.
  expect(await f.queueStats.backlog({ model: MODEL, versions: ['3'] })).toMatchObject({ delayed: 1, oldestAgeMs: 0 });
  f.clock.set(T0 + 59_000 + 7_000);
  expect((await f.queueStats.backlog({ model: MODEL, versions: ['3'] })).oldestAgeMs).toBe(7_000);
  await q3.obliterate({ force: true });
  expect(await f.queueStats.backlog({ model: MODEL, versions: ['3'] })).toEqual({
    waiting: 0,
    prioritized: 0,
    delayed: 0,
    active: 0,
    oldestAgeMs: 0,
  });
});

it('runs with the real arrival history, forecaster and policy: a warmed standby first, activated by a burst', async () => {
  const f = await fixture();
  await f.deploy({ min: 0, max: 4, standby: 1 });
  const history = createArrivalHistory(redis, f.prefix, f.clock);
  const provider = memoryProvider();
  const c = f.controller({ provider, history, forecast: forecastArrivals, decide });
  await c.tick();
  expect(mutations(provider.calls)).toEqual(['launch 1 1 standby']);
  const log = createDecisionLog(redis, f.prefix);
  const [first] = await log.recent(MODEL, 1);
  // No arrival yet: the forecaster is told it has no history, and says so.
  expect(first?.forecast).toMatchObject({ ratePerSec: 0, horizonS: 61, method: 'reactive' });
  expect(first?.decision).toMatchObject({ active: 0, standby: 1, launch: 1, drain: 0 });

  // The standby warms; then a burst arrives (recorded by the API tier as it enqueues).
  provider.add('1', 'new-0', 'standby');
  const queue = new Queue(queueName(MODEL, '1'), { connection: redis, prefix: f.prefix });
  cleanups.push(() => queue.close());
  await f.clock.advance(1000);
  for (let i = 0; i < 20; i++) await queue.add('infer', { i }, { timestamp: f.clock.now() });
  await history.recordArrival(MODEL, 20, f.clock.now());
  provider.calls.length = 0;
  await c.tick();
  const [second] = await log.recent(MODEL, 1);
  expect(second?.backlog.waiting).toBe(20);
  expect(second?.decision.active).toBeGreaterThan(0);
  expect(mutations(provider.calls)[0]).toBe('setState 1 new-0 active');
  expect(mutations(provider.calls).filter((call) => call.startsWith('launch'))).toContain('launch 1 1 standby');
});

it("passes the policy the rows served and, where the workers count them against the deployment's SLO, the late ones", async () => {
  const f = await fixture();
  await f.deploy({ min: 0, max: 4, standby: 0 });
  // The arrival history's keys expire by Redis's own clock: this test's time is now's.
  const clock = new ManualClock(Math.floor(Date.now() / 60_000) * 60_000 + 5_000);
  const history = createArrivalHistory(redis, f.prefix, clock);
  const slo = SCALER_DEFAULTS.sloQueueWaitMs;
  const scripted = scriptedPolicy({ active: 0, standby: 0, launch: 0, drain: 0 });
  const c = f.controller({ history, clock, decide: scripted.policy, lateSloMs: slo });
  await c.tick(); // the first tick only marks the counters
  await history.recordArrival(MODEL, 12, clock.now());
  await history.recordCompletion(MODEL, 10, clock.now());
  await history.recordMany([{ kind: 'late', model: MODEL, count: 3, at: clock.now() }]);
  await clock.advance(1000);
  await c.tick();
  expect(scripted.inputs[1]?.observed).toEqual({ arrivedRows: 12, servedRows: 10, lateRows: 3, sinceMs: 1000 });

  // A deployment whose policy sets another SLO than the one the workers count against: no late rows.
  await f.deploy({ min: 0, max: 4, standby: 0, policy: { sloQueueWaitMs: slo * 2 } });
  await history.recordCompletion(MODEL, 4, clock.now());
  await history.recordMany([{ kind: 'late', model: MODEL, count: 4, at: clock.now() }]);
  await clock.advance(1000);
  await c.tick();
  expect(scripted.inputs[2]?.observed).toEqual({ arrivedRows: 0, servedRows: 4, sinceMs: 1000 });
});
