/**
 * Cold start by phase, from a real `warmpool worker` process: spawned → downloading (boot: node,
 * the TypeScript loader, connections) → loading (download: manifest and weights into the disk
 * cache, sha256-checked) → warming (load: the ONNX Runtime session) → active (warm-up: the batch
 * profile). Phase times are the worker's own state timestamps, as its log records them when
 * it enters each state (the heartbeat's `stateSince`).
 *
 * Twice: with an empty cache directory (a fresh host), then again with the file cached (a
 * warm-pool host that served this model before). The warm-cache start is compared with the
 * least work ONNX Runtime needs for the same result: one `InferenceSession.create` at the
 * thread count the worker chose, plus the warm-up's batch sizes × (1 + iterations) runs.
 */
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { ortFeeds, sessionOptions } from './raw-ort.ts';
import { type BenchContext, scopedEnv, spawnRole, waitForWorkers } from './services.ts';

export interface ColdStartPhases {
  boot: number;
  download: number;
  load: number;
  warmup: number;
  /** download + load + warm-up: what the worker itself does, boot aside. */
  ready: number;
}

export interface ColdStartResult {
  cold: ColdStartPhases;
  warm: ColdStartPhases;
  /** Session create + the same warm-up batches, in this process. */
  rawMs: number;
  threads: number;
}

export interface StateMark {
  state: WorkerState;
  at: number;
}

/** Phase durations (ms) from the time the process was spawned and its state transitions. */
export function phasesFrom(spawnedAt: number, marks: readonly StateMark[]): ColdStartPhases {
  const at = (state: WorkerState) => marks.find((m) => m.state === state)?.at ?? NaN;
  const downloading = at('downloading');
  const loading = at('loading');
  const warming = at('warming');
  const readyAts = [at('active'), at('standby')].filter(Number.isFinite);
  const ready = readyAts.length > 0 ? Math.min(...readyAts) : NaN;
  return {
    boot: downloading - spawnedAt,
    download: loading - downloading,
    load: warming - loading,
    warmup: ready - warming,
    ready: ready - downloading,
  };
}

/** A `worker state` line of the worker's pino log, as a mark; undefined for any other line. */
export function stateMarkOf(line: string): StateMark | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    const entry = JSON.parse(line) as { msg?: string; state?: WorkerState; time?: number };
    return entry.msg === 'worker state' && entry.state && typeof entry.time === 'number'
      ? { state: entry.state, at: entry.time }
      : undefined;
  } catch {
    return undefined;
  }
}

export async function measureColdStart(ctx: BenchContext, manifest: ModelManifest, label: string): Promise<ColdStartResult> {
  const cacheDir = path.join(ctx.dir, `cold-cache-${label}`);
  const cold = await startOnce(ctx, manifest, `${label}-cold`, cacheDir);
  const warm = await startOnce(ctx, manifest, `${label}-warm`, cacheDir);
  const config = loadConfig(ctx.env);
  const rawMs = await rawWarmStart(path.join(cacheDir, `${manifest.sha256}.onnx`), manifest, warm.threads, config.worker.warmupIterations);
  return { cold: cold.phases, warm: warm.phases, rawMs, threads: warm.threads };
}

async function startOnce(ctx: BenchContext, manifest: ModelManifest, label: string, cacheDir: string) {
  const { env, config } = scopedEnv(ctx, `cold-${label}`, { MODEL_CACHE_DIR: cacheDir, LOG_LEVEL: 'info' });
  const redis = createRedis(config.redisUrl);
  const marks: StateMark[] = [];
  const spawnedAt = Date.now();
  const worker = spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env, {
    onLine: (line) => {
      const mark = stateMarkOf(line);
      if (mark) marks.push(mark);
    },
  });
  try {
    const [beat] = await waitForWorkers(redis, config, manifest.name, 'active');
    // The log line of `active` is written just before its heartbeat; give stdout a moment.
    for (let i = 0; i < 50 && !marks.some((m) => m.state === 'active'); i++) await new Promise((r) => setTimeout(r, 20));
    return { phases: phasesFrom(spawnedAt, marks), threads: beat?.batchProfile?.threads ?? 0 };
  } finally {
    await worker.stop();
    await closeRedis(redis);
  }
}

/** The raw equivalent of a warm-cache start: create the session, run the warm-up batches. */
async function rawWarmStart(modelPath: string, manifest: ModelManifest, threads: number, iterations: number): Promise<number> {
  const feeds = manifest.batching.warmupBatches.map((b) => ortFeeds(manifest, b));
  const started = performance.now();
  const session = await ort.InferenceSession.create(modelPath, sessionOptions(threads));
  for (const batch of feeds) for (let i = 0; i <= iterations; i++) await session.run(batch);
  const elapsed = performance.now() - started;
  await session.release();
  return elapsed;
}
