/**
 * `node --import tsx scripts/bench/chunk-handback.ts [--chunks 8,64] [--rows 200] [--worker-bin PATH]`:
 * the Redis commands a worker spends per bulk chunk, with N chunks queued at once (issue 33 row 5,
 * worker/intake.ts MAX_CHUNKS_IN_HAND). A worker holds at most two chunks; what it does with the
 * others it fetched decides the cost: the old hand-back moved each back delayed 200 ms, to be
 * fetched again, so the cost grew with the chunks queued and with the time a chunk takes; the
 * wake-up keeps one waiter and fetches nothing more, and the worker's concurrency is capped while
 * it holds chunks (without the cap it still fetched the whole queue, up to its concurrency, to
 * hand it back). Besides the counts, `fetches/chunk` (BullMQ `active` events per chunk: 1.0 is
 * each chunk taken once) and `held at most` (chunks taken and not yet ended or handed back, from
 * the events stream's order) say where they come from.
 *
 * Measured (2 shared cores, 1,000-row chunks; old = 58065a4^'s worker, in a copy of that commit):
 *   chunks queued            8: fetches  calls/chunk    64: fetches  calls/chunk
 *   200 ms hand-back            3.3       141               16.8       642
 *   wake-up, uncapped           2.4        83                4.7       135
 *   wake-up, capped             1.0        48                1.0        45
 *
 * One redis-server and S3 server of its own (so INFO commandstats counts nobody else), one model,
 * and for each N a fresh queue prefix and one `warmpool worker` process (`--worker-bin`: the
 * bin/warmpool.mjs of another checkout, e.g. a copy of an older commit, to measure its worker with
 * the same producer). N chunk jobs are added at once, straight to the model's queue (the driver's
 * own enqueue, createChunkQueue().add, at bulk priority, without the driver), each chunk one JSONL
 * object of `--rows` rows; the counts are INFO commandstats after the last chunk completed minus
 * before the first was added, less the bench's own INFO and completion polls. Commands run inside
 * Lua scripts are counted too (Redis counts them): `calls` is Redis's work, `scripts` the EVALSHA
 * and EVAL calls among them. The worker's background (heartbeats, lock renewals, its stalled-job
 * check) runs meanwhile; the idle rate before each phase is printed to read it against.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { BULK_PRIORITIES, queueName } from '../../infra/contracts/job.ts';
import type { ChunkData } from '../../infra/contracts/queue-job.ts';
import { type Config, loadConfig } from '../../infra/kernel/config.ts';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { createChunkQueue } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { createModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { startEmbeddedServices } from '../dev/embedded-services.ts';
import { stopChild } from '../dev/stop-child.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { waitForWorkers } from './services.ts';

const FEATURES = 8;
const MODEL = 'handback';
const IDLE_MS = 3000;
const POLL_MS = 100;
const THIS_BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

type Stats = Map<string, number>;

interface PhaseResult {
  chunks: number;
  seconds: number;
  /** Times a chunk was taken by the worker (moved to active), all chunks together. */
  fetches: number;
  /** The most chunks the worker held at once (running, waiting, or fetched to be handed back). */
  heldMost: number;
  calls: number;
  scripts: number;
  /** Commands per second while the worker sat idle before the phase. */
  idlePerS: number;
  top: Array<[string, number]>;
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      chunks: { type: 'string', default: '8,64' },
      rows: { type: 'string', default: '200' },
      'worker-bin': { type: 'string', default: THIS_BIN },
    },
  });
  const sizes = values.chunks.split(',').map(Number);
  const rows = Number(values.rows);
  const bin = path.resolve(values['worker-bin']);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-handback-'));
  const closers: Closer[] = [];
  const out = (line: string) => process.stdout.write(`${line}\n`);
  try {
    // Services of its own, whatever the caller's environment names: nobody else's commands counted.
    const base: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: 'warn', MODEL_CACHE_DIR: path.join(dir, 'cache') };
    for (const name of ['REDIS_URL', 'S3_ENDPOINT', 'S3_BUCKET', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) delete base[name];
    await startEmbeddedServices(base, { dir, log: () => undefined, closers });
    const config0 = loadConfig({ ...base, QUEUE_PREFIX: 'handback' });
    const store = createS3ObjectStore(config0.s3);
    closers.push(['s3-client', () => store.close()]);
    const registry = createModelRegistry({ store, prefix: config0.s3.prefix });
    const bytes = buildMlpModel({ features: FEATURES, hidden: 512, layers: 3 });
    await registry.publish({ name: MODEL, version: '1', bytes, maxBatch: 32, warmupBatches: [1, 32] });
    const redis = createRedis(config0.redisUrl);
    closers.push(['redis', () => closeRedis(redis)]);
    out(`worker: ${bin}`);
    out(`chunks of ${rows} rows, model MLP ${FEATURES}x512x3, WORKER_CONCURRENCY default (2 x maxBatch 32 = 64), one worker`);
    out('chunks  seconds  held at most  fetches/chunk  calls/chunk  scripts/chunk  idle calls/s  top commands per chunk');
    for (const n of sizes) {
      const r = await phase(base, bin, redis, store, n, rows);
      const per = (x: number) => (x / r.chunks).toFixed(1);
      const top = r.top.map(([c, k]) => `${c} ${per(k)}`).join(', ');
      out(
        `${String(r.chunks).padStart(6)}  ${r.seconds.toFixed(1).padStart(7)}  ${String(r.heldMost).padStart(12)}  ${per(r.fetches).padStart(13)}  ${per(r.calls).padStart(11)}  ${per(r.scripts).padStart(13)}  ${r.idlePerS.toFixed(1).padStart(12)}  ${top}`,
      );
    }
    return 0;
  } finally {
    await closeAll([...closers].reverse()).catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  }
}

