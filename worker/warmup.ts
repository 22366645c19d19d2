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
 * Inputs with dynamic non-batch dimensions (a vision model's `x` [-1, 3, -1, -1]) need a size.
 * The manifest's warm-up shape (`batching.warmupShapes`, `publish --warmup-shape x:3,48,192`)
 * gives it; without one, warm-up tries WARMUP_DIM_CANDIDATES in order, one batch-1 pass each, and
 * profiles with the first that runs. The shape it used is reported (a `shapes` progress event)
 * and kept in the profile (`inputShapes`); only when every candidate fails does warm-up fail,
 * naming the input and asking for --warmup-shape. Models without such inputs run no extra pass.
 */

import { DATATYPE_INFO, newElements } from '../infra/contracts/datatypes.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import { warmupShapeFlag } from '../infra/contracts/warmup-shapes.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import { EngineRejectedError, type EngineTensor, type InferenceEngine } from './engine/engine.ts';
import { datatypeToDtype, elementCount, encodeHalf } from './engine/tensor-codec.ts';
import { keepProfile, profileFileFor, profileKey, readKeptProfile } from './profile-cache.ts';
import { medianRse, planSize, type SampleLimits, type SizeSkip, sampleStop, threadEnd, type WarmupBound } from './warmup-bound.ts';

export type { WarmupBound };

export interface BatchProfileEntry {
  batch: number;
  p50Ms: number;
  p95Ms: number;
  rowsPerS: number;
  /** Timed passes behind p50 and p95 (absent in profiles kept before warm-up was bounded). */
  samples?: number;
  /** The median's relative standard error (0.05 = ±5%); absent where fewer than two passes ran. */
  rse?: number;
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
  /**
   * The non-batch dimensions each input was measured with, where an input has dynamic ones
   * (absent for a model whose inputs are all fixed: their shapes are the manifest's).
   */
  inputShapes?: InputShapes;
}

/** Non-batch dimensions by input name: the shape an input runs with, the batch axis aside. */
export type InputShapes = Record<string, number[]>;

/**
 * The sizes warm-up tries, in order, for the dynamic non-batch dimensions the manifest gives no
 * warm-up shape. Every such dimension of every input takes the same size at once, so inputs that
 * must agree (token ids and their attention mask) do.
 * - 32: survives the five stride-2 stages of the usual CNN backbones (ResNet, MobileNet,
 *   PaddleOCR's classifier: 32 → 1) and unpadded 3×3 stacks of a few stages, and is a short
 *   sequence for a text model (BERT-family models take up to 512 positions). Warm-up then runs
 *   every batch size at it, so it is tried first while cheap: 224² is 49× the pixels.
 * - 224: the ImageNet size, what most classifiers were trained and exported at, for the ones
 *   that need it (a fixed-size pooling or a Flatten into a dense head, deeper downsampling).
 * - 1: the size of the old warm-up and the smallest any dimension takes: dimensions that count
 *   things (boxes, tokens) of models that accept none of the above.
 * A profile taken at a made-up size is only as good as that size is to real requests: publish
 * the served size with --warmup-shape.
 */
export const WARMUP_DIM_CANDIDATES: readonly number[] = [32, 224, 1];

export type WarmupProgress =
  | { type: 'load'; threads: number; loadMs: number }
  /** The input shapes warm-up runs with (models with dynamic non-batch dimensions only), and the candidates ONNX Runtime refused first. */
  | { type: 'shapes'; inputShapes: InputShapes; source: 'manifest' | 'tried'; rejected: Array<{ inputShapes: InputShapes; error: string }> }
  | { type: 'measured'; threads: number; entry: BatchProfileEntry }
  /** A bounded warm-up left this size and the bigger ones of this thread count unmeasured, and why. */
  | { type: 'skipped'; threads: number; batch: number; reason: SizeSkip }
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
}

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

