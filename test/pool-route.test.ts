/**
 * `GET /v1/pool` on a real Redis: deployments from the real store, workers from heartbeats as
 * workers write them, queues from real BullMQ queues through the real QueueStats, and decisions
 * written by a real controller tick (real forecaster and policy, an in-memory provider) — the
 * route only reads what the scaler and the workers left in Redis. The terms behind the latest
 * decision (issue 17 §4) follow a worker from no profile to its warm-up profile to a measured
 * rate, and the cold start from the setting to learnt, with a backlog of multi-row requests
 * counted in rows; a record that names its sources itself is taken at its word. Cleans up its keys.
 */
import { Queue } from 'bullmq';
import { afterAll, expect, it } from 'vitest';
import { PoolView as PoolViewSchema } from '../api/openapi/schemas.ts';
import { POOL_DECISIONS_SHOWN, type PoolView } from '../api/routes/pool.ts';
import type { SourcedDecisionRecord } from '../api/use-cases/pool-terms.ts';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import type { PoolProvider, PoolWorker } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createBullJobQueue, createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { entryRowsKey, workerKey } from '../infra/redis/keys.ts';
import { createScalerController } from '../infra/scaler/controller.ts';
import { createDecisionLog } from '../infra/scaler/decision-log.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { decide } from '../infra/scaler/policy.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { poolApp } from './support/pool-app.ts';
import { testServices, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

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
    list: async (target) => ('version' in target ? (workers[target.version] ?? []) : []),
    launch: async () => {},
    setState: async () => {},
    drain: async () => {},
    close: async () => {},
  };
}

