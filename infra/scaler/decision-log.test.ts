import { afterAll, expect, it } from 'vitest';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../redis/client.ts';
import { decisionStreamKey } from '../redis/keys.ts';
import { createDecisionLog, DECISION_LOG_MAX_LEN, type DecisionRecord } from './decision-log.ts';

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

it('reads back the newest records of a model, newest first, with every input', async () => {
  const log = createDecisionLog(redis, prefix);
  for (const at of [1000, 2000, 3000]) await log.record(record('m', at));
  await log.record(record('other', 9000));
  const recent = await log.recent('m', 2);
  expect(recent.map((r) => r.at)).toEqual([3000, 2000]);
  expect(recent[0]).toEqual(record('m', 3000));
  expect(await log.recent('m', 0)).toEqual([]);
  expect(await log.recent('nobody', 5)).toEqual([]);
});

it('keeps the stream near its cap and skips entries that are not records', async () => {
  const log = createDecisionLog(redis, prefix);
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
