import { afterAll, expect, it } from 'vitest';
import { PoolView as PoolViewSchema } from '../api/openapi/schemas.ts';
import type { PoolView } from '../api/routes/pool.ts';
import type { PoolProvider, Tuner, TuningChoice } from '../infra/contracts/pool.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import { ManualClock } from '../infra/kernel/clock.ts';
import { SCALER_DEFAULTS } from '../infra/kernel/config.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { createQueueStats } from '../infra/queue/index.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { scalerTuningKey, workerKey } from '../infra/redis/keys.ts';
import { createScalerController } from '../infra/scaler/controller.ts';
import { retuneSpacingMs } from '../infra/scaler/controller-tuning.ts';
import { createDecisionLog } from '../infra/scaler/decision-log.ts';
import { forecastArrivals } from '../infra/scaler/forecast.ts';
import { decide } from '../infra/scaler/policy.ts';
import { scalerSettingsFrom } from '../infra/scaler/settings.ts';
import { createTuner } from '../infra/simulator/index.ts';
import { type ArrivalCount, createArrivalHistory } from '../infra/telemetry/arrival-history.ts';
import { poolApp } from './support/pool-app.ts';
import { testServices, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

const redis = createRedis(testServices().redisUrl);
const prefix = uniqueId('self-tuning');
const MIN = 60_000;
const HOUR = 60 * MIN;
// Near the real time: the arrival history's keys expire by Redis's clock, not the fake one.
const T0 = Math.floor(Date.now() / HOUR) * HOUR;
const clock = new ManualClock(T0);
const queueStats = createQueueStats({ redis, prefix, clock });
const history = createArrivalHistory(redis, prefix, clock);
const tuners: Tuner[] = [];

afterAll(async () => {
  for (const t of tuners) await t.close();
  await queueStats.close();
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

const provider: PoolProvider = {
  name: 'static',
  list: async () => [
    { id: 'w-1', state: 'active', handle: '1' },
    { id: 'w-2', state: 'active', handle: '2' },
  ],
  launch: async () => {},
  setState: async () => {},
  drain: async () => {},
  close: async () => {},
};

/** Two active workers whose warm-up measured 5 rows/s at a batch of 4. */
async function beats(): Promise<void> {
  for (const id of ['w-1', 'w-2']) {
    const payload: HeartbeatPayload = {
      id,
      model: 'scorer',
      version: '1',
      state: 'active',
      pid: 1,
      host: 'box',
      startedAt: T0 - 10 * HOUR,
      updatedAt: clock.now(),
      jobsInFlight: 0,
      rowsPerS: 0,
      memory: { rssBytes: 1, heapUsedBytes: 1 },
      batchProfile: { threads: 1, chosenBatch: 4, rowsPerS: 5, entries: [] },
    };
    await redis.set(workerKey(prefix, id), JSON.stringify(payload), 'PX', 60_000);
  }
}

/** Arrivals per minute over [fromMs, fromMs + minutes), as the API counts them. */
async function arrivals(fromMs: number, minutes: number, perMinute: (m: number) => number): Promise<void> {
  const counts: ArrivalCount[] = Array.from({ length: minutes }, (_, m) => ({
    kind: 'arrivals',
    model: 'scorer',
    count: perMinute(m),
    at: fromMs + m * MIN,
  }));
  await history.recordMany(counts);
}

function controller(tuner: Tuner, cpuBudgetMs: number) {
  return createScalerController({
    redis,
    prefix,
    deployments: createDeploymentStore(redis, prefix),
    history,
    queueStats,
    provider,
    forecast: forecastArrivals,
    decide,
    clock,
    log: silentLog,
    settings: scalerSettingsFrom(SCALER_DEFAULTS),
    tickMs: 5_000,
    tuning: { tuner, retuneIntervalMs: 5 * MIN, cpuBudgetMs },
  });
}

/** The choice stored for the deployment once a retune newer than `after` has finished. */
async function choiceAfter(after: number): Promise<TuningChoice> {
  return until(`a retune after ${after}`, async () => {
    const raw = await redis.get(scalerTuningKey(prefix, false, 'scorer'));
    const choice = raw ? (JSON.parse(raw) as TuningChoice) : undefined;
    return choice && choice.at > after ? choice : undefined;
  });
}

it('switches away from a fixed fleet when steady traffic turns into an hourly climb, to a queue-length scaler once the window holds only the climb; in the decision log and GET /v1/pool', async () => {
  await createDeploymentStore(redis, prefix).put({
    model: 'scorer',
    version: '1',
    min: 0,
    max: 50,
    standby: 0,
    policy: { sloQueueWaitMs: 10_000, coldStartMs: 60_000 },
  });
  const tuner = createTuner();
  tuners.push(tuner);
  const scaler = controller(tuner, 60_000);
  const decisions = createDecisionLog(redis, prefix);
  try {
    // Six hours of steady traffic, 10 rows/s: two workers at 5 rows/s carry it.
    await arrivals(T0 - 6 * HOUR, 6 * 60, () => 600);
    clock.set(T0 + 1_000);
    await beats();
    await scaler.tick(); // starts the first retune; the tick does not wait for it
    const steady = await choiceAfter(0);
    expect(steady.chosen.name).toBe('fixed');
    expect(steady.previous).toBeUndefined();
    expect(steady.table.map((c) => c.name)).toEqual(expect.arrayContaining(['fixed', 'reactive-x1', 'predictive']));
    await clock.advance(5_000);
    await beats();
    await scaler.tick();
    const [first] = await decisions.recent('scorer', 1);
    expect(first?.tuning?.chosen.name).toBe('fixed');
    expect(first?.decision.reasons[0]).toMatch(/^self-tuning: fixed \(/);

    // Then two hours that climb from 2 to 50 rows/s and fall back, every hour; the scaler ticks
    // on, and retunes as they fall due (five minutes, or a sixth of the window replayed), each on
    // the window before it.
    await arrivals(T0, 120, (m) => 120 + (m % 60) * 48);
    const retunes: TuningChoice[] = [steady];
    while (clock.now() < T0 + 2 * HOUR) {
      const last = retunes.at(-1) as TuningChoice;
      // One tick before it falls due starts nothing.
      const due = last.at + retuneSpacingMs(5 * MIN, last.toMs - last.fromMs);
      clock.set(due - 5_000);
      await beats();
      await scaler.tick();
      clock.set(due);
      await beats();
      await scaler.tick();
      retunes.push(await choiceAfter(last.at));
      // The retune came when due, not a tick before.
      expect(retunes.at(-1)?.at).toBe(due);
    }
    const switched = retunes.findIndex((c) => c.chosen.name !== 'fixed');
    expect(switched).toBeGreaterThan(0);
    const climbing = retunes[switched] as TuningChoice;
    expect(climbing.previous).toBe('fixed');
    const fixed = climbing.table.find((c) => c.name === 'fixed');
    const chosen = climbing.table.find((c) => c.name === climbing.chosen.name);
    expect(chosen?.met).toBe(true);
    expect(chosen?.cost).toBeLessThan((fixed?.cost ?? 0) * 0.95); // the hysteresis: 5 % cheaper at least
    // Once the window holds only the climb, a queue-length scaler is chosen: it follows it.
    expect(retunes.slice(switched).some((c) => c.chosen.kind === 'reactive')).toBe(true);
    await clock.advance(5_000);
    await beats();
    await scaler.tick();
    const [latest] = await decisions.recent('scorer', 1);
    const last = retunes.at(-1) as TuningChoice;
    expect(latest?.tuning?.chosen.name).toBe(last.chosen.name);
    expect(latest?.decision.reasons[0]).toContain(`self-tuning: ${last.chosen.name}`);
    // The log kept the switch: a record decided by the fixed fleet, then one by the new choice.
    const log = (await decisions.recent('scorer', 100)).reverse();
    const at = log.findIndex((r) => r.tuning?.at === climbing.at);
    expect(at).toBeGreaterThan(0);
    expect(log[at - 1]?.tuning?.chosen.name).toBe('fixed');

    const res = await poolApp({ redis, prefix, queueStats, clock }).request('/v1/pool');
    const body = (await res.json()) as PoolView;
    expect(PoolViewSchema.safeParse(body).error).toBeUndefined();
    const tuning = body.deployments.find((d) => d.model === 'scorer')?.terms?.tuning;
    expect(tuning?.chosen.name).toBe(last.chosen.name);
    expect(tuning?.at).toBe(last.at);
    expect(tuning?.table.length).toBe(last.table.length);
    expect(tuning?.cpuMs).toBeGreaterThan(0);
  } finally {
    await scaler.close();
  }
}, 120_000);

it('a retune over its CPU budget leaves the candidates it could not afford out of the choice', async () => {
  await redis.del(scalerTuningKey(prefix, false, 'scorer'));
  const tuner = createTuner();
  tuners.push(tuner);
  const scaler = controller(tuner, 1);
  try {
    clock.set(T0 + 3 * HOUR);
    await beats();
    await scaler.tick();
    const choice = await choiceAfter(0);
    const left = choice.table.filter((c) => c.partial);
    expect(left.length).toBeGreaterThan(0);
    expect(left.map((c) => c.name)).not.toContain(choice.chosen.name);
    // Candidates replay cheapest first: the fixed fleet's first size always runs, so it is the one chosen.
    expect(choice.chosen.kind).toBe('fixed');
    expect(left.every((c) => c.kind !== 'fixed')).toBe(true);
  } finally {
    await scaler.close();
  }
}, 120_000);