let phases = 0;

async function phase(
  base: NodeJS.ProcessEnv,
  bin: string,
  redis: RedisClient,
  store: ReturnType<typeof createS3ObjectStore>,
  n: number,
  rows: number,
): Promise<PhaseResult> {
  const env: NodeJS.ProcessEnv = { ...base, QUEUE_PREFIX: `handback-${++phases}`, WARMUP_ITERATIONS: '1', INTRA_OP_THREADS: '1' };
  const config = loadConfig(env);
  const inputs = await writeInputs(store, config, n, rows);
  const worker = spawnWorker(bin, env);
  try {
    await waitForWorkers(redis, config, MODEL, 'active');
    const idle0 = await commandStats(redis);
    await new Promise((r) => setTimeout(r, IDLE_MS));
    const before = await commandStats(redis);
    const idleCalls = total(diff(before, idle0)) - 1;

    const queue = createChunkQueue(redis, config.queuePrefix, MODEL, '1', { attempts: 3, backoffMs: 1000, retentionS: 3600 });
    const t0 = Date.now();
    await Promise.all(inputs.map((data) => queue.add(data, BULK_PRIORITIES.bulk)));
    const completedKey = `${config.queuePrefix}:${queueName(MODEL, '1')}:completed`;
    let polls = 0;
    for (;;) {
      polls++;
      if ((await redis.zcard(completedKey)) >= n) break;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
    const seconds = (Date.now() - t0) / 1000;
    const spent = diff(await commandStats(redis), before);
    // The bench's own: one INFO (the second snapshot) and its completion polls.
    spent.set('info', (spent.get('info') ?? 0) - 1);
    spent.set('zcard', (spent.get('zcard') ?? 0) - polls);
    const failed = await redis.zcard(`${config.queuePrefix}:${queueName(MODEL, '1')}:failed`);
    if (failed > 0) throw new Error(`${failed} chunk jobs failed`);
    await queue.close();
    // After the snapshot, so not counted: how often a chunk was taken (BullMQ's `active` events).
    const events = await redis.xrange(`${config.queuePrefix}:${queueName(MODEL, '1')}:events`, '-', '+');
    const fetches = events.filter(([, f]) => f[1] === 'active').length;
    const heldMost = mostHeld(events.map(([, f]) => f));
    const top = [...spent].filter(([, k]) => k > 0).sort((a, b) => b[1] - a[1]);
    return {
      chunks: n,
      seconds,
      fetches,
      heldMost,
      calls: total(spent),
      scripts: (spent.get('evalsha') ?? 0) + (spent.get('eval') ?? 0),
      idlePerS: idleCalls / (IDLE_MS / 1000),
      top: top.slice(0, 6),
    };
  } finally {
    await stopChild(worker, { graceMs: 15_000 });
  }
}

/** One JSONL object per chunk, and the chunk job that reads it whole. */
async function writeInputs(store: ReturnType<typeof createS3ObjectStore>, config: Config, n: number, rows: number): Promise<ChunkData[]> {
  const bucket = config.s3.bucket;
  const area = `${config.queuePrefix}/bench`;
  return Promise.all(
    Array.from({ length: n }, async (_, chunk) => {
      const lines = Array.from({ length: rows }, (_, i) => {
        const id = chunk * rows + i;
        return JSON.stringify({ id, features: Array.from({ length: FEATURES }, (_, k) => Math.sin(id + k)) });
      });
      const key = `${area}/in/chunk-${chunk}.jsonl`;
      const body = new TextEncoder().encode(`${lines.join('\n')}\n`);
      await store.put(key, body);
      return {
        tenant: 'bench',
        model: MODEL,
        version: '1',
        submittedAt: Date.now(),
        bulk: {
          runId: 'bench/handback',
          chunk,
          source: { bucket, key, format: 'jsonl', start: 0, end: body.length, sizeBytes: body.length },
          output: { bucket, prefix: `${area}/out/` },
          outputFormat: 'jsonl',
          idColumn: 'id',
        },
      } satisfies ChunkData;
    }),
  );
}

function spawnWorker(bin: string, env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawn(process.execPath, [bin, 'worker', '--model', MODEL, '--version', '1'], {
    env,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return child;
}

/** From the events stream's order: taken (`active`) less completed, failed or handed back (`waiting` from active; the old hand-back: `delayed`). */
function mostHeld(events: string[][]): number {
  let held = 0;
  let most = 0;
  for (const f of events) {
    const event = f[1];
    const prev = f[f.indexOf('prev') + 1];
    if (event === 'active') most = Math.max(most, ++held);
    else if (event === 'completed' || event === 'failed' || event === 'delayed' || (event === 'waiting' && prev === 'active')) held--;
  }
  return most;
}

/** INFO commandstats: calls by command (Redis counts the commands a script runs too). */
async function commandStats(redis: RedisClient): Promise<Stats> {
  const text = await redis.info('commandstats');
  const stats: Stats = new Map();
  for (const m of text.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) stats.set(m[1] as string, Number(m[2]));
  return stats;
}

function diff(after: Stats, before: Stats): Stats {
  const d: Stats = new Map();
  for (const [c, k] of after) d.set(c, k - (before.get(c) ?? 0));
  return d;
}

const total = (s: Stats) => [...s.values()].reduce((a, b) => a + b, 0);

process.exitCode = await main();
