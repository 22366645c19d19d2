// The key mapping of the cluster-layout migration, as pure functions (no Redis).
import { describe, expect, it } from 'vitest';
import { countByFamily, isOldQueueName, liveProcessSign, migratedIndexValue, migratedKey } from './key-migration.ts';

const P = 'wp';

describe('migratedKey', () => {
  it.each([
    ['wp:infer.m.1:wait', 'queue', 'wp:{infer.m.1}:wait'],
    ['wp:infer.m.1:events', 'queue', 'wp:{infer.m.1}:events'],
    ['wp:infer.m.1:meta', 'queue', 'wp:{infer.m.1}:meta'],
    ['wp:infer.m.1:job_abc', 'queue', 'wp:{infer.m.1}:job_abc'],
    ['wp:infer.m.1:job_abc:lock', 'queue', 'wp:{infer.m.1}:job_abc:lock'],
    ['wp:infer.m.1:bulk:r1:3', 'queue', 'wp:{infer.m.1}:bulk:r1:3'],
    ['wp:infer.my-model.2.1-rc:prioritized', 'queue', 'wp:{infer.my-model.2.1-rc}:prioritized'],
    ['wp:deployments', 'deployments', 'wp:{deployments}'],
    ['wp:deployments:history:m', 'deployments', 'wp:{deployments}:history:m'],
    ['wp:webhooks:delivery:msg_j1_succeeded', 'webhooks', 'wp:{webhooks}:delivery:msg_j1_succeeded'],
    ['wp:webhooks:due', 'webhooks', 'wp:{webhooks}:due'],
    ['wp:webhooks:index:tenant-a:pending', 'webhooks', 'wp:{webhooks}:index:tenant-a:pending'],
    ['wp:webhooks:cursor:infer.m.1', 'webhooks', 'wp:{webhooks}:cursor:{infer.m.1}'],
    ['wp:bulk:running', 'bulk', 'wp:{bulk}:running'],
    ['wp:bulk:run:r1', 'bulk', 'wp:{bulk}:run:r1'],
    ['wp:bulk:run:r1:parts', 'bulk', 'wp:{bulk}:run:r1:parts'],
    ['wp:bulk:run:r1:lease', 'bulk', 'wp:{bulk}:run:r1:lease'],
    ['wp:canary:cursor:infer.m.1', 'canary', 'wp:canary:cursor:{infer.m.1}'],
    ['wp:canary:agg:infer.m.1:1700000000000', 'canary', 'wp:canary:agg:{infer.m.1}:1700000000000'],
  ])('%s → %s %s', (from, family, to) => {
    expect(migratedKey(P, from)).toEqual({ family, to });
  });

  it.each([
    // Already in the new layout: a second run finds nothing.
    'wp:{infer.m.1}:wait',
    'wp:{deployments}',
    'wp:{webhooks}:due',
    'wp:{webhooks}:cursor:{infer.m.1}',
    'wp:canary:agg:{infer.m.1}:1700000000000',
    'wp:{bulk}:run:r1',
    // Keys whose names did not change.
    'wp:webhooks:secret:tenant-a',
    'wp:bulk:capacity:m',
    'wp:job:job_abc',
    'wp:workers:w1',
    'wp:scaler:leader',
    'wp:arrivals:m:20240101',
    'wp:canary:events:m',
    'wp:canary:breach:m:1',
    'wp:result:m:1:abc',
    'wp:deploymentsx',
    // Not a BullMQ key of a queue (no type part), not a queue name, another prefix.
    'wp:infer.m.1',
    'wp:infer.m:wait',
    'wp:infer.m.1}:wait',
    'wpx:infer.m.1:wait',
    'other:deployments',
  ])('%s keeps its name', (key) => {
    expect(migratedKey(P, key)).toBeNull();
  });

  it('maps every key of a queue by the same prefix rename', () => {
    const suffixes = ['wait', 'paused', 'delayed', 'completed', 'failed', 'id', 'pc', 'marker', 'stalled-check', 'limiter', 'j:logs'];
    for (const s of suffixes) expect(migratedKey(P, `${P}:infer.m.7:${s}`)?.to).toBe(`${P}:{infer.m.7}:${s}`);
  });
});

describe('migratedIndexValue', () => {
  it('tags an old queue name', () => {
    expect(migratedIndexValue('infer.m.1')).toBe('{infer.m.1}');
    expect(migratedIndexValue('infer.m.1.2')).toBe('{infer.m.1.2}');
  });

  it('leaves tombstones, new names and anything else', () => {
    expect(migratedIndexValue('{infer.m.1}')).toBeNull();
    expect(migratedIndexValue('{"id":"j1","status":"canceled"}')).toBeNull();
    expect(migratedIndexValue('something')).toBeNull();
  });
});

describe('isOldQueueName', () => {
  it('is true only for infer.<model>.<version> without braces', () => {
    expect(isOldQueueName('infer.m.1')).toBe(true);
    expect(isOldQueueName('{infer.m.1}')).toBe(false);
    expect(isOldQueueName('infer.m')).toBe(false);
    expect(isOldQueueName('jobs')).toBe(false);
  });
});

describe('liveProcessSign', () => {
  it.each([
    ['wp:workers:w1', 'worker heartbeat wp:workers:w1'],
    ['wp:scaler:leader', 'scaler leader lock wp:scaler:leader'],
    ['wp:scaler-shadow:leader', 'scaler leader lock wp:scaler-shadow:leader'],
    ['wp:infer.m.1:job_a:lock', 'old-version BullMQ job lock wp:infer.m.1:job_a:lock'],
    ['wp:bulk:run:r1:lease', 'bulk run lease wp:bulk:run:r1:lease'],
  ])('%s is a sign of a running process', (key, sign) => {
    expect(liveProcessSign(P, key)).toBe(sign);
  });

  it.each(['wp:infer.m.1:job_a', 'wp:{infer.m.1}:job_a:lock', 'wp:scaler:memory:m', 'wpx:workers:w1', 'wp:bulk:run:r1'])(
    '%s is not',
    (key) => {
      expect(liveProcessSign(P, key)).toBeNull();
    },
  );
});

describe('countByFamily', () => {
  it('counts renames per family, every family present', () => {
    expect(countByFamily([{ family: 'queue' }, { family: 'queue' }, { family: 'bulk' }])).toEqual({
      queue: 2,
      deployments: 0,
      webhooks: 0,
      bulk: 1,
      canary: 0,
    });
  });
});
