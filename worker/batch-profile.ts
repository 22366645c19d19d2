/**
 * The batch profile (DESIGN §6): what warm-up measured for each (intra-op threads, batch size)
 * cell, the check a kept profile passes before it is trusted again, and the choice made from the
 * measurements — the batch with the best rows/s whose p95 fits the latency budget, more threads
 * only when they clearly pay. The choice is pure: a start that reuses kept measurements makes it
 * again, so a changed latency budget still applies.
 */

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
  /**
   * Every thread count tried, with its entries and, where the host could tell, the cores the rest
   * of the host used while they were measured (worker/host-cpu.ts).
   */
  candidates: Array<{ threads: number; entries: BatchProfileEntry[]; othersCores?: number }>;
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

/** The median ms of a batch of one row at the chosen thread count; undefined when warm-up did not measure batch 1. */
export function batchOneMs(p: Pick<BatchProfile, 'entries'>): number | undefined {
  return p.entries.find((e) => e.batch === 1)?.p50Ms;
}

/** Non-batch dimensions by input name: the shape an input runs with, the batch axis aside. */
export type InputShapes = Record<string, number[]>;

export function profileOf(candidates: BatchProfile['candidates'], choice: Choice, measuredAt: number): BatchProfile {
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
export function isBatchProfile(x: unknown): x is BatchProfile {
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

export interface Choice {
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
export function choose(candidates: BatchProfile['candidates'], latencyBudgetMs: number): Choice {
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
