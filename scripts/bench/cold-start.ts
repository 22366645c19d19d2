/**
 * Cold start by phase, from a real `warmpool worker` process: spawned → downloading (boot: node,
 * the compiled CLI and the worker's modules, Redis and the control channel) → loading (download:
 * manifest and weights into the disk cache, sha256-checked) → warming (load: the ONNX Runtime
 * session) → active (warm-up: the batch profile, or one run where a profile was kept beside the
 * cached model). Phase times are the worker's own state timestamps, as its log records them when
 * it enters each state (the heartbeat's `stateSince`).
 *
 * Twice: with an empty cache directory (a fresh host), then again with the file cached (a
 * warm-pool host that served this model before). The warm-cache start is compared with the
 * least work ONNX Runtime needs for the same result in a process of its own, as a restarted
 * worker is: import onnxruntime-node, one `InferenceSession.create` at the thread count the
 * worker chose, and the warm-up's batch sizes × (1 + passes) runs (rawWarmStart; passes: the bounded
 * warm-up's minimum a size, MIN_SAMPLES, or WARMUP_ITERATIONS with WARMUP_BUDGET_MS=0).
 *
 * The worker runs from dist/ (bin/warmpool.mjs); a stale dist/ is built before the first start,
 * so no phase below includes the build, and a tree that does not compile fails the measurement
 * instead of timing the TypeScript loader.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { loadConfig } from '../../infra/kernel/config.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { toModelTensor } from '../../worker/engine/planned-engine.ts';
import { representativeInputs } from '../../worker/representative-inputs.ts';
import { MIN_SAMPLES } from '../../worker/warmup-bound.ts';
import { buildDist, ROOT, staleReason } from '../build.mjs';
import { sessionOptions } from './raw-ort.ts';
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
  /** Import onnxruntime-node + session create + the same warm-up batches, in a fresh process. */
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
  if (staleReason()) await buildDist();
  const cacheDir = path.join(ctx.dir, `cold-cache-${label}`);
  const cold = await startOnce(ctx, manifest, `${label}-cold`, cacheDir);
  const warm = await startOnce(ctx, manifest, `${label}-warm`, cacheDir);
  const config = loadConfig(ctx.env);
  // The least the worker's warm-up could do: MIN_SAMPLES timed passes a size under its time bound
  // (it stops a steady size there), every one of WARMUP_ITERATIONS without it.
  const passes = config.worker.warmupBudgetMs > 0 ? MIN_SAMPLES : config.worker.warmupIterations;
  const rawMs = await rawWarmStart(path.join(cacheDir, `${manifest.sha256}.onnx`), manifest, warm.threads, passes);
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

/**
 * The raw equivalent of a warm-cache start: a fresh `node` that imports onnxruntime-node,
 * creates the session and runs the warm-up batches, timed inside it from before the import to
 * after the last run (node's own start is left out, as the warm start's `ready` leaves out the
 * worker's boot). The inputs are allocated before the clock starts and wrapped after the import.
 */
export async function rawWarmStart(modelPath: string, manifest: ModelManifest, threads: number, iterations: number): Promise<number> {
  const batches = manifest.batching.warmupBatches.map((rows) =>
    Object.entries(representativeInputs(manifest, rows)).map(([name, t]) => {
      const { dims } = toModelTensor(name, t, manifest.inputs.find((s) => s.name === name)?.batchAxis);
      return { name, type: t.type, dims };
    }),
  );
  const job = JSON.stringify({ modelPath, options: sessionOptions(threads), batches, iterations });
  const child = spawn(process.execPath, ['--input-type=module', '-e', RAW_START, job], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => {
    out += d.toString();
  });
  child.stderr.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  const ms = Number(out.trim());
  if (code !== 0 || !Number.isFinite(ms)) throw new Error(`raw warm start failed (exit ${code}): ${err.trim() || out.trim()}`);
  return ms;
}

/** The fresh process of rawWarmStart: prints the milliseconds it took. */
const RAW_START = `
const { modelPath, options, batches, iterations } = JSON.parse(process.argv[1]);
const arrays = { float32: Float32Array, float64: Float64Array, float16: Uint16Array, bool: Uint8Array, int8: Int8Array,
  uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array,
  int64: BigInt64Array, uint64: BigUint64Array };
const data = batches.map((inputs) => inputs.map(({ type, dims }) => {
  const n = dims.reduce((a, b) => a * b, 1);
  return type === 'string' ? Array.from({ length: n }, () => 'warmup') : new arrays[type](n);
}));
const started = performance.now();
const ort = await import('onnxruntime-node');
const session = await ort.InferenceSession.create(modelPath, options);
for (const [b, inputs] of batches.entries()) {
  const feeds = Object.fromEntries(inputs.map(({ name, type, dims }, i) => [name, new ort.Tensor(type, data[b][i], dims)]));
  for (let i = 0; i <= iterations; i++) await session.run(feeds);
}
process.stdout.write(String(performance.now() - started));
await session.release();
`;
