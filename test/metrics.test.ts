// Cross-process metrics through a real Redis: workers publish snapshots, the API reads and merges.
import { Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, deleteMany, type RedisClient, scanKeys } from '../infra/redis/client.ts';
import { metricsKey } from '../infra/redis/keys.ts';
import {
  createApiMetrics,
  createWorkerMetrics,
  publishMetricsSnapshot,
  readMetricsSnapshots,
  renderClusterMetrics,
} from '../infra/telemetry/metrics.ts';
import { testServices, uniqueId } from './support/services.ts';

describe('metrics snapshots in Redis', () => {
  let redis: RedisClient;
  let prefix: string;

  beforeAll(() => {
    redis = createRedis(testServices().redisUrl);
    prefix = uniqueId('metrics');
  });

  afterAll(async () => {
    for await (const keys of scanKeys(redis, `${prefix}*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  async function publishWorker(workerId: string, rows: number[], keyPrefix = prefix): Promise<void> {
    const registry = new Registry();
    const labels = { model: 'mlp', version: '1' };
    const m = createWorkerMetrics(registry, labels);
    for (const r of rows) m.batchRows.observe(labels, r);
    m.setState('active');
    await publishMetricsSnapshot(redis, metricsKey(keyPrefix, workerId), registry, 60_000);
  }

  it('publishes with a TTL, reads every worker of the prefix by SCAN, and merges with the API', async () => {
    // More workers than one SCAN page holds, so the cursor loop is exercised.
    const workers = Array.from({ length: 250 }, (_, i) => `w${i}`);
    for (const id of workers) await publishWorker(id, [8]);
    await publishWorker('elsewhere', [1024], `${prefix}-other`);
    await redis.set(metricsKey(prefix, 'corrupt'), '{not json', 'PX', 60_000);
    await redis.set(`${prefix}:job:job_x`, 'not a metrics key', 'PX', 60_000);

    const ttl = await redis.pttl(metricsKey(prefix, 'w0'));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(60_000);

    const snapshots = await readMetricsSnapshots(redis, prefix);
    expect(snapshots).toHaveLength(250);

    const api = new Registry();
    createApiMetrics(api).httpRequests.inc({ route: '/metrics', method: 'GET', status: '200' });
    const text = await renderClusterMetrics(api, snapshots);
    expect(text).toContain('warmpool_batch_rows_count{model="mlp",version="1"} 250');
    expect(text).toContain('warmpool_batch_rows_sum{model="mlp",version="1"} 2000');
    expect(text).toContain('warmpool_worker_state{model="mlp",version="1",state="active"} 250');
    expect(text).toContain('warmpool_http_requests_total{route="/metrics",method="GET",status="200"} 1');
  });

  it('reads nothing for a prefix no worker has published under', async () => {
    expect(await readMetricsSnapshots(redis, `${prefix}-empty`)).toEqual([]);
  });

  it('replaces a worker snapshot on each publish', async () => {
    const p = `${prefix}-replace`;
    await publishWorker('w', [2], p);
    await publishWorker('w', [2, 4], p);
    const text = await renderClusterMetrics(new Registry(), await readMetricsSnapshots(redis, p));
    expect(text).toContain('warmpool_batch_rows_count{model="mlp",version="1"} 2');
  });
});
