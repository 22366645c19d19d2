/**
 * Warm-up and the batch profile (DESIGN §6). Before a worker is ready it runs representative
 * batches at several sizes (the manifest's hints, else 1, 2, 4, …, maxBatch), records the
 * latency per batch size, and picks the batch size, and the intra-op thread count where the
 * host has a choice, with the best rows/s whose p95 stays within the latency budget; more
 * threads only when they clearly pay (MORE_THREADS_MIN_GAIN).
 *
 * Each (threads, batch) cell gets one discarded run (first runs pay for allocations and kernel
 * selection) and then `iterations` timed runs. The engine is left loaded with the chosen thread
 * count and warm at the chosen batch size.
 *
 * The measurements are kept beside the model (worker/profile-cache.ts): a later start of the same
 * model on the same host, with the same settings, loads the chosen thread count and runs the
 * chosen batch once (so the session is hot) instead of measuring again. The choice itself is
 * made again from the kept measurements, so a changed latency budget still applies.
 */

import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { datatypeToDtype, elementCount, encodeHalf } from './engine/tensor-codec.ts';
import { keepProfile, profileFileFor, profileKey, readKeptProfile } from './profile-cache.ts';

export interface BatchProfileEntry {
  batch: number;
  p50Ms: number;
  p95Ms: number;
  rowsPerS: number;
}

export interface BatchProfile {
  /** Intra-op threads of the chosen configuration (0 = ONNX Runtime's default). */
  threads: number;
  chosenBatch: number;
  /** Rows/s at the chosen (threads, batch). */
  rowsPerS: number;
  /** The chosen thread count's entries, one per batch size. */
  entries: BatchProfileEntry[];
  /** Every thread count tried, with its entries. */
  candidates: Array<{ threads: number; entries: BatchProfileEntry[] }>;
  /** Epoch ms, from the clock: when the measurements were taken (a start that reused them keeps it). */
  measuredAt: number;
  /** True when this start reused measurements kept by an earlier one instead of measuring. */
  reused?: boolean;
}

export type WarmupProgress =
  | { type: 'load'; threads: number; loadMs: number }
  | { type: 'measured'; threads: number; entry: BatchProfileEntry }
  | { type: 'reused'; file: string; measuredAt: number };

export interface WarmupOptions {
  engine: InferenceEngine;
  modelPath: string;
  manifest: ModelManifest;
  executionProviders: string[];
  /** e.g. [1, os.availableParallelism()], deduplicated; a single value means no choice. */
  threadCandidates: number[];
  /** Default: the manifest's warm-up hints, else defaultWarmupBatches(maxBatch). */
  batchSizes?: number[];
  /** Timed runs per batch size (after one discarded run). */
  iterations: number;
  latencyBudgetMs: number;
  /** Only `now()` is used. Default: epoch ms at performance.now() resolution. */
  clock?: Pick<Clock, 'now'>;
  /** A listener that throws is ignored: progress reporting never fails a warm-up. */
  onProgress?: (e: WarmupProgress) => void;
  /**
   * Where the measurements are kept between starts. Default: beside the model,
   * `<sha256>.profile.json` next to the cache's `<sha256>.onnx`; null: measure, keep nothing.
   */
  profileFile?: string | null;
  /**
   * The intra-op thread count the engine already has this model loaded with, where the caller
   * loaded it before warm-up: a kept choice of the same count is not loaded a second time (see
   * keptThreads, which tells the caller which count to load).
   */
  loadedThreads?: number;
}

/** What looking up a kept profile needs: the warm-up's settings, no engine. */
export type KeptProfileQuery = Pick<
  WarmupOptions,
  'modelPath' | 'manifest' | 'executionProviders' | 'threadCandidates' | 'batchSizes' | 'iterations' | 'latencyBudgetMs' | 'profileFile'
>;

const preciseClock: Pick<Clock, 'now'> = { now: () => performance.timeOrigin + performance.now() };

export async function runWarmup(options: WarmupOptions): Promise<BatchProfile> {
  const clock = options.clock ?? preciseClock;
  const { file, key, kept, sizes, threadsList, iterations } = await lookUp(options);
  if (file && kept) {
    emit(options, { type: 'reused', file, measuredAt: kept.measuredAt });
    return reuse(options, kept);
  }

  const candidates: BatchProfile['candidates'] = [];
  for (const threads of threadsList) {
    const info = await loadWith(options, threads);
    emit(options, { type: 'load', threads, loadMs: info.loadMs });
    const entries: BatchProfileEntry[] = [];
    for (const batch of sizes) {
      const entry = await measureBatch(options.engine, options.manifest, batch, iterations, clock);
      entries.push(entry);
      emit(options, { type: 'measured', threads, entry });
    }
    candidates.push({ threads, entries });
  }

  const choice = choose(candidates, options.latencyBudgetMs);
  if (threadsList.at(-1) !== choice.threads) {
    await loadWith(options, choice.threads);
    await options.engine.run(representativeInputs(options.manifest, choice.entry.batch));
  }
  const profile = profileOf(candidates, choice, clock.now());
  if (file) await keepProfile(file, key, profile);
  return profile;
}

