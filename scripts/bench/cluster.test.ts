/**
 * The cluster row's arithmetic: the order the sides run in, best of each side, the row, and
 * the slot arithmetic that puts each model's queue on its own master, checked against a real
 * 3-master cluster (scripts/dev/redis-cluster.ts), which owns the slots.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RedisClusterHandle, startRedisCluster } from '../dev/redis-cluster.ts';
import { ensureRedisServer } from '../dev/redis-server.ts';
import { bestOf, CLUSTER_ROW, type ClusterSample, clusterScalingRow, keySlot, shardOf, sideOrder, spreadModelNames } from './cluster.ts';

describe('sideOrder', () => {
  it('alternates the sides, reversing every other round', () => {
    expect(sideOrder(1)).toEqual([1, 3]);
    expect(sideOrder(2)).toEqual([1, 3, 3, 1]);
    expect(sideOrder(3)).toEqual([1, 3, 3, 1, 1, 3]);
  });
});

describe('bestOf', () => {
  const samples: ClusterSample[] = [
    { masters: 1, jobsPerS: 900 },
    { masters: 3, jobsPerS: 1500 },
    { masters: 3, jobsPerS: 1700 },
    { masters: 1, jobsPerS: Number.NaN },
  ];

  it('keeps the fastest run of each side, skipping runs with no figure', () => {
    expect(bestOf(samples, 1)).toBe(900);
    expect(bestOf(samples, 3)).toBe(1700);
  });

  it('is NaN for a side that never ran', () => {
    expect(bestOf(samples, 5)).toBeNaN();
  });
});

describe('clusterScalingRow', () => {
  const options = { models: 3, jobs: 300, concurrency: 48 };

  it('divides the best 3-master rate by the best 1-master rate and says how it was measured', () => {
    const row = clusterScalingRow(
      [
        { masters: 1, jobsPerS: 1000 },
        { masters: 3, jobsPerS: 1800 },
        { masters: 3, jobsPerS: 1500 },
        { masters: 1, jobsPerS: 1200 },
      ],
      options,
      2,
    );
    expect(row).toMatchObject({ name: CLUSTER_ROW, unit: 'x' });
    expect(row.value).toBeCloseTo(1.5, 10);
    expect(row.detail).toContain('3 models × 300 single-row jobs, 48 in flight per model');
    expect(row.detail).toContain('3 masters 1,800 vs 1 master 1,200 jobs/s, best of 2 runs per side');
    expect(row.detail).toContain('1:1,000, 3:1,800, 3:1,500, 1:1,200');
    expect(row.detail).toContain('2 CPUs');
  });

  it('has no value when a side has no figure', () => {
    expect(clusterScalingRow([{ masters: 1, jobsPerS: 1000 }], options, 2).value).toBeNaN();
  });
});

describe('keySlot', () => {
  it('matches the slots Redis documents', () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('somekey')).toBe(11058);
  });
});

describe('slots on a real 3-master cluster', () => {
  let dir: string;
  let cluster: RedisClusterHandle;
  const clients: Redis[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-bench-cluster-test-'));
    cluster = await startRedisCluster({ binary: await ensureRedisServer({ install: 'never' }), dir, masters: 3 });
    for (const n of cluster.nodes) clients.push(new Redis({ host: n.host, port: n.port, maxRetriesPerRequest: 1 }));
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await cluster?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('computes the slot of a hash tag as the cluster does', async () => {
    for (const tag of ['infer.demo.1', 'infer.cluster-m0.1', 'infer.mlp-1024.7', 'x']) {
      expect(keySlot(tag)).toBe(await clients[0]?.call('CLUSTER', 'KEYSLOT', tag));
    }
  });

  it('names the master that owns a slot as the cluster does, at the ranges edges too', async () => {
    for (const slot of [0, 5460, 5461, 10922, 10923, 16383, keySlot('foo')]) {
      expect(shardOf(slot, 3)).toBe(await cluster.nodeOfSlot(slot));
    }
  });

  it('spreads the models over distinct masters, round robin', async () => {
    const names = spreadModelNames(4, 3);
    const owners = await Promise.all(names.map((name) => cluster.nodeOfSlot(keySlot(`infer.${name}.1`))));
    expect(owners).toEqual([0, 1, 2, 0]);
    expect(new Set(names).size).toBe(4);
  });
});
