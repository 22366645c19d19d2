// Every key family's exact name (existing data and `warmpool migrate-keys` depend on them, byte
// for byte), and the hash tags that keep what one script touches in one cluster slot.
import { describe, expect, it } from 'vitest';
import { queueName } from '../contracts/job.ts';
import * as keys from './keys.ts';

const { hashTag } = keys;

const P = 'wp';
const Q = queueName('m', '1');

describe('key names', () => {
  it.each([
    [keys.queueKeyPrefix(P, Q), 'wp:{infer.m.1}'],
    [keys.queueKey(P, Q, 'wait'), 'wp:{infer.m.1}:wait'],
    [keys.queueKey(P, Q, 'events'), 'wp:{infer.m.1}:events'],
    [keys.jobTombstoneKey(P, Q, 'j1'), 'wp:{infer.m.1}:tomb:j1'],
    [keys.entryInputsKey(P, Q, 'ent_1'), 'wp:{infer.m.1}:in:ent_1'],
    [keys.entryOutputsKey(P, Q, 'ent_1'), 'wp:{infer.m.1}:out:ent_1'],
    [keys.entrySkipKey(P, Q, 'ent_1'), 'wp:{infer.m.1}:skip:ent_1'],
    [keys.entryMembersKey(P, Q), 'wp:{infer.m.1}:members-per-entry'],
    [keys.entryRowsKey(P, Q), 'wp:{infer.m.1}:rows-per-request'],
    [keys.canaryCursorKey(P, Q), 'wp:canary:cursor:{infer.m.1}'],
    [keys.canaryAggKey(P, Q, 1_700_000_000_000), 'wp:canary:agg:{infer.m.1}:1700000000000'],
    [keys.deploymentsKey(P), 'wp:{deployments}'],
    [keys.deploymentHistoryKey(P, 'm'), 'wp:{deployments}:history:m'],
    [keys.sharedPoolsKey(P), 'wp:{deployments}:pools'],
    [keys.sharedPoolHistoryKey(P, 'gpu-a'), 'wp:{deployments}:pool-history:gpu-a'],
    [keys.webhookDeliveryKey(P, 'msg_j1_succeeded'), 'wp:{webhooks}:delivery:msg_j1_succeeded'],
    [keys.webhookDueKey(P), 'wp:{webhooks}:due'],
    [keys.webhookIndexKey(P, 'tenant-a', 'pending'), 'wp:{webhooks}:index:tenant-a:pending'],
    [keys.webhookCursorKey(P, Q), 'wp:{webhooks}:cursor:{infer.m.1}'],
    [keys.bulkRunningKey(P), 'wp:{bulk}:running'],
    [keys.bulkRunKey(P, 'r1'), 'wp:{bulk}:run:r1'],
    [keys.bulkRunPartsKey(P, 'r1'), 'wp:{bulk}:run:r1:parts'],
    [keys.bulkRunObjectsKey(P, 'r1'), 'wp:{bulk}:run:r1:objects'],
    [keys.bulkRunOutstandingKey(P, 'r1'), 'wp:{bulk}:run:r1:outstanding'],
    [keys.bulkRunLeaseKey(P, 'r1'), 'wp:{bulk}:run:r1:lease'],
    [keys.jobIndexKey(P, 'j1'), 'wp:job:j1'],
    [keys.resultCacheKey(P, 'm', '1', 'abc'), 'wp:result:m:1:abc'],
    [keys.idempotencyKey(P, 'tenant-a', 'abc'), 'wp:idem:tenant-a:abc'],
    [keys.rateLimitKey(P, 'tenant-a'), 'wp:ratelimit:tenant-a'],
    [keys.openJobsKey(P, 'tenant-a'), 'wp:open-jobs:tenant-a'],
    [keys.webhookSecretKey(P, 'tenant-a'), 'wp:webhooks:secret:tenant-a'],
    [keys.workerKey(P, 'w1'), 'wp:workers:w1'],
    [keys.controlChannel(P, 'w1'), 'wp:control:w1'],
    [keys.controlStateKey(P, 'w1'), 'wp:control-state:w1'],
    [keys.holdingsKey(P, 'w1'), 'wp:pool-holdings:w1'],
    [keys.holdingsChannel(P, 'w1'), 'wp:pool-holdings-bell:w1'],
    [keys.metricsKey(P, 'scaler'), 'wp:metrics:scaler'],
    [keys.arrivalHistoryKey(P, 'arrivals', 'm', '20240101'), 'wp:arrivals:m:20240101'],
    [keys.arrivalHistoryKey(P, 'completions', 'm', '20240101'), 'wp:completions:m:20240101'],
    [keys.dashboardKey(P, 'samples', 'm'), 'wp:dashboard:samples:m'],
    [keys.bulkCapacityKey(P, 'm'), 'wp:bulk:capacity:m'],
    [keys.scalerLeaderKey(P, false), 'wp:scaler:leader'],
    [keys.scalerLeaderKey(P, true), 'wp:scaler-shadow:leader'],
    [keys.scalerMemoryKey(P, false, 'm'), 'wp:scaler:memory:m'],
    [keys.scalerTuningKey(P, false, 'm'), 'wp:scaler:tuning:m'],
    [keys.scalerWorkerRateKey(P, true, 'm'), 'wp:scaler-shadow:worker-rate:m'],
    [keys.scalerColdStartKey(P, false, 'm'), 'wp:scaler:cold-start:m'],
    [keys.scalerColdStartPendingKey(P, false, 'm'), 'wp:scaler:cold-start:m:pending'],
    [keys.decisionStreamKey(P, 'm'), 'wp:scaler:decisions:m'],
    [keys.canaryEventsKey(P, 'm'), 'wp:canary:events:m'],
    [keys.canaryBreachKey(P, 'm', '1'), 'wp:canary:breach:m:1'],
  ])('%s', (key, expected) => {
    expect(key).toBe(expected);
  });

  it('gives a family head for an empty last id (scripts append ids, SCAN patterns end with *)', () => {
    expect(keys.webhookDeliveryKey(P, '')).toBe('wp:{webhooks}:delivery:');
    expect(keys.webhookIndexKey(P, 'tenant-a', '')).toBe('wp:{webhooks}:index:tenant-a:');
    expect(keys.workerKey(P, '*')).toBe('wp:workers:*');
  });
});