/**
 * The intra-op thread count a warm-up with these settings would load from its kept profile, or
 * undefined when it will measure. A caller that loads the model before warm-up loads this count
 * and passes it as `loadedThreads`, so a warm-cache start creates one session, not two.
 */
export async function keptThreads(query: KeptProfileQuery): Promise<number | undefined> {
  const { kept } = await lookUp(query);
  return kept ? choose(kept.candidates, query.latencyBudgetMs).threads : undefined;
}

/** The settings warm-up runs under, normalised, and the profile kept for them if any. */
async function lookUp(options: KeptProfileQuery) {
  const sizes = warmupSizes(options);
  const threadsList = [...new Set(options.threadCandidates.filter((t) => Number.isInteger(t) && t >= 0))];
  if (threadsList.length === 0) threadsList.push(0);
  const iterations = Math.max(1, Math.floor(options.iterations));
  const file = options.profileFile === undefined ? profileFileFor(options.modelPath) : options.profileFile;
  const key = profileKey({
    sha256: options.manifest.sha256,
    executionProviders: options.executionProviders,
    threadCandidates: threadsList,
    batchSizes: sizes,
    iterations,
  });
  const kept = file ? await readKeptProfile(file, key, isBatchProfile) : undefined;
  return { file, key, kept, sizes, threadsList, iterations };
}

/** A start with kept measurements: load the chosen thread count (unless loaded), run the chosen batch once. */
async function reuse(options: WarmupOptions, kept: BatchProfile): Promise<BatchProfile> {
  const choice = choose(kept.candidates, options.latencyBudgetMs);
  if (options.loadedThreads !== choice.threads) {
    const info = await loadWith(options, choice.threads);
    emit(options, { type: 'load', threads: choice.threads, loadMs: info.loadMs });
  }
  // The first run pays for allocations and kernel selection: a job should not.
  await options.engine.run(representativeInputs(options.manifest, choice.entry.batch));
  return { ...profileOf(kept.candidates, choice, kept.measuredAt), reused: true };
}

function profileOf(candidates: BatchProfile['candidates'], choice: Choice, measuredAt: number): BatchProfile {
  return {
    threads: choice.threads,
    chosenBatch: choice.entry.batch,
    rowsPerS: choice.entry.rowsPerS,
    entries: candidates.find((c) => c.threads === choice.threads)?.entries ?? [],
    candidates,
    measuredAt,
  };
}

/** A kept profile's shape, checked before it is trusted: a hand-edited or truncated file is measured again. */
function isBatchProfile(x: unknown): x is BatchProfile {
  const p = x as Partial<BatchProfile> | null;
  return (
    !!p &&
    typeof p === 'object' &&
    typeof p.measuredAt === 'number' &&
    Array.isArray(p.candidates) &&
    p.candidates.length > 0 &&
    p.candidates.every((c) => Number.isInteger(c?.threads) && Array.isArray(c.entries) && c.entries.length > 0 && c.entries.every(isEntry))
  );
}

function isEntry(e: BatchProfileEntry | undefined): boolean {
  return (
    !!e &&
    Number.isInteger(e.batch) &&
    e.batch >= 1 &&
    [e.p50Ms, e.p95Ms, e.rowsPerS].every((v) => typeof v === 'number' && Number.isFinite(v) && v >= 0)
  );
}

/** 1, 2, 4, … below maxBatch, then maxBatch itself. */
export function defaultWarmupBatches(maxBatch: number): number[] {
  const max = Math.max(1, Math.floor(maxBatch));
  const sizes: number[] = [];
  for (let b = 1; b < max; b *= 2) sizes.push(b);
  sizes.push(max);
  return sizes;
}

function warmupSizes(options: Pick<WarmupOptions, 'manifest' | 'batchSizes'>): number[] {
  const { maxBatch, warmupBatches } = options.manifest.batching;
  const requested = options.batchSizes ?? (warmupBatches.length > 0 ? warmupBatches : defaultWarmupBatches(maxBatch));
  const sizes = [...new Set(requested.filter((b) => Number.isInteger(b) && b >= 1 && (maxBatch < 1 || b <= maxBatch)))];
  if (sizes.length === 0) throw new Error(`warm-up: no usable batch size in [${requested.join(', ')}] (maxBatch ${maxBatch})`);
  return sizes.sort((a, b) => a - b);
}

function loadWith(options: WarmupOptions, threads: number) {
  return options.engine.load(options.modelPath, { executionProviders: options.executionProviders, intraOpThreads: threads });
}

async function measureBatch(
  engine: InferenceEngine,
  manifest: ModelManifest,
  batch: number,
  iterations: number,
  clock: Pick<Clock, 'now'>,
): Promise<BatchProfileEntry> {
  // Inputs are built before the clock starts: each run detaches the buffers it is given.
  await engine.run(representativeInputs(manifest, batch));
  const samples: number[] = [];
  for (let i = 0; i < iterations; i++) {
    const inputs = representativeInputs(manifest, batch);
    const started = clock.now();
    await engine.run(inputs);
    samples.push(Math.max(0, clock.now() - started));
  }
  samples.sort((a, b) => a - b);
  const p50Ms = percentile(samples, 0.5);
  // A clock coarser than the run would give 0 ms: count it as 1 µs rather than infinite rows/s.
  return { batch, p50Ms, p95Ms: percentile(samples, 0.95), rowsPerS: batch / (Math.max(p50Ms, 0.001) / 1000) };
}

