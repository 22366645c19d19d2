/**
 * warmpool on a Redis Cluster (a local 3-master cluster this file starts, beside the suite's
 * single node): one queue's keys in one slot, different queues on different masters, the
 * multi-key stores (deployments, webhook deliveries) and cross-shard SCANs working, and the
 * pipeline end to end with three API servers (two of them `warmpool api` processes) and two
 * worker processes per model, as on several hosts.
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeliveryStore } from '../api/webhooks/delivery-store.ts';
import type { QueuedRequest } from '../infra/contracts/entry.ts';
import { queueName } from '../infra/contracts/job.ts';
import { createDeploymentStore } from '../infra/deployments/deployment-store.ts';
import { listHeartbeats } from '../infra/fleet/worker-states.ts';
import { createBullJobQueue } from '../infra/queue/index.ts';
import { closeRedis, createRedis, isCluster, masterNodes, scanKeys } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { freePort } from '../scripts/dev/free-port.ts';
import { type RedisClusterHandle, startRedisCluster } from '../scripts/dev/redis-cluster.ts';
import { ensureRedisServer } from '../scripts/dev/redis-server.ts';
import { stopChild } from '../scripts/dev/stop-child.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { uniqueId } from './support/services.ts';
import { startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 8;
const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));

let dir: string;
let cluster: RedisClusterHandle;
let redis: Cluster;

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-cluster-test-'));
  cluster = await startRedisCluster({ binary: await ensureRedisServer({ install: 'never' }), dir });
  const client = createRedis(cluster.url);
  if (!isCluster(client)) throw new Error('a redis+cluster:// URL must give a Cluster client');
  redis = client;
}, 60_000);

afterAll(async () => {
  if (redis) await closeRedis(redis);
  await cluster?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** Which master holds each key: the address of the one whose SCAN returns it. */
async function ownerOf(pattern: string): Promise<Map<string, string>> {
  const owners = new Map<string, string>();
  for (const node of await masterNodes(redis)) {
    const address = `${(node as Redis).options.host}:${(node as Redis).options.port}`;
    for await (const keys of scanKeys(node, pattern)) for (const key of keys) owners.set(key, address);
  }
  return owners;
}

async function slotOf(key: string): Promise<number> {
  return Number(await redis.call('CLUSTER', 'KEYSLOT', key));
}