async function beat(
  b: Pick<HeartbeatPayload, 'id' | 'model' | 'version' | 'state' | 'rowsPerS' | 'startedAt'> & Partial<HeartbeatPayload>,
): Promise<void> {
  const payload: HeartbeatPayload = {
    pid: 4242,
    host: 'box-1',
    updatedAt: T0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    ...b,
  };
  await redis.set(workerKey(prefix, b.id), JSON.stringify(payload), 'PX', 60_000);
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

  const before = await poolApp({ redis, prefix, queueStats, clock }).request('/v1/pool');
  expect(before.status).toBe(200);
  const empty = (await before.json()) as PoolView;
  expect(empty.deployments.find((d) => d.model === 'ranker')).toMatchObject({ forecast: null, desired: null, decisions: [] });

  const controller = liveController(deployments, {
    '2': [
      { id: 'r-1', state: 'active', handle: '4242' },
      { id: 'r-2', state: 'standby', handle: '4243' },
    ],
    '1': [{ id: 'r-old', state: 'draining', handle: '4100' }],
  });
  await controller.tick();
  await clock.advance(1000);
  await controller.tick();
  await controller.close();

  const res = await poolApp({ redis, prefix, queueStats, clock }).request('/v1/pool');
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
  const theirs = (await (await poolApp({ redis, prefix, queueStats, clock }, 'tenant-b').request('/v1/pool')).json()) as PoolView;
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

/** The controller as the live scaler runs it, over a provider that lists what `workers` says. */
function liveController(deployments: ReturnType<typeof createDeploymentStore>, workers: Record<string, PoolWorker[]>) {
  return createScalerController({
    redis,
    prefix,
    deployments,
    history: createArrivalHistory(redis, prefix, clock),
    queueStats,
    provider: staticProvider(workers),
    forecast: forecastArrivals,
    decide,
    clock,
    log: silentLog,
    settings: scalerSettingsFrom(SCALER_DEFAULTS),
    tickMs: 1000,
  });
}

function request(rows: number): QueuedRequest {
  return {
    tenant: 't',
    model: 'scorer',
    version: '1',
    submittedAt: clock.now(),
    rows,
    inputs: [{ name: 'x', datatype: 'FP32', shape: [rows, 2], data: new Float32Array(rows * 2).fill(1) }],
  };
}

it("shows what set the latest decision's numbers: SLO sizing, backlog in rows, burst standby, holds, the rate's and cold start's sources", async () => {
  const deployments = createDeploymentStore(redis, prefix);
  await deployments.put({ model: 'scorer', version: '1', min: 0, max: 8, standby: 0 });
  const view = async () => {
    const res = await poolApp({ redis, prefix, queueStats, clock }).request('/v1/pool');
    expect(res.status).toBe(200);
    const body = (await res.json()) as PoolView;
    expect(PoolViewSchema.safeParse(body).error).toBeUndefined();
    const scorer = body.deployments.find((d) => d.model === 'scorer');
    if (!scorer) throw new Error('scorer is not in the pool view');
    return scorer;
  };
  expect((await view()).terms).toBeNull();

  // Six requests of 4 rows each, written as the API writes them: the backlog is 24 rows.
  const jobs = createBullJobQueue({ connection: testServices().redisUrl, prefix, retentionS: 600, attempts: 1 });
  try {
    await Promise.all(Array.from({ length: 6 }, (_, i) => jobs.enqueue(request(4), { priority: 'normal', jobId: `job_terms${i}` })));
    await until('rows per request published', async () =>
      (await redis.get(entryRowsKey(prefix, queueName('scorer', '1')))) === '4.00' ? true : undefined,
    );
  } finally {
    await jobs.close();
  }

  // 1. A worker warming, no profile yet: no rate known, the cold start is the setting.
  const profile = { threads: 1, chosenBatch: 8, rowsPerS: 100, entries: [] };
  await beat({ id: 's-1', model: 'scorer', version: '1', state: 'warming', rowsPerS: 0, startedAt: T0 - 10_000 });
  const warming = liveController(deployments, { '1': [{ id: 's-1', state: 'warming', handle: '1' }] });
  await warming.tick();
  await warming.close();
  let scorer = await view();
  let latest = scorer.decisions[0];
  expect(latest?.backlog.rowsPerJob).toBe(4);
  expect(latest?.decision.reasons.join('; ')).toContain('backlog 24 rows (6 jobs × 4.0)');
  expect(scorer.terms).toEqual({
    at: clock.now(),
    shadow: false,
    forecast: {
      ratePerSec: latest?.forecast.ratePerSec,
      upperRatePerSec: latest?.forecast.upperRatePerSec ?? null,
      upperQuantile: latest?.forecast.upperQuantile ?? null,
      dispersion: latest?.forecast.dispersion ?? null,
      burstRatePerSec: latest?.forecast.burstRatePerSec,
      burstsBySpan: latest?.forecast.burstsBySpan ?? [],
      horizonS: latest?.forecast.horizonS,
      method: latest?.forecast.method,
    },
    sloQueueWaitMs: SCALER_DEFAULTS.sloQueueWaitMs,
    policy: latest?.decision.terms,
    perWorker: { ratePerSec: 0, source: 'none' },
    coldStart: { ms: SCALER_DEFAULTS.coldStartDefaultMs, source: 'setting', samples: 0 },
    backlog: { jobs: 6, rowsPerJob: 4, rows: 24 },
    tuning: null, // no self-tuning: the deployment's own policy decided
  });
  expect(scorer.terms?.policy).toMatchObject({ measuredRate: false, coldStartMs: SCALER_DEFAULTS.coldStartDefaultMs });
  expect(scorer.terms?.policy?.activeSetBy).toMatch(/^(slo-sizing|backlog|stabilisation|min-lifetime|min|max)$/);

  // 2. Warmed into standby 42 s after its start, with a warm-up profile: the rate is the profile's, the cold start learnt.
  await clock.advance(33_000);
  await beat({
    id: 's-1',
    model: 'scorer',
    version: '1',
    state: 'standby',
    rowsPerS: 0,
    startedAt: T0 - 10_000,
    stateSince: T0 + 32_000,
    batchProfile: profile,
  });
  const warmed = liveController(deployments, { '1': [{ id: 's-1', state: 'standby', handle: '1' }] });
  await warmed.tick();
  await warmed.close();
  scorer = await view();
  expect(scorer.terms).toMatchObject({
    at: clock.now(),
    perWorker: { ratePerSec: 100, source: 'warm-up' },
    coldStart: { ms: 42_000, source: 'learned', samples: 1 },
    policy: { perWorkerRatePerSec: 100, measuredRate: true, coldStartMs: 42_000, minLifetimeMs: expect.any(Number) },
  });
  expect(scorer.terms?.policy?.minLifetimeMs).toBeGreaterThanOrEqual(2 * 42_000);

  // 3. Busy with jobs queued: the rate is measured from now on.
  await clock.advance(2_000);
  await beat({
    id: 's-1',
    model: 'scorer',
    version: '1',
    state: 'active',
    rowsPerS: 250,
    jobsInFlight: 4,
    startedAt: T0 - 10_000,
    batchProfile: profile,
  });
  const busy = liveController(deployments, { '1': [{ id: 's-1', state: 'active', handle: '1' }] });
  await busy.tick();
  await busy.close();
  scorer = await view();
  latest = scorer.decisions[0];
  expect(scorer.terms).toMatchObject({ perWorker: { ratePerSec: 250, source: 'measured' }, policy: latest?.decision.terms });

  // 4. A record that names its sources itself is taken at its word, not the measurements'.
  await clock.advance(1_000);
  const sourced: SourcedDecisionRecord = {
    ...(latest as SourcedDecisionRecord),
    at: clock.now(),
    perWorkerRateSource: 'warm-up',
    coldStartSamples: 0,
  };
  expect(await createDecisionLog(redis, prefix).record(sourced)).toBe(true);
  scorer = await view();
  expect(scorer.terms).toMatchObject({ at: clock.now(), perWorker: { source: 'warm-up' }, coldStart: { source: 'setting', samples: 0 } });
});
