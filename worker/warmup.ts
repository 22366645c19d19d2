/**
 * Warm-up and the batch profile (DESIGN §6). Before a worker is ready it runs representative
 * batches at several sizes (the manifest's hints, else 1, 2, 4, …, maxBatch), records the
 * latency per batch size, and picks the batch size, and the intra-op thread count where the
 * host has a choice, with the best rows/s whose p95 stays within the latency budget; more
 * threads only when they clearly pay (MORE_THREADS_MIN_GAIN).
 *
 * Each (threads, batch) cell gets one discarded run (first runs pay for allocations and kernel
 * selection) and then timed runs: `iterations` of them, or, under a `bound` (the worker's
 * WARMUP_BUDGET_MS and WARMUP_MAX_RSE), until the cell's median is known to within `maxRse` or
 * its share of the budget is spent, at most `iterations`; sizes that cannot pay off or fit are
 * not measured at all (worker/warmup-bound.ts). The engine is left loaded with the chosen thread
 * count and warm at the chosen batch size.
 *
 * The measurements are kept beside the model (worker/profile-cache.ts): a later start of the same
 * model on the same host, with the same settings, loads the chosen thread count and runs the
 * chosen batch once (so the session is hot) instead of measuring again. The choice itself is
 * made again from the kept measurements, so a changed latency budget still applies.
 *
 * Thread counts are timed one after the other, so a process that takes a core during one of them
 * decides the comparison, and the kept profile would carry that choice to every later start. With
 * a host meter (`hostCpu`, worker/host-cpu.ts) each thread count records the cores the rest of
 * the host used while it was measured; one left short of its cores makes the profile contended
 * (a `contended` event), and a later start that finds the host quiet measures again (`remeasure`)
 * while one on a host still busy reuses it. The contention is measured, not guessed from load.
 *
 * Inputs with dynamic non-batch dimensions need a size: worker/settle-shapes.ts finds one (the
 * manifest's warm-up shape, else the first candidate ONNX Runtime takes) before anything is
 * measured; the shape used is reported (a `shapes` progress event) and kept in the profile. The
 * profile's shape and the choice made from it: worker/batch-profile.ts.
 */

import os from 'node:os';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import {
  type BatchProfile,
  type BatchProfileEntry,
  type Choice,
  choose,
  type InputShapes,
  isBatchProfile,
  profileOf,
} from './batch-profile.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { type HostCpuMeter, measuredShort } from './host-cpu.ts';
import { keepProfile, profileFileFor, profileKey, readKeptProfile } from './profile-cache.ts';
import { copyInputs, representativeInputs } from './representative-inputs.ts';
import { isOpen, type SettledShapes, type ShapePlan, settleShapes, shapePlan, WARMUP_DIM_CANDIDATES } from './settle-shapes.ts';
import { medianRse, planSize, type SampleLimits, type SizeSkip, sampleStop, threadEnd, type WarmupBound } from './warmup-bound.ts';

export type { WarmupBound };

export type WarmupProgress =
  | { type: 'load'; threads: number; loadMs: number }
  /** The input shapes warm-up runs with (models with dynamic non-batch dimensions only), and the candidates ONNX Runtime refused first. */
  | ({ type: 'shapes' } & SettledShapes)
  | { type: 'measured'; threads: number; entry: BatchProfileEntry }
  /** A bounded warm-up left this size and the bigger ones of this thread count unmeasured, and why. */
  | { type: 'skipped'; threads: number; batch: number; reason: SizeSkip }
  | { type: 'reused'; file: string; measuredAt: number }
  /**
   * The rest of the host took cores while these thread counts were measured (worker/host-cpu.ts):
   * the comparison between them is not to be trusted, and a later start on a quiet host measures again.
   */
  | { type: 'contended'; threads: number[]; othersCores: number[] }
  /** A kept profile was measured beside other work and the host is quiet now: this start measures again. */
  | { type: 'remeasure'; file: string; othersCoresNow: number };

export interface WarmupOptions {
  engine: InferenceEngine;
  modelPath: string;
  manifest: ModelManifest;
  executionProviders: string[];
  /** e.g. [1, os.availableParallelism()], deduplicated; a single value means no choice. */
  threadCandidates: number[];
  /** Default: the manifest's warm-up hints, else defaultWarmupBatches(maxBatch). */
  batchSizes?: number[];
  /** Timed runs per batch size (after one discarded run); under `bound`, the most a size takes. */
  iterations: number;
  latencyBudgetMs: number;
  /**
   * Bounds a warm-up that measures (one that reuses a kept profile is not measured): its time in
   * all and the precision each size stops at. Absent: every size gets `iterations` timed runs.
   */
  bound?: WarmupBound;
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
   * keptThreads, which tells the caller which count to load), nor is a first thread candidate of
   * that count before it is measured (see firstThreads).
   */
  loadedThreads?: number;
  /**
   * Tells whether the thread counts were measured beside other work (worker/host-cpu.ts). Absent:
   * nothing is judged, as before. With it, each thread count's measurement records the cores the
   * rest of the host used meanwhile, and a kept profile with a thread count measured short of its
   * cores is measured again at a start that finds the host quiet.
   */
  hostCpu?: HostCpuMeter;
}