export async function runWarmup(options: WarmupOptions): Promise<BatchProfile> {
  const clock = options.clock ?? preciseClock;
  const { file, key, kept, sizes, threadsList, iterations, plan } = await lookUp(options);
  if (file && kept) {
    emit(options, { type: 'reused', file, measuredAt: kept.measuredAt });
    return reuse(options, kept);
  }

  // The budget counts from here: loads and the shape pass spend it too.
  const budgetEnd = options.bound ? clock.now() + options.bound.budgetMs : Number.POSITIVE_INFINITY;
  const { candidates, passes, shapes } = await sweep(options, { sizes, threadsList, iterations, plan, budgetEnd, clock });
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

interface ShapePlan {
  /** Per input, its non-batch dimensions: the model's fixed ones, the manifest's warm-up shape, -1 where warm-up picks. */
  template: InputShapes;
  /** Some input has dynamic non-batch dimensions: the shape is settled by a forward pass and recorded. */
  dynamic: boolean;
}

function shapePlan(manifest: ModelManifest): ShapePlan {
  const hints = manifest.batching.warmupShapes ?? {};
  let dynamic = false;
  const template = Object.fromEntries(
    manifest.inputs.map((spec) => {
      const rest = spec.shape.slice(1);
      if (rest.some((d) => d < 0)) dynamic = true;
      const hint = Object.hasOwn(hints, spec.name) ? hints[spec.name] : undefined;
      // The registry checked the hint against the input; a stored manifest is read back through the same check.
      return [spec.name, hint && hint.length === rest.length ? [...hint] : rest.map((d) => (d < 0 ? -1 : d))];
    }),
  );
  return { template, dynamic };
}

/** Some dimension is still the warm-up's to pick. */
function isOpen(template: InputShapes): boolean {
  return Object.values(template).some((dims) => dims.some((d) => d < 0));
}

/** The template with every open dimension at `size`. */
function withSize(template: InputShapes, size: number): InputShapes {
  return Object.fromEntries(Object.entries(template).map(([name, dims]) => [name, dims.map((d) => (d < 0 ? size : d))]));
}

/**
 * The input shapes warm-up measures with. A model with dynamic dimensions runs one batch-1 pass
 * per candidate (the manifest's shape alone, or WARMUP_DIM_CANDIDATES) until ONNX Runtime takes
 * one; a refused candidate is the model's answer, any other failure (the engine died) is thrown.
 */
async function settleShapes(options: WarmupOptions, plan: ShapePlan): Promise<InputShapes> {
  if (!plan.dynamic) return plan.template;
  const open = isOpen(plan.template);
  const tries = open ? WARMUP_DIM_CANDIDATES.map((size) => withSize(plan.template, size)) : [plan.template];
  const rejected: Array<{ inputShapes: InputShapes; error: string }> = [];
  for (const inputShapes of tries) {
    try {
      await options.engine.run(representativeInputs(options.manifest, 1, inputShapes));
    } catch (err) {
      if (!(err instanceof EngineRejectedError)) throw err;
      rejected.push({ inputShapes, error: err.message });
      continue;
    }
    emit(options, { type: 'shapes', inputShapes, source: open ? 'tried' : 'manifest', rejected });
    return inputShapes;
  }
  throw new Error(noShapeMessage(options.manifest, plan.template, rejected));
}

/** Why warm-up found no shape to run, naming the inputs and the flag that fixes it. */
function noShapeMessage(manifest: ModelManifest, template: InputShapes, rejected: Array<{ inputShapes: InputShapes; error: string }>) {
  const said = (error: string) => error.replace(/\s+/g, ' ').trim().slice(0, 200);
  if (!isOpen(template)) {
    const given = Object.entries(manifest.batching.warmupShapes ?? {}).map(([name, dims]) => `${name}:${dims.join(',')}`);
    return (
      `warm-up: ONNX Runtime refused the manifest's warm-up shape (--warmup-shape ${given.join(' --warmup-shape ')}): ` +
      `${said(rejected[0]?.error ?? '')}; publish a new version with the shape the model serves`
    );
  }
  const open = manifest.inputs.filter((spec) => template[spec.name]?.some((d) => d < 0));
  const named = open.map((spec) => `${spec.name} [${spec.shape.join(', ')}]`).join(', ');
  const tried = rejected.map((r, i) => `${WARMUP_DIM_CANDIDATES[i]}: ${said(r.error)}`).join('; ');
  const flags = open.map(warmupShapeFlag).join(' ');
  return (
    `warm-up: no forward pass ran with input ${named} at any size tried for its dynamic dimensions (${tried}); ` +
    `publish the model with the size it serves: ${flags}`
  );
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
    p.candidates.every(
      (c) => Number.isInteger(c?.threads) && Array.isArray(c.entries) && c.entries.length > 0 && c.entries.every(isEntry),
    ) &&
    (p.inputShapes === undefined || isInputShapes(p.inputShapes))
  );
}

