/**
 * Redis Cluster scaling: end-to-end jobs/s with several models on a 1-master cluster vs a
 * 3-master one, measured side by side in this run (the ratio is the figure; absolute rates on a
 * shared machine are noise). Each model's queue is its own hash tag (infra/contracts/job.ts), so on 3
 * masters the models' queues spread over the shards; on 1 they all share one redis-server.
 *
 * End to end here = the API's job queue (infra/queue/job-queue.ts: index key, BullMQ add,
 * QueueEvents wake-up) → one `warmpool worker` process per model (micro-batched forward
 * passes) → the result read back, with `concurrency` jobs in flight per model. HTTP is left
 * out: it is the same on both sides and is not what sharding changes.
 *
 * The sides run alternately, 1,3,3,1 per two rounds, each on a fresh cluster, and each side
 * keeps its best run: a slow spell of the machine then hurts both sides alike rather than one.
 * On a machine with few cores every process shares them, so the ratio shows the Redis tier's
 * share of the cost, not what separate hosts per shard would give; hence no target.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { queueName } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { type BullJobQueue, createBullJobQueue } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { hashTag } from '../../infra/redis/keys.ts';
import { startRedisCluster } from '../dev/redis-cluster.ts';
import { ensureRedisServer } from '../dev/redis-server.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { benchRequest } from './bench-models.ts';
import type { BenchRow } from './report.ts';
import { type BenchContext, type ChildRole, scopedEnv, spawnRole, waitForWorkers } from './services.ts';
import { ratePerS } from './stats.ts';

export const CLUSTER_ROW = 'cluster_3_vs_1_shard';
const SLOTS = 16384;
const FEATURES = 16;

export interface ClusterScalingOptions {
  models: number;
  /** Single-row jobs per model per run. */
  jobs: number;
  /** Jobs each model keeps in flight. */
  concurrency: number;
  /** Each round runs both sides once; default 2. */
  rounds?: number;
}

export interface ClusterSample {
  masters: number;
  jobsPerS: number;
}

/** Master counts in run order: 1,3 then 3,1, repeated, so a drift over the run weighs both sides alike. */
export function sideOrder(rounds: number): number[] {
  return Array.from({ length: rounds }, (_, r) => (r % 2 === 0 ? [1, 3] : [3, 1])).flat();
}

/** The best jobs/s each master count reached (NaN for a side with no sample). */
export function bestOf(samples: readonly ClusterSample[], masters: number): number {
  const rates = samples.filter((s) => s.masters === masters && Number.isFinite(s.jobsPerS)).map((s) => s.jobsPerS);
  return rates.length > 0 ? Math.max(...rates) : NaN;
}

/** CRC16/XMODEM, the hash Redis Cluster maps keys to slots with (slot = crc16 mod 16384). */
export function keySlot(hashTag: string): number {
  let crc = 0;
  for (const byte of Buffer.from(hashTag)) {
    crc ^= byte << 8;
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
  }
  return crc % SLOTS;
}

/** Which master holds `slot` when the slots are split evenly in order, as scripts/dev/redis-cluster.ts does. */
export function shardOf(slot: number, masters: number): number {
  return Math.floor(((slot + 1) * masters - 1) / SLOTS);
}

/**
 * `count` model names whose queues (`{infer.<name>.<version>}`) land on distinct masters of a
 * `masters`-master cluster, round robin: with names taken as they come, three models share a
 * master more often than not, and the 3-master side would measure fewer shards than it has.
 */
export function spreadModelNames(count: number, masters: number, version = '1'): string[] {
  const names: string[] = [];
  for (let i = 0; names.length < count; i++) {
    if (i > 10_000) throw new Error(`no model names spread over ${masters} masters`);
    const name = `cluster-m${i}`;
    if (shardOf(keySlot(hashTag(queueName(name, version)) as string), masters) === names.length % masters) names.push(name);
  }
  return names;
}

const f0 = (v: number) => (Number.isFinite(v) ? Math.round(v).toLocaleString('en-US') : 'n/a');