describe('hashTag', () => {
  it('is the text between the first { and the next }', () => {
    expect(hashTag('wp:{infer.m.1}:wait')).toBe('infer.m.1');
    expect(hashTag('wp:{webhooks}:cursor:{infer.m.1}')).toBe('webhooks');
    expect(hashTag('wp:canary:agg:{infer.m.1}:1')).toBe('infer.m.1');
    expect(hashTag('a{b{c}d}')).toBe('b{c');
  });

  it('is null (the whole key is hashed) without braces or between empty ones', () => {
    expect(hashTag('wp:workers:w1')).toBeNull();
    expect(hashTag('wp:{}:x{y}')).toBeNull();
    expect(hashTag('wp:{open')).toBeNull();
    expect(hashTag('wp:}x{')).toBeNull();
  });
});

describe('slots', () => {
  /** Families a multi-key script or a co-location argument (README "Redis Cluster") binds to one slot. */
  const groups: Record<string, string[]> = {
    'infer.m.1': [
      keys.queueKey(P, Q, 'wait'),
      keys.queueKey(P, Q, 'prioritized'),
      keys.queueKey(P, Q, 'events'),
      keys.jobTombstoneKey(P, Q, 'j1'),
      keys.entryInputsKey(P, Q, 'ent_1'),
      keys.entryOutputsKey(P, Q, 'ent_1'),
      keys.entrySkipKey(P, Q, 'ent_1'),
      keys.canaryCursorKey(P, Q),
      keys.canaryAggKey(P, Q, 0),
    ],
    deployments: [keys.deploymentsKey(P), keys.deploymentHistoryKey(P, 'm'), keys.sharedPoolsKey(P), keys.sharedPoolHistoryKey(P, 'p')],
    webhooks: [
      keys.webhookDeliveryKey(P, 'd1'),
      keys.webhookDueKey(P),
      keys.webhookIndexKey(P, 't', 'pending'),
      keys.webhookIndexKey(P, 't', 'dead'),
      keys.webhookCursorKey(P, Q),
    ],
    bulk: [
      keys.bulkRunningKey(P),
      keys.bulkRunKey(P, 'r1'),
      keys.bulkRunPartsKey(P, 'r1'),
      keys.bulkRunObjectsKey(P, 'r1'),
      keys.bulkRunOutstandingKey(P, 'r1'),
      keys.bulkRunLeaseKey(P, 'r2'),
    ],
  };

  it.each(Object.entries(groups))('every key of {%s} carries that tag', (tag, members) => {
    for (const key of members) expect(hashTag(key), key).toBe(tag);
  });

  it('the fixed tags are the ones the keys carry', () => {
    expect(keys.DEPLOYMENTS_TAG).toBe(`{${hashTag(keys.deploymentsKey(P))}}`);
    expect(keys.WEBHOOKS_TAG).toBe(`{${hashTag(keys.webhookDueKey(P))}}`);
    expect(keys.BULK_TAG).toBe(`{${hashTag(keys.bulkRunningKey(P))}}`);
  });

  it('different model versions have different tags, so their queues spread over the shards', () => {
    expect(hashTag(keys.queueKey(P, queueName('m', '2'), 'wait'))).toBe('infer.m.2');
    expect(hashTag(keys.canaryAggKey(P, queueName('n', '1'), 0))).toBe('infer.n.1');
  });

  it.each([
    keys.jobIndexKey(P, 'j1'),
    keys.resultCacheKey(P, 'm', '1', 'abc'),
    keys.idempotencyKey(P, 't', 'abc'),
    keys.rateLimitKey(P, 't'),
    keys.openJobsKey(P, 't'),
    keys.webhookSecretKey(P, 't'),
    keys.workerKey(P, 'w1'),
    keys.controlStateKey(P, 'w1'),
    keys.metricsKey(P, 'w1'),
    keys.arrivalHistoryKey(P, 'arrivals', 'm', '20240101'),
    keys.dashboardKey(P, 'due', 'm'),
    keys.bulkCapacityKey(P, 'm'),
    keys.scalerLeaderKey(P, false),
    keys.scalerMemoryKey(P, true, 'm'),
    keys.decisionStreamKey(P, 'm'),
    keys.canaryEventsKey(P, 'm'),
    keys.canaryBreachKey(P, 'm', '1'),
  ])('%s has no tag: single-key commands spread by key', (key) => {
    expect(hashTag(key)).toBeNull();
  });
});