/** Nearest-rank percentile of sorted samples. */
function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

interface Choice {
  threads: number;
  entry: BatchProfileEntry;
}

/**
 * More intra-op threads are taken only for at least this much more rows/s than the best choice
 * with fewer. ONNX Runtime's extra threads cost whole cores (they spin, and on a small host the
 * core they take is the one the worker's main thread needs for the queue), and warm-up's timings
 * are noisy: on 2 cores, 2 threads measured 1.30M vs 1.34M rows/s for `demo` at batch 128, yet
 * cost a draining worker 0.64–0.77 ms of CPU per job against 0.51 at 1 thread
 * (docs/BENCHMARKS.md). A gain under 30% is within what that noise and that cost take back.
 */
export const MORE_THREADS_MIN_GAIN = 1.3;

/**
 * Per thread count, the best rows/s among the cells whose p95 fits the budget (ties: the
 * smaller batch). Then the fewest threads win unless more threads give MORE_THREADS_MIN_GAIN ×
 * their rows/s (0 = ONNX Runtime's default counts as the most). When nothing fits, the model is
 * slower than the budget allows: take the smallest batch, at the thread count that runs it with
 * the lowest p95.
 */
function choose(candidates: BatchProfile['candidates'], latencyBudgetMs: number): Choice {
  const byThreads = [...candidates].sort((a, b) => threadRank(a.threads) - threadRank(b.threads));
  let best: Choice | undefined;
  for (const { threads, entries } of byThreads) {
    const entry = bestWithin(entries, latencyBudgetMs);
    if (entry && (!best || entry.rowsPerS >= best.entry.rowsPerS * MORE_THREADS_MIN_GAIN)) best = { threads, entry };
  }
  if (best) return best;
  let fallback: Choice | undefined;
  for (const { threads, entries } of byThreads) {
    const smallest = entries[0];
    if (smallest && (!fallback || smallest.p95Ms < fallback.entry.p95Ms)) fallback = { threads, entry: smallest };
  }
  if (!fallback) throw new Error('warm-up measured nothing');
  return fallback;
}

function bestWithin(entries: BatchProfileEntry[], latencyBudgetMs: number): BatchProfileEntry | undefined {
  let best: BatchProfileEntry | undefined;
  for (const entry of entries) {
    if (entry.p95Ms > latencyBudgetMs) continue;
    if (!best || entry.rowsPerS > best.rowsPerS || (entry.rowsPerS === best.rowsPerS && entry.batch < best.batch)) best = entry;
  }
  return best;
}

function threadRank(threads: number): number {
  return threads === 0 ? Number.POSITIVE_INFINITY : threads;
}

function emit(options: WarmupOptions, e: WarmupProgress): void {
  try {
    options.onProgress?.(e);
  } catch {
    // A broken progress listener must not fail the warm-up it reports on.
  }
}

/**
 * Deterministic synthetic inputs for `rows` rows: dynamic non-batch dimensions become 1;
 * floats in [-1, 1); integers 0 (the one index every embedding or gather table accepts);
 * bools alternating; strings a short word.
 */
export function representativeInputs(manifest: ModelManifest, rows: number): Record<string, EngineTensor> {
  const inputs: Record<string, EngineTensor> = {};
  for (const spec of manifest.inputs) inputs[spec.name] = syntheticTensor(spec, rows);
  return inputs;
}

function syntheticTensor(spec: TensorSpec, rows: number): EngineTensor {
  const type = datatypeToDtype(spec.datatype);
  const dims = [rows, ...spec.shape.slice(1).map((d) => (d < 0 ? 1 : d))];
  const n = elementCount(dims);
  const next = unitRandom(0x5eed);
  switch (type) {
    case 'float32':
      return { type, dims, data: Float32Array.from({ length: n }, next) };
    case 'float64':
      return { type, dims, data: Float64Array.from({ length: n }, next) };
    case 'float16':
      return { type, dims, data: Uint16Array.from({ length: n }, () => encodeHalf(next())) };
    case 'bool':
      return { type, dims, data: Uint8Array.from({ length: n }, (_, i) => i % 2) };
    case 'string':
      return { type, dims, data: Array.from({ length: n }, () => 'warmup') };
    case 'int64':
      return { type, dims, data: new BigInt64Array(n) };
    case 'uint64':
      return { type, dims, data: new BigUint64Array(n) };
    default:
      return {
        type,
        dims,
        data: new { int8: Int8Array, uint8: Uint8Array, int16: Int16Array, uint16: Uint16Array, int32: Int32Array, uint32: Uint32Array }[
          type
        ](n),
      };
  }
}

/** A small seeded generator of values in [-1, 1): the same inputs on every worker. */
function unitRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  };
}