/** How long a start with a contended kept profile watches the host before deciding to measure again. */
export const QUIET_PROBE_MS = 200;

/** What looking up a kept profile needs: the warm-up's settings, no engine. */
export type KeptProfileQuery = Pick<
  WarmupOptions,
  | 'modelPath'
  | 'manifest'
  | 'executionProviders'
  | 'threadCandidates'
  | 'batchSizes'
  | 'iterations'
  | 'latencyBudgetMs'
  | 'profileFile'
  | 'bound'
>;

const preciseClock: Pick<Clock, 'now'> = { now: () => performance.timeOrigin + performance.now() };

export async function runWarmup(given: WarmupOptions): Promise<BatchProfile> {
  const options = { ...given, engine: servedOutputsOnly(given.engine, given.manifest) };
  const clock = options.clock ?? preciseClock;
  const { file, key, kept, sizes, threadsList, iterations, plan } = await lookUp(options);
  if (file && kept && !(await remeasure(options, kept, threadsList, file))) {
    emit(options, { type: 'reused', file, measuredAt: kept.measuredAt });
    return reuse(options, kept);
  }

  // The budget counts from here: loads and the shape pass spend it too.
  const budgetEnd = options.bound ? clock.now() + options.bound.budgetMs : Number.POSITIVE_INFINITY;
  const { candidates, passes, shapes } = await sweep(options, { sizes, threadsList, iterations, plan, budgetEnd, clock });
  const short = candidates.filter((c) => isShort(c));
  if (short.length > 0)
    emit(options, { type: 'contended', threads: short.map((c) => c.threads), othersCores: short.map((c) => c.othersCores ?? 0) });
  let choice = choose(candidates, options.latencyBudgetMs);
  const reload = threadsList.at(-1) !== choice.threads;
  if (reload) await loadAndRun(options, choice, shapes);
  if (options.bound) {
    // The engine's last run was at the chosen batch where it was just reloaded or that was the last size measured.
    const hot = reload || candidates.at(-1)?.entries.at(-1)?.batch === choice.entry.batch;
    const limits = { maxSamples: iterations, maxRse: options.bound.maxRse, shareEnd: budgetEnd, hardEnd: budgetEnd };
    choice = await refineChoice(options, { candidates, passes, choice, shapes, clock, hot, limits });
  }
  const profile = { ...profileOf(candidates, choice, clock.now()), ...(plan.dynamic && shapes ? { inputShapes: shapes } : {}) };
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

/**
 * The intra-op thread count a caller that loads the model before warm-up should load: the kept
 * choice where a profile is kept, else the first candidate warm-up measures. Either way the
 * session it creates is the one warm-up starts on.
 */
export async function firstThreads(query: KeptProfileQuery): Promise<number> {
  const { kept, threadsList } = await lookUp(query);
  return kept ? choose(kept.candidates, query.latencyBudgetMs).threads : (threadsList[0] ?? 0);
}

/** The settings warm-up runs under, normalised, and the profile kept for them if any. */
async function lookUp(options: KeptProfileQuery) {
  const sizes = warmupSizes(options);
  const threadsList = [...new Set(options.threadCandidates.filter((t) => Number.isInteger(t) && t >= 0))];
  if (threadsList.length === 0) threadsList.push(0);
  const iterations = Math.max(1, Math.floor(options.iterations));
  const file = options.profileFile === undefined ? profileFileFor(options.modelPath) : options.profileFile;
  const plan = shapePlan(options.manifest);
  const key = profileKey({
    sha256: options.manifest.sha256,
    executionProviders: options.executionProviders,
    threadCandidates: threadsList,
    batchSizes: sizes,
    iterations,
    // A bounded warm-up measures differently: its profile is kept under its bound.
    ...(options.bound ? { bound: { budgetMs: options.bound.budgetMs, maxRse: options.bound.maxRse } } : {}),
    // Only where an input has dynamic dimensions: a fixed model's key, and its kept file, stay as they were.
    ...(plan.dynamic ? { inputShapes: plan.template } : {}),
    ...(plan.dynamic && isOpen(plan.template) ? { shapeCandidates: [...WARMUP_DIM_CANDIDATES] } : {}),
  });
  const found = file ? await readKeptProfile(file, key, isBatchProfile) : undefined;
  // A profile of a model with dynamic dimensions is reusable only with the shapes it was measured at.
  const kept = found && (!plan.dynamic || found.inputShapes) ? found : undefined;
  return { file, key, kept, sizes, threadsList, iterations, plan };
}

/** A start with kept measurements: load the chosen thread count (unless loaded), run the chosen batch once. */
async function reuse(options: WarmupOptions, kept: BatchProfile): Promise<BatchProfile> {
  const choice = choose(kept.candidates, options.latencyBudgetMs);
  if (options.loadedThreads !== choice.threads) {
    const info = await loadWith(options, choice.threads);
    emit(options, { type: 'load', threads: choice.threads, loadMs: info.loadMs });
  }
  // The first run pays for allocations and kernel selection: a job should not.
  await options.engine.run(representativeInputs(options.manifest, choice.entry.batch, kept.inputShapes));
  const shapes = kept.inputShapes ? { inputShapes: kept.inputShapes } : {};
  return { ...profileOf(kept.candidates, choice, kept.measuredAt), ...shapes, reused: true };
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

interface SweepPlan {
  sizes: number[];
  threadsList: number[];
  iterations: number;
  plan: ShapePlan;
  budgetEnd: number;
  clock: Pick<Clock, 'now'>;
}

/**
 * Every thread count × batch size a warm-up measures: under a bound, each thread count gets an
 * even share of what is left and stops growing where planSize says (worker/warmup-bound.ts).
 * Returns the cells' entries, their timed passes by `threads:batch`, and the shapes measured at.
 */
async function sweep(options: WarmupOptions, { sizes, threadsList, iterations, plan, budgetEnd, clock }: SweepPlan) {
  const candidates: BatchProfile['candidates'] = [];
  const passes = new Map<string, number[]>();
  let shapes: InputShapes | undefined;
  for (const [t, threads] of threadsList.entries()) {
    // The caller's session serves the first thread count when it has that count: one create less.
    if (t > 0 || options.loadedThreads !== threads) {
      const info = await loadWith(options, threads);
      emit(options, { type: 'load', threads, loadMs: info.loadMs });
    }
    shapes ??= await settleShapes(options, plan, (settled) => emit(options, { type: 'shapes', ...settled }));
    // Only a choice between thread counts can be decided by another process's load.
    const others = threadsList.length > 1 ? options.hostCpu?.window() : undefined;
    const hardEnd = threadEnd(budgetEnd, clock.now(), threadsList.length - t);
    const entries: BatchProfileEntry[] = [];
    for (const [i, batch] of sizes.entries()) {
      const next = options.bound
        ? planSize({
            measured: entries,
            remaining: sizes.slice(i),
            now: clock.now(),
            hardEnd,
            latencyBudgetMs: options.latencyBudgetMs,
            maxRse: options.bound.maxRse,
          })
        : { measure: true as const, shareEnd: Number.POSITIVE_INFINITY };
      if (!next.measure) {
        emit(options, { type: 'skipped', threads, batch, reason: next.reason });
        break;
      }
      // Unbounded, no spread counts as stable (-1): every size takes `iterations` runs, as it always did.
      const limits = { maxSamples: iterations, maxRse: options.bound?.maxRse ?? -1, shareEnd: next.shareEnd, hardEnd };
      const samples: number[] = [];
      passes.set(`${threads}:${batch}`, samples);
      const entry = await measureBatch(options.engine, representativeInputs(options.manifest, batch, shapes), limits, clock, samples);
      entries.push(entry);
      emit(options, { type: 'measured', threads, entry });
    }
    const othersCores = others?.();
    candidates.push({ threads, entries, ...(othersCores !== undefined ? { othersCores: round2(othersCores) } : {}) });
  }
  return { candidates, passes, shapes };
}

/** Whether thread count `c` was measured with fewer of the host's cores than it runs on (see host-cpu.ts). */
function isShort(c: BatchProfile['candidates'][number]): boolean {
  return c.othersCores !== undefined && measuredShort(c.threads, c.othersCores, os.availableParallelism());
}

/**
 * Whether a kept profile is measured again instead of reused: only where warm-up had a thread
 * count to choose, one of them was measured short of its cores, and the host now leaves every
 * count its cores. On a host that stays busy the kept choice stands (measuring again there would
 * only measure the same contention), and a profile measured on a quiet host is never questioned.
 */
async function remeasure(options: WarmupOptions, kept: BatchProfile, threadsList: number[], file: string): Promise<boolean> {
  if (!options.hostCpu || threadsList.length < 2 || !kept.candidates.some(isShort)) return false;
  const now = await options.hostCpu.sample(QUIET_PROBE_MS);
  if (now === undefined || threadsList.some((t) => measuredShort(t, now, os.availableParallelism()))) return false;
  emit(options, { type: 'remeasure', file, othersCoresNow: round2(now) });
  return true;
}

const round2 = (v: number) => Math.round(v * 100) / 100;

/** Loads `choice`'s thread count and runs its batch once, so the first job does not pay for allocations. */
async function loadAndRun(options: WarmupOptions, choice: Choice, shapes: InputShapes | undefined): Promise<void> {
  await loadWith(options, choice.threads);
  await options.engine.run(representativeInputs(options.manifest, choice.entry.batch, shapes));
}

/**
 * What is left of the budget goes to the chosen cell, whose rows/s the scaler reads; then the
 * choice is made again from the refined entry (more passes can move it, within the thread count
 * or, rarely, to another, which is then loaded).
 */
async function refineChoice(
  options: WarmupOptions,
  r: {
    candidates: BatchProfile['candidates'];
    passes: Map<string, number[]>;
    choice: Choice;
    shapes: InputShapes | undefined;
    clock: Pick<Clock, 'now'>;
    hot: boolean;
    limits: SampleLimits;
  },
): Promise<Choice> {
  const samples = r.passes.get(`${r.choice.threads}:${r.choice.entry.batch}`) ?? [];
  const refined = await refine(options, r.choice, samples, { ...r.limits, shapes: r.shapes, clock: r.clock, hot: r.hot });
  const cell = r.candidates.find((c) => c.threads === r.choice.threads);
  if (refined && cell) cell.entries = cell.entries.map((e) => (e.batch === refined.batch ? refined : e));
  const again = choose(r.candidates, options.latencyBudgetMs);
  if (again.threads !== r.choice.threads) await loadAndRun(options, again, r.shapes);
  return again;
}

/**
 * More timed passes of the chosen cell while it is not stable and the budget allows, after one
 * discarded unless the engine's last run was at this batch size (`hot`). Undefined when it took none.
 */
async function refine(
  options: WarmupOptions,
  choice: Choice,
  samples: number[],
  limits: SampleLimits & { shapes: InputShapes | undefined; clock: Pick<Clock, 'now'>; hot: boolean },
): Promise<BatchProfileEntry | undefined> {
  const { clock, hot } = limits;
  if (sampleStop(samples, limits, clock.now() + (hot ? 0 : choice.entry.p50Ms)) !== undefined) return undefined;
  const template = representativeInputs(options.manifest, choice.entry.batch, limits.shapes);
  return measureBatch(options.engine, template, limits, clock, samples, !hot);
}

/**
 * One discarded run (unless `discard` is false), then timed runs until sampleStop says enough
 * (with a negative maxRse and no ends: exactly `maxSamples`), added to `samples` (empty for a fresh cell).
 */
async function measureBatch(
  engine: InferenceEngine,
  template: Record<string, EngineTensor>,
  limits: SampleLimits,
  clock: Pick<Clock, 'now'>,
  samples: number[] = [],
  discard = true,
): Promise<BatchProfileEntry> {
  const batch = Object.values(template)[0]?.dims[0] ?? 1;
  // Inputs are copied before the clock starts: each run detaches the buffers it is given. (A copy
  // is a memcpy; generating a 224×224 image batch value by value again would take longer than the run.)
  if (discard) await engine.run(copyInputs(template));
  while (sampleStop(samples, limits, clock.now()) === undefined) {
    const inputs = copyInputs(template);
    const started = clock.now();
    await engine.run(inputs);
    samples.push(Math.max(0, clock.now() - started));
  }
  const rse = medianRse(samples);
  const sorted = [...samples].sort((a, b) => a - b);
  const p50Ms = percentile(sorted, 0.5);
  // A clock coarser than the run would give 0 ms: count it as 1 µs rather than infinite rows/s.
  const rowsPerS = batch / (Math.max(p50Ms, 0.001) / 1000);
  return { batch, p50Ms, p95Ms: percentile(sorted, 0.95), rowsPerS, samples: sorted.length, ...(Number.isFinite(rse) ? { rse } : {}) };
}

/** Nearest-rank percentile of sorted samples. */
function percentile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))] ?? 0;
}

/**
 * The engine as warm-up drives it: every pass fetches the outputs the manifest serves, as serving
 * does (batch-runner.ts), so an output left out at publish (`--outputs`: a ZipMap ONNX Runtime for
 * Node cannot return) is never computed.
 */
function servedOutputsOnly(engine: InferenceEngine, manifest: ModelManifest): InferenceEngine {
  const names = manifest.outputs.map((o) => o.name);
  return {
    load: (modelPath, loadOptions) => engine.load(modelPath, loadOptions),
    run: (inputs, outputNames) => engine.run(inputs, outputNames ?? names),
    close: () => engine.close(),
  };
}

function emit(options: WarmupOptions, e: WarmupProgress): void {
  try {
    options.onProgress?.(e);
  } catch {
    // A broken progress listener must not fail the warm-up it reports on.
  }
}