describe('keys on a Redis Cluster', () => {
  it('puts every key of one queue in one slot, and spreads different models over the masters', async () => {
    const prefix = uniqueId('slots');
    const models = Array.from({ length: 8 }, (_, i) => `model${i}`);
    const queues = models.map((m) => new Queue<{ model: string }>(queueName(m, '1'), { connection: redis, prefix }));
    try {
      for (const q of queues) {
        await q.add('infer', { model: 'x' }, { jobId: 'a' });
        await q.add('infer', { model: 'x' }, { jobId: 'b', priority: 3 });
        await q.add('infer', { model: 'x' }, { jobId: 'c', delay: 60_000 });
      }
      const owners = await ownerOf(`${prefix}:*`);
      const mastersUsed = new Set<string>();
      for (const q of queues) {
        const keys = [...owners.keys()].filter((k) => k.startsWith(`${prefix}:${q.name}:`));
        // wait, prioritized, delayed, meta, id, events, the jobs' hashes…
        expect(keys.length).toBeGreaterThanOrEqual(6);
        const slots = new Set(await Promise.all(keys.map(slotOf)));
        expect(slots.size).toBe(1);
        const hosts = new Set(keys.map((k) => owners.get(k)));
        expect(hosts.size).toBe(1);
        mastersUsed.add([...hosts][0] as string);
      }
      // Eight hash tags over three masters: CRC16 puts them on more than one (deterministically).
      expect(mastersUsed.size).toBeGreaterThan(1);
    } finally {
      for (const q of queues) await q.obliterate({ force: true }).catch(() => undefined);
      await Promise.all(queues.map((q) => q.close()));
    }
  });

  it('runs the deployment and webhook delivery scripts, and lists heartbeats from every master', async () => {
    const prefix = uniqueId('stores');
    const deployments = createDeploymentStore(redis, prefix);
    await deployments.put({ model: 'ranker', version: '1', min: 0, max: 2, standby: 0 });
    await deployments.put({ model: 'ranker', version: '2', min: 0, max: 2, standby: 0 });
    expect((await deployments.get('ranker'))?.version).toBe('2');
    expect((await deployments.history('ranker')).map((d) => d.version)).toEqual(['2', '1']);

    const store = createDeliveryStore(redis, prefix);
    const delivery = { tenant: 'tenant-a', jobId: 'j', event: 'job.succeeded' as const, url: 'https://example.com/h', payload: '{}' };
    for (const id of ['d1', 'd2', 'd3']) expect(await store.enqueue({ ...delivery, id }, 0)).toBe(true);
    const claimed = await store.claimDue(0, 10);
    expect(claimed.map((d) => d.id).sort()).toEqual(['d1', 'd2', 'd3']);
    for (const c of claimed) {
      expect(await store.recordAttempt(c, { at: 1, status: 200, durationMs: 1 }, { state: 'succeeded' }, 2)).toBe(true);
    }
    expect((await store.list('tenant-a', 'succeeded', 10, 3)).map((d) => d.id).sort()).toEqual(['d1', 'd2', 'd3']);

    // Thirty workers' heartbeats: their keys lie on every master, and all are listed.
    const ids = Array.from({ length: 30 }, (_, i) => `w${i}`);
    for (const id of ids) await redis.set(workerKey(prefix, id), JSON.stringify({ id, model: 'ranker' }), 'PX', 60_000);
    const owners = await ownerOf(workerKey(prefix, '*'));
    expect(new Set(owners.values()).size).toBe(3);
    const beats = await listHeartbeats(redis, prefix);
    expect(beats.map((b) => b.id).sort()).toEqual([...ids].sort());
  });

  it('cancels a queued job (tombstone beside its queue) and finds it by id afterwards', async () => {
    const prefix = uniqueId('cancel');
    const jobs = createBullJobQueue({ connection: cluster.url, prefix, retentionS: 600, attempts: 1 });
    try {
      const data: QueuedRequest = {
        tenant: 't',
        model: 'm',
        version: '1',
        rows: 1,
        inputs: [{ name: 'x', shape: [1, 1], datatype: 'FP32', data: Float32Array.of(1) }],
        submittedAt: Date.now(),
      };
      await jobs.enqueue(data, { priority: 'normal', jobId: 'job-1' });
      expect((await jobs.get('job-1'))?.status).toBe('queued');
      expect((await jobs.cancel('job-1'))?.status).toBe('canceled');
      expect((await jobs.get('job-1'))?.status).toBe('canceled');
      expect(await jobs.depth('m', '1')).toBe(0);

      // Requests sharing one queue entry: their index keys lie on several masters, the entry on one.
      const ids = Array.from({ length: 12 }, (_, i) => `job-s${i}`);
      await Promise.all(ids.map((jobId) => jobs.enqueue(data, { priority: 'normal', jobId })));
      const locations = await Promise.all(ids.map((id) => redis.get(`${prefix}:job:${id}`)));
      expect(new Set(locations).size).toBe(1);
      expect(new Set((await ownerOf(`${prefix}:job:job-s*`)).values()).size).toBeGreaterThan(1);
      expect((await jobs.cancel('job-s3'))?.status).toBe('canceled');
      expect((await jobs.get('job-s3'))?.status).toBe('canceled');
      expect((await jobs.get('job-s4'))?.status).toBe('queued');
    } finally {
      await jobs.close();
    }
  });
});

