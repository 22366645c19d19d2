/**
 * A late bulk run's capacity request (infra/deployments/capacity-request.ts) through the policy: more
 * active workers for the rows/s it asks for, on top of online demand, never past max; and the
 * controller's read of the request from Redis.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { emptyPolicyMemory, type PolicyInput } from '../contracts/pool.ts';
import { clearCapacityRequest, publishCapacityRequest, readCapacityRequest } from '../deployments/capacity-request.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../redis/client.ts';
import { decide } from './policy.ts';

const input = (over: Partial<PolicyInput> = {}): PolicyInput => ({
  now: 1_000_000,
  forecast: { ratePerSec: 40, burstRatePerSec: 40, horizonS: 150, method: 'reactive', components: {} },
  backlog: { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 },
  workers: { starting: 0, standby: 0, active: 1, draining: 0 },
  perWorkerRatePerSec: 100,
  settings: {
    min: 0,
    max: 4,
    standby: 0,
    sloQueueWaitMs: 10_000,
    coldStartMs: 60_000,
    scaleDownStabilizationMs: 600_000,
    targetUtilization: 0.8,
  },
  memory: emptyPolicyMemory(),
  ...over,
});

describe('policy with a bulk capacity request', () => {
  it('plans active workers for the requested rows/s on top of the forecast', () => {
    expect(decide(input()).active).toBe(1); // 40/s online at 80/s per worker
    const late = decide(input({ capacityRequest: { rowsPerSecondNeeded: 200 } }));
    expect(late.active).toBe(3); // (40 + 200) / 80
    expect(late.launch).toBe(2);
    expect(late.reasons.join('; ')).toMatch(/late bulk runs ask for 200\.0\/s/);
  });

  it('never goes past the deployment max for it', () => {
    const d = decide(input({ capacityRequest: { rowsPerSecondNeeded: 10_000 } }));
    expect(d.active + d.standby).toBeLessThanOrEqual(4);
    expect(d.active).toBe(4);
  });
});

describe('capacity requests in Redis', () => {
  const redis = createRedis(testServices().redisUrl);
  const prefix = uniqueId('cap');
  afterAll(async () => {
    for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  it('sums the live requests of a model and drops expired ones', async () => {
    const now = 5_000_000;
    await publishCapacityRequest(redis, prefix, 'm', { runId: 'a', version: '1', rowsPerSecondNeeded: 50, deadline: now + 1 }, now);
    await publishCapacityRequest(
      redis,
      prefix,
      'm',
      { runId: 'b', version: '1', rowsPerSecondNeeded: 25, deadline: now + 1 },
      now - 120_000,
    );
    expect(await readCapacityRequest(redis, prefix, 'm', now)).toEqual({ rowsPerSecondNeeded: 50, runs: ['a'] });
    expect(await redis.hkeys(`${prefix}:bulk:capacity:m`)).toEqual(['a']);
    expect(await readCapacityRequest(redis, prefix, 'other', now)).toBeUndefined();
    await clearCapacityRequest(redis, prefix, 'm', 'a');
    expect(await readCapacityRequest(redis, prefix, 'm', now)).toBeUndefined();
  });
});
