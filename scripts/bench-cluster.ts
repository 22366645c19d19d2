/**
 * Redis Cluster scaling: end-to-end jobs/s with several models on a 1-master cluster vs a
 * 3-master one, measured side by side in this run (the ratio is the figure; absolute rates on a
 * shared machine are noise). Each model's queue is its own hash tag (job-contract.ts), so on 3
 * masters the models' queues spread over the shards; on 1 they all share one redis-server.
 *
 *   node --import tsx scripts/bench-cluster.ts [--models 3] [--jobs 600] [--concurrency 48] [--json FILE]
 *
 * End to end here = the API's job queue (infra/bullmq-job-queue.ts: index key, BullMQ add,
 * QueueEvents wake-up) → one `warmpool worker` process per model (download, warm-up, micro-
 * batched forward passes) → the result read back, with `concurrency` jobs in flight per model.
 * HTTP is left out: it is the same on both sides and is not what sharding changes.
 * On a machine with few cores every process shares them, so the ratio shows the Redis tier's
 * share of the cost, not what separate hosts per shard would give.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createBullJobQueue } from '../infra/bullmq-job-queue.ts';
import { loadConfig } from '../infra/config.ts';
import { createDeploymentStore } from '../infra/deployments.ts';
import { startRedisCluster } from '../infra/dev/redis-cluster.ts';
import { ensureRedisServer } from '../infra/dev/redis-server.ts';
import { startS3Server } from '../infra/dev/s3-server.ts';
import type { JobData } from '../infra/job-contract.ts';
import { closeRedis, createRedis } from '../infra/redis.ts';
import { createModelRegistry } from '../infra/registry.ts';
import { createS3ObjectStore } from '../infra/s3-object-store.ts';
import { listHeartbeats } from '../infra/worker-states.ts';
import { buildMlpModel } from './models.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const FEATURES = 16;

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      models: { type: 'string', default: '3' },
      jobs: { type: 'string', default: '600' },
      concurrency: { type: 'string', default: '48' },
      json: { type: 'string' },
    },
  });
  const models = Array.from({ length: Number(values.models) }, (_, i) => `m${i}`);
  const jobs = Number(values.jobs);
  const concurrency = Number(values.concurrency);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-bench-cluster-'));
  const binary = await ensureRedisServer({ install: 'never' });
  const s3 = await startS3Server({ directory: path.join(dir, 's3'), buckets: ['warmpool'] });
  const rows: Array<{ name: string; value: number; unit: string; detail: string }> = [];
  try {
    const rates: Record<number, number> = {};
    for (const masters of [1, 3]) {
      const cluster = await startRedisCluster({ binary, dir: path.join(dir, `cluster-${masters}`), masters });
      try {
        rates[masters] = await measure({ url: cluster.url, s3, dir, models, jobs, concurrency, label: `${masters}-shard` });
      } finally {
        await cluster.close();
      }
      process.stdout.write(`${masters} shard(s): ${(rates[masters] ?? 0).toFixed(0)} jobs/s\n`);
    }
    const one = rates[1] ?? 0;
    const three = rates[3] ?? 0;
    rows.push({
      name: 'e2e_3_shards_vs_1',
      value: one > 0 ? three / one : 0,
      unit: 'ratio',
      detail: `${models.length} models × ${jobs} single-row jobs, ${concurrency} in flight per model: ${three.toFixed(0)} vs ${one.toFixed(0)} jobs/s; ${os.cpus().length} CPUs`,
    });
    for (const r of rows) process.stdout.write(`${r.name}  ${r.value.toFixed(2)} ${r.unit}  (${r.detail})\n`);
    if (values.json) {
      writeFileSync(values.json, JSON.stringify({ machine: { cpus: os.cpus().length, node: process.version }, rows }, null, 2));
    }
  } finally {
    await s3.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

interface MeasureOptions {
  url: string;
  s3: { endpoint: string; accessKeyId: string; secretAccessKey: string };
  dir: string;
  models: string[];
  jobs: number;
  concurrency: number;
  label: string;
}

/** jobs/s over every model's jobs, from the first submit to the last result. */
async function measure(o: MeasureOptions): Promise<number> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    REDIS_URL: o.url,
    QUEUE_PREFIX: `bench-${o.label}`,
    S3_ENDPOINT: o.s3.endpoint,
    S3_BUCKET: 'warmpool',
    S3_PREFIX: o.label,
    S3_FORCE_PATH_STYLE: 'true',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: o.s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: o.s3.secretAccessKey,
    MODEL_CACHE_DIR: path.join(o.dir, `cache-${o.label}`),
    LOG_LEVEL: 'warn',
    HEARTBEAT_INTERVAL_MS: '300',
    WARMUP_ITERATIONS: '1',
  };
  const config = loadConfig(env);
  const store = createS3ObjectStore(config.s3);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  const redis = createRedis(config.redisUrl);
  const deployments = createDeploymentStore(redis, config.queuePrefix);
  const queue = createBullJobQueue({ connection: config.redisUrl, prefix: config.queuePrefix, retentionS: 600, attempts: 1 });
  const children: ChildProcess[] = [];
  try {
    for (const model of o.models) {
      await registry.publish({ name: model, version: '1', bytes: buildMlpModel({ features: FEATURES }), maxBatch: 64 });
      await deployments.put({ model, version: '1', min: 1, max: 1, standby: 0 });
      children.push(
        spawn(process.execPath, [BIN, 'worker', '--model', model, '--version', '1'], { env, stdio: ['ignore', 'ignore', 'inherit'] }),
      );
    }
    process.stdout.write(`${o.label}: waiting for ${o.models.length} workers\n`);
    await waitForActive(redis, config.queuePrefix, o.models.length);
    process.stdout.write(`${o.label}: workers active, driving jobs\n`);
    const started = performance.now();
    await Promise.all(o.models.map((model) => drive(queue, model, o.jobs, o.concurrency, o.label)));
    return (o.models.length * o.jobs) / ((performance.now() - started) / 1000);
  } finally {
    await Promise.all(children.map((c) => stop(c)));
    await queue.close();
    await closeRedis(redis);
    store.close();
  }
}

/** Keeps `concurrency` jobs of the model in flight until `count` have succeeded. */
async function drive(queue: ReturnType<typeof createBullJobQueue>, model: string, count: number, concurrency: number, label: string) {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) {
      const jobId = `${label}-${model}-${i}`;
      const data: JobData = {
        tenant: 'bench',
        model,
        version: '1',
        inputs: [
          { name: 'features', shape: [1, FEATURES], datatype: 'FP32', data: Array.from({ length: FEATURES }, (_, k) => Math.sin(i + k)) },
        ],
        submittedAt: Date.now(),
      };
      await queue.enqueue(data, { priority: 'normal', jobId });
      const view = await queue.waitFor(jobId, 60_000);
      if (view.status !== 'succeeded') throw new Error(`job ${jobId} ended ${view.status}: ${view.error?.message ?? ''}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, lane));
}

async function waitForActive(redis: ReturnType<typeof createRedis>, prefix: string, count: number): Promise<void> {
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline) {
    const beats = await listHeartbeats(redis, prefix);
    if (beats.filter((b) => b.state === 'active').length >= count) return;
    const failed = beats.find((b) => b.state === 'failed');
    if (failed) throw new Error(`worker failed to start: ${failed.error ?? '?'}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('workers did not become active');
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 15_000).unref();
  });
}

await main();