function isInputShapes(x: unknown): x is InputShapes {
  return (
    typeof x === 'object' &&
    x !== null &&
    Object.values(x).every((dims) => Array.isArray(dims) && dims.every((d) => Number.isInteger(d) && d >= 1))
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
    shapes ??= await settleShapes(options, plan);
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
    candidates.push({ threads, entries });
  }
  return { candidates, passes, shapes };
}

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
 * Per thread count, the smallest batch within NEAR_BEST of the best rows/s among the cells whose
 * p95 fits the budget. Then the fewest threads win unless more threads give MORE_THREADS_MIN_GAIN ×
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

/**
 * A batch is chosen over a smaller one only for more than 1/NEAR_BEST of its rows/s. Every
 * request pays its batch's whole forward pass in latency, so a bigger batch must buy real
 * throughput: where the curve is flat (a conv net on CPU: 566 rows/s at 8 rows, 582 at 32 —
 * issue 15's CNN, whose 32-row passes put its p99 past 100 ms at 80% load) the small batch serves
 * nearly as many rows at a quarter of the latency; where it is steep (a tiny MLP: 1.1M rows/s at
 * 32, 1.6M at 128) the big one is still taken.
 */
export const NEAR_BEST = 0.9;

/** The smallest batch within NEAR_BEST of the best rows/s among the cells whose p95 fits the budget. */
function bestWithin(entries: BatchProfileEntry[], latencyBudgetMs: number): BatchProfileEntry | undefined {
  const fitting = entries.filter((e) => e.p95Ms <= latencyBudgetMs);
  if (fitting.length === 0) return undefined;
  const top = Math.max(...fitting.map((e) => e.rowsPerS));
  const near = fitting.filter((e) => e.rowsPerS >= NEAR_BEST * top);
  return near.reduce((a, b) => (b.batch < a.batch ? b : a));
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
 * Deterministic synthetic inputs for `rows` rows: each input's non-batch dimensions from
 * `shapes`, else its own with dynamic ones 1; floats in [-1, 1); integers 0 (the one index every
 * embedding or gather table accepts); bools alternating; strings a short word.
 */
export function representativeInputs(manifest: ModelManifest, rows: number, shapes: InputShapes = {}): Record<string, EngineTensor> {
  const inputs: Record<string, EngineTensor> = {};
  for (const spec of manifest.inputs) {
    const rest = Object.hasOwn(shapes, spec.name) ? shapes[spec.name] : undefined;
    inputs[spec.name] = syntheticTensor(spec, [rows, ...(rest ?? spec.shape.slice(1).map((d) => (d < 0 ? 1 : d)))]);
  }
  return inputs;
}

/** Fresh buffers with the same values: a run may detach the ones it is given. */
function copyInputs(inputs: Record<string, EngineTensor>): Record<string, EngineTensor> {
  const copy: Record<string, EngineTensor> = {};
  for (const [name, t] of Object.entries(inputs)) copy[name] = { type: t.type, dims: [...t.dims], data: t.data.slice() };
  return copy;
}

function syntheticTensor(spec: TensorSpec, dims: number[]): EngineTensor {
  const n = elementCount(dims);
  const data = newElements(spec.datatype, n);
  const next = unitRandom(0x5eed);
  // Values the datatype holds (the table's kind says which): floats in [-1, 1), alternating
  // bools, a word for strings, and integers left at 0.
  const kind = DATATYPE_INFO[spec.datatype].kind;
  for (let i = 0; i < n; i++) {
    if (kind === 'float') (data as Float32Array | Float64Array)[i] = next();
    else if (kind === 'half') (data as Uint16Array)[i] = encodeHalf(next());
    else if (kind === 'bool') (data as Uint8Array)[i] = i % 2;
    else if (kind === 'bytes') (data as string[])[i] = 'warmup';
  }
  return { type: datatypeToDtype(spec.datatype), dims, data };
}

/** A small seeded generator of values in [-1, 1): the same inputs on every worker. */
function unitRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
    return state / 2 ** 31 - 1;
  };
}