describe('the pipeline on a Redis Cluster: 3 API servers (2 `warmpool api` processes), 2 worker processes × 2 models', () => {
  let stack: TestStack;
  const apis: ChildProcess[] = [];
  const apiUrls: string[] = [];

  beforeAll(async () => {
    stack = await startStack({ REDIS_URL: cluster.url, BATCH_MAX_WAIT_MS: '10', WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300' });
    // Two more API servers as separate processes, as on other hosts: Redis connections, queues
    // and QueueEvents of their own, sharing only the cluster with the in-process one.
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const child = spawn(process.execPath, [BIN, 'api'], {
        env: { ...stack.env, PORT: String(port), HOST: '127.0.0.1' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      child.stderr?.on('data', (chunk: Buffer) => process.stderr.write(`[api-${i + 2}] ${chunk}`));
      apis.push(child);
      apiUrls.push(`http://127.0.0.1:${port}`);
    }
    for (const model of ['alpha', 'beta']) {
      await stack.registry.publish({
        name: model,
        version: '1',
        bytes: buildMlpModel({ features: F, hidden: 8, layers: 1 }),
        maxBatch: 16,
      });
      await stack.deployments.put({ model, version: '1', min: 2, max: 2, standby: 0 });
      await stack.startWorker(model, '1');
      await stack.startWorker(model, '1');
    }
    await stack.waitForWorkers('alpha', 'active', 2, 90_000);
    await stack.waitForWorkers('beta', 'active', 2, 90_000);
    for (const url of apiUrls) await waitForReady(url);
  }, 150_000);

  afterAll(async () => {
    await Promise.all(apis.map((child) => stopChild(child)));
    await stack?.close();
  });

  async function waitForReady(url: string): Promise<void> {
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      const ok = await fetch(`${url}/v2/health/ready`).then(
        (r) => r.ok,
        () => false,
      );
      if (ok) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`the API process at ${url} did not become ready`);
  }

  function submit(base: string, model: string, i: number): Promise<string> {
    const data = Array.from({ length: F }, (_, k) => Math.sin(i + k));
    return fetch(`${base}/v1/models/${model}/jobs`, {
      method: 'POST',
      headers: { authorization: 'Bearer key-aaaaaaaaaaaaaaaa', 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data }] }),
    }).then(async (res) => {
      if (res.status !== 202) throw new Error(`submit answered ${res.status}: ${await res.text()}`);
      return ((await res.json()) as { id: string }).id;
    });
  }

  it('runs jobs submitted through any API to success, each readable through the others', async () => {
    const bases = [stack.api.url, ...apiUrls];
    const submitted = await Promise.all(
      Array.from({ length: 60 }, async (_, i) => {
        const model = i % 2 === 0 ? 'alpha' : 'beta';
        return {
          model,
          id: await submit(bases[Math.floor(i / 2) % bases.length] as string, model, i),
          via: Math.floor(i / 2) % bases.length,
        };
      }),
    );
    const finished = await Promise.all(submitted.map(({ id }) => waitForJob(stack, id)));
    expect(finished.map((j) => j.status)).toEqual(submitted.map(() => 'succeeded'));
    expect(finished.map((j) => j.model)).toEqual(submitted.map((s) => s.model));
    // Each API process reads, from the same cluster, the jobs another one accepted.
    for (const [n, base] of bases.entries()) {
      const other = submitted.find((s) => s.via !== n) as (typeof submitted)[number];
      const res = await fetch(`${base}/v1/jobs/${other.id}`, { headers: { authorization: 'Bearer key-aaaaaaaaaaaaaaaa' } });
      expect(((await res.json()) as { status: string; model: string }).status).toBe('succeeded');
    }
    // Every worker is listed from whichever shard holds its heartbeat.
    const beats = await listHeartbeats(redis, stack.config.queuePrefix);
    expect(beats.filter((b) => b.model === 'alpha' && b.state === 'active')).toHaveLength(2);
    expect(beats.filter((b) => b.model === 'beta' && b.state === 'active')).toHaveLength(2);
    // The two models' queues live in different slots.
    expect(await slotOf(`${stack.config.queuePrefix}:${queueName('alpha', '1')}:wait`)).not.toBe(
      await slotOf(`${stack.config.queuePrefix}:${queueName('beta', '1')}:wait`),
    );
  }, 120_000);
});
