/**
 * The decision log on a real Redis: records read back newest first with every input, the stream
 * capped, and a decision recorded when it changes or once a heartbeat (ticks driven on a
 * ManualClock, including one where the clock goes back).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { ManualClock } from '../kernel/clock.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../redis/client.ts';
import { decisionStreamKey } from '../redis/keys.ts';
import { createDecisionLog, DECISION_HEARTBEAT_MS, DECISION_LOG_MAX_LEN, type DecisionRecord } from './decision-log.ts';

const redis = createRedis(testServices().redisUrl);
const prefix = uniqueId('decisions');

afterAll(async () => {
  for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
  await closeRedis(redis);
});

function record(model: string, at: number): DecisionRecord {
  return {
    at,
    model,
    version: '1',
    shadow: false,
    leader: 'test',
    forecast: { ratePerSec: at / 1000, burstRatePerSec: at / 500, horizonS: 70, method: 'reactive', components: { level: 1 } },
    backlog: { waiting: 1, prioritized: 2, delayed: 3, active: 4, oldestAgeMs: 5 },
    workers: { starting: 0, standby: 1, active: 2, draining: 0 },
    perWorkerRatePerSec: 40,
    settings: {
      min: 0,
      max: 4,
      standby: 1,
      sloQueueWaitMs: 30_000,
      coldStartMs: 60_000,
      scaleDownStabilizationMs: 300_000,
      targetUtilization: 0.8,
    },
    decision: { active: 2, standby: 1, launch: 0, drain: 0, reasons: ['steady'] },
    planned: [{ action: 'launch', version: '1', count: 1, startAs: 'standby' }],
    applied: [{ action: 'drain', version: '1', workerId: 'w1', error: 'gone' }],
  };
}

// Every tick recorded (no de-duplication), so the reading and capping tests see each record.
const everyTick = { heartbeatMs: 0 };

it('reads back the newest records of a model, newest first, with every input', async () => {
  const log = createDecisionLog(redis, prefix, everyTick);
  for (const at of [1000, 2000, 3000]) await log.record(record('m', at));
  await log.record(record('other', 9000));
  const recent = await log.recent('m', 2);
  expect(recent.map((r) => r.at)).toEqual([3000, 2000]);
  expect(recent[0]).toEqual(record('m', 3000));
  expect(await log.recent('m', 0)).toEqual([]);
  expect(await log.recent('nobody', 5)).toEqual([]);
});

it('keeps the stream near its cap and skips entries that are not records', async () => {
  const log = createDecisionLog(redis, prefix, everyTick);
  const key = decisionStreamKey(prefix, 'capped');
  for (let i = 0; i < DECISION_LOG_MAX_LEN + 300; i++) await log.record(record('capped', i));
  // MAXLEN ~ trims whole stream nodes: near the cap, never the whole history.
  const length = await redis.xlen(key);
  expect(length).toBeGreaterThanOrEqual(DECISION_LOG_MAX_LEN);
  expect(length).toBeLessThan(DECISION_LOG_MAX_LEN + 300);
  await redis.xadd(key, '*', 'record', '{not json');
  await redis.xadd(key, '*', 'other', 'x');
  expect((await log.recent('capped', 3)).map((r) => r.at)).toEqual([DECISION_LOG_MAX_LEN + 299]);
});

describe('de-duplication', () => {
  const TICK_MS = 2_000;
  /** Ticks every 2 s from `clock`'s time for `ms`, recording `make(now)`; the times that were written. */
  async function tickFor(log: ReturnType<typeof createDecisionLog>, clock: ManualClock, ms: number, make: (at: number) => DecisionRecord) {
    const written: number[] = [];
    for (const end = clock.now() + ms; clock.now() < end; await clock.advance(TICK_MS)) {
      if (await log.record(make(clock.now()))) written.push(clock.now());
    }
    return written;
  }

  it('records a steady decision once, then once a minute as a heartbeat, and every change at once', async () => {
    const clock = new ManualClock(1_000_000);
    const log = createDecisionLog(redis, prefix);
    const t0 = clock.now();
    // Three steady minutes: the forecast and backlog behind the reasons move, the decision does not.
    const steady = await tickFor(log, clock, 3 * 60_000, (at) => record('steady', at));
    expect(steady).toEqual([t0, t0 + DECISION_HEARTBEAT_MS, t0 + 2 * DECISION_HEARTBEAT_MS]);
    // The desired counts change: recorded at once, then steady again from there.
    const t1 = clock.now();
    const scaled = (at: number) => {
      const r = record('steady', at);
      return { ...r, decision: { ...r.decision, active: 3, launch: 1, reasons: ['needs 3 active'] } };
    };
    expect(await tickFor(log, clock, 10_000, scaled)).toEqual([t1]);
    // Only the reasons change (a term the policy words differently): recorded too.
    const t2 = clock.now();
    const reworded = (at: number) => ({ ...scaled(at), decision: { ...scaled(at).decision, reasons: ['needs 3 active', 'min 1'] } });
    expect(await tickFor(log, clock, 4_000, reworded)).toEqual([t2]);
    // The workers move (a launched one warms): recorded.
    const t3 = clock.now();
    expect(
      await tickFor(log, clock, 4_000, (at) => ({ ...reworded(at), workers: { starting: 0, standby: 1, active: 3, draining: 0 } })),
    ).toEqual([t3]);
    const stored = await log.recent('steady', 100);
    expect(stored.map((r) => r.at)).toEqual([t3, t2, t1, ...steady.reverse()]);
    expect(await redis.xlen(decisionStreamKey(prefix, 'steady'))).toBe(6);
  });

  it('keeps the live and the shadow scaler apart, and each model apart', async () => {
    const log = createDecisionLog(redis, prefix);
    const at = 5_000_000;
    expect(await log.record(record('a', at))).toBe(true);
    expect(await log.record({ ...record('a', at + 2_000), shadow: true })).toBe(true);
    expect(await log.record(record('b', at + 2_000))).toBe(true);
    expect(await log.record(record('a', at + 4_000))).toBe(false);
    expect(await log.record({ ...record('a', at + 4_000), shadow: true })).toBe(false);
  });

  it('records again when the clock goes back, and de-duplicates from there', async () => {
    const clock = new ManualClock(9_000_000);
    const log = createDecisionLog(redis, prefix);
    expect(await log.record(record('skew', clock.now()))).toBe(true);
    await clock.advance(30_000);
    expect(await log.record(record('skew', clock.now()))).toBe(false);
    // Stepped back 20 minutes (an NTP correction): without this the next heartbeat would be 21 minutes away.
    const back = clock.now() - 20 * 60_000;
    expect(await log.record(record('skew', back))).toBe(true);
    expect(await log.record(record('skew', back + TICK_MS))).toBe(false);
    expect(await log.record(record('skew', back + DECISION_HEARTBEAT_MS))).toBe(true);
  });

  it('a new leader records its first decision', async () => {
    const at = 7_000_000;
    expect(await createDecisionLog(redis, prefix).record(record('lead', at))).toBe(true);
    const other = createDecisionLog(redis, prefix);
    expect(await other.record({ ...record('lead', at + 2_000), leader: 'other' })).toBe(true);
    expect(await other.record({ ...record('lead', at + 4_000), leader: 'other' })).toBe(false);
  });
});