/** The row: 3 masters' best jobs/s ÷ 1 master's, both in the detail with every run's figure. */
export function clusterScalingRow(samples: readonly ClusterSample[], options: ClusterScalingOptions, cpus: number): BenchRow {
  const [one, three] = [bestOf(samples, 1), bestOf(samples, 3)];
  const perSide = samples.filter((s) => s.masters === 1).length;
  const runs = samples.map((s) => `${s.masters}:${f0(s.jobsPerS)}`).join(', ');
  return {
    name: CLUSTER_ROW,
    value: three / one,
    unit: 'x',
    detail:
      `${options.models} models × ${options.jobs} single-row jobs, ${options.concurrency} in flight per model, job queue → worker process per model → result: ` +
      `3 masters ${f0(three)} vs 1 master ${f0(one)} jobs/s, best of ${perSide} runs per side run alternately (masters:jobs/s ${runs}); ` +
      `informational, no target: ${cpus} CPUs shared by every process`,
  };
}

/** Both sides, alternately; throws when a run fails (the suite reports the row as n/a). */
export async function measureClusterScaling(ctx: BenchContext, options: ClusterScalingOptions): Promise<BenchRow[]> {
  const binary = await ensureRedisServer({ install: 'never' });
  const models = await publishClusterModels(ctx, options.models);
  const dir = mkdtempSync(path.join(ctx.dir, 'cluster-'));
  const samples: ClusterSample[] = [];
  try {
    for (const [run, masters] of sideOrder(options.rounds ?? 2).entries()) {
      const cluster = await startRedisCluster({ binary, dir: path.join(dir, `run-${run}`), masters });
      try {
        const jobsPerS = await driveModels(ctx, cluster.url, models, options, `cluster${masters}`);
        samples.push({ masters, jobsPerS });
        ctx.out(`  ${masters} master(s): ${f0(jobsPerS)} jobs/s`);
      } finally {
        await cluster.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return [clusterScalingRow(samples, options, os.availableParallelism())];
}

/** Small MLPs, one per model, under names that spread over 3 masters. */
async function publishClusterModels(ctx: BenchContext, count: number): Promise<ModelManifest[]> {
  const names = spreadModelNames(count, 3);
  return Promise.all(
    names.map((name, i) =>
      ctx.registry.publish({
        name,
        version: '1',
        bytes: buildMlpModel({ features: FEATURES, seed: i + 1 }),
        maxBatch: 64,
        overwrite: true,
      }),
    ),
  );
}

/** One worker process per model on the cluster at `url`; jobs/s over every model's jobs, first submit to last result. */
async function driveModels(
  ctx: BenchContext,
  url: string,
  models: readonly ModelManifest[],
  options: ClusterScalingOptions,
  label: string,
): Promise<number> {
  const { env, config } = scopedEnv(ctx, label, { REDIS_URL: url, WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '500' });
  const redis = createRedis(config.redisUrl);
  const queue = createBullJobQueue({ connection: config.redisUrl, prefix: config.queuePrefix, retentionS: 600, attempts: 1 });
  const workers: ChildRole[] = [];
  try {
    for (const m of models) workers.push(spawnRole(['worker', '--model', m.name, '--version', m.version], env));
    for (const m of models) await waitForWorkers(redis, config, m.name, 'active');
    // Untimed: JIT, QueueEvents streams and the workers' first batches.
    await Promise.all(models.map((m) => drive(queue, m, 0, options.concurrency, options.concurrency)));
    const started = performance.now();
    await Promise.all(models.map((m) => drive(queue, m, options.concurrency, options.jobs, options.concurrency)));
    return ratePerS(models.length * options.jobs, started, performance.now());
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
    await queue.close();
    await closeRedis(redis);
  }
}

/** Keeps `concurrency` jobs of the model in flight until `count` (seeds from `first` on) have succeeded. */
async function drive(queue: BullJobQueue, model: ModelManifest, first: number, count: number, concurrency: number): Promise<void> {
  let next = 0;
  const lane = async () => {
    for (let i = next++; i < count; i = next++) {
      const seed = first + i;
      const jobId = `${model.name}-${seed}`;
      await queue.enqueue(benchRequest(model, 1, seed, Date.now()), { priority: 'normal', jobId });
      const view = await queue.waitFor(jobId, 60_000);
      if (view.status !== 'succeeded') throw new Error(`job ${jobId} ended ${view.status}: ${view.error?.message ?? ''}`);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}
