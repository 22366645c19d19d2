/**
 * Calibration of the simulated worker (issue 5, "must show"): what a real run measured, job by
 * job, against what the simulator predicts for the very same arrivals.
 *
 * Two experiments, as a real run records them (scripts/commands/simulate-calibrate-run.ts):
 * - drains: bursts of jobs queued at once and served flat out — the service rate (one before the
 *   replay and one after, so a machine whose speed drifts shows it);
 * - replay: a short trace's arrivals at moderate load — queue-wait and time-to-result percentiles.
 *
 * The simulator replays each with a fixed pool of the same number of warm workers, the batch
 * profile the real workers measured in their warm-up (rows → ms), and jobs of the same rows.
 * A real worker also spends time per job outside the forward pass (BullMQ fetch and lock, result
 * write, events): the profile cannot see it. It is fitted on the drain — the per-job overhead
 * that makes the simulated service rate equal the measured one — and then judged on the replay,
 * which it was not fitted to.
 *
 * Queue wait has one definition on both sides: from submit to the moment a worker takes the job
 * (the real worker's processedOn: BullMQ hands it to the worker, which may hold it briefly while
 * the batch before it runs). Time to result: from submit to done.
 */
import { type BatchPoint, profileService } from './service.ts';
import { MINUTE_MS, type Scaler, simulate } from './world.ts';

export interface LatencySummary {
  p50: number;
  p95: number;
  p99: number;
}

/** Exact percentiles (nearest rank) of a list of ms. */
export function summariseLatency(values: readonly number[]): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  const at = (q: number) => (sorted.length === 0 ? 0 : (sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)] as number));
  return { p50: at(0.5), p95: at(0.95), p99: at(0.99) };
}

export interface MeasuredJob {
  arrivedMs: number;
  startedMs: number;
  doneMs: number;
}

export interface CalibrationInput {
  workers: number;
  rowsPerJob: number;
  /** The real worker's batch size in rows (its warm-up's choice). */
  maxBatchRows: number;
  /** Warm-up's batch profile: rows → ms per forward pass. */
  profile: BatchPoint[];
  replay: MeasuredJob[];
  /** Each burst's jobs. */
  drains: MeasuredJob[][];
}

export interface RunFigures {
  jobs: number;
  queueWaitMs: LatencySummary;
  resultMs: LatencySummary;
  /** Jobs per second from the first job taken to the last one done (for drains: summed over the bursts). */
  jobsPerSec: number;
}

export interface Calibration {
  measured: { replay: RunFigures; drain: RunFigures };
  /** The batch profile alone. */
  profileOnly: { replay: RunFigures; drain: RunFigures };
  /** The profile plus the per-job overhead fitted on the drain. */
  fitted: { jobOverheadMs: number; replay: RunFigures; drain: RunFigures };
  rows: ComparisonRow[];
}

export interface ComparisonRow {
  what: string;
  measured: number;
  profileOnly: number;
  fitted: number;
}

/** From the first job taken to the last one done. */
function spanMs(jobs: readonly MeasuredJob[]): number {
  const first = jobs.reduce((m, j) => Math.min(m, j.startedMs), Infinity);
  const last = jobs.reduce((m, j) => Math.max(m, j.doneMs), -Infinity);
  return last > first ? last - first : 0;
}

export function figures(jobs: readonly MeasuredJob[]): RunFigures {
  const span = spanMs(jobs);
  return {
    jobs: jobs.length,
    queueWaitMs: summariseLatency(jobs.map((j) => j.startedMs - j.arrivedMs)),
    resultMs: summariseLatency(jobs.map((j) => j.doneMs - j.arrivedMs)),
    jobsPerSec: span > 0 ? (jobs.length / span) * 1000 : 0,
  };
}

/** The simulator's prediction for these arrivals with `workers` warm workers and no scaler. */
export function simulateArrivals(
  arrivals: readonly number[],
  workers: number,
  serviceMs: (jobs: number) => number,
  maxBatch: number,
): MeasuredJob[] {
  const sorted = Float64Array.from(arrivals).sort();
  if (sorted.length === 0) return [];
  const startMs = Math.floor((sorted[0] as number) / MINUTE_MS) * MINUTE_MS;
  // Room after the last arrival for the queue to empty: the whole load at one batch per worker-second, at least ten minutes.
  const spare = 10 + Math.ceil((sorted.length * serviceMs(1)) / Math.max(1, workers) / MINUTE_MS);
  const minutes = Math.floor(((sorted.at(-1) as number) - startMs) / MINUTE_MS) + 1 + spare;
  const counts = new Array<number>(minutes).fill(0);
  for (const at of sorted) {
    const m = Math.floor((at - startMs) / MINUTE_MS);
    counts[m] = (counts[m] ?? 0) + 1;
  }
  const jobs: MeasuredJob[] = [];
  const fixed: Scaler = { name: 'fixed', initial: () => ({ active: workers, standby: 0 }), tick: () => [] };
  simulate(fixed, {
    counts,
    startMs,
    arrivalTimes: sorted,
    pattern: { kind: 'uniform' },
    seed: 1,
    coldStartMs: 0,
    activateMs: 0,
    maxBatch,
    serviceMs,
    tickMs: MINUTE_MS,
    sloMs: 1,
    onJob: (arrivedMs, startedMs, doneMs) => jobs.push({ arrivedMs, startedMs, doneMs }),
  });
  return jobs;
}

/** Figures of several bursts: latencies over all their jobs, the rate over their summed spans. */
export function drainFigures(bursts: ReadonlyArray<readonly MeasuredJob[]>): RunFigures {
  const all = figures(bursts.flat());
  const span = bursts.reduce((t, b) => t + spanMs(b), 0);
  return { ...all, jobsPerSec: span > 0 ? (all.jobs / span) * 1000 : 0 };
}

export function calibrate(input: CalibrationInput): Calibration {
  const perPass = profileService(input.profile);
  const maxBatch = Math.max(1, Math.floor(input.maxBatchRows / input.rowsPerJob));
  const withOverhead = (overheadMs: number) => (jobs: number) => perPass(jobs * input.rowsPerJob) + jobs * overheadMs;
  const sim = (jobs: readonly MeasuredJob[], overheadMs: number) =>
    simulateArrivals(
      jobs.map((j) => j.arrivedMs),
      input.workers,
      withOverhead(overheadMs),
      maxBatch,
    );
  const run = (overheadMs: number) => ({
    replay: figures(sim(input.replay, overheadMs)),
    drain: drainFigures(input.drains.map((b) => sim(b, overheadMs))),
  });
  const measured = { replay: figures(input.replay), drain: drainFigures(input.drains) };
  const profileOnly = run(0);
  // Per worker, a job takes workers / rate seconds; the overhead is what the profile misses.
  const m = measured.drain.jobsPerSec;
  const p = profileOnly.drain.jobsPerSec;
  const jobOverheadMs = m > 0 && p > 0 ? Math.max(0, (input.workers / m - input.workers / p) * 1000) : 0;
  const fitted = { jobOverheadMs, ...run(jobOverheadMs) };
  return { measured, profileOnly, fitted, rows: comparisonRows(measured, profileOnly, fitted) };
}

function comparisonRows(
  measured: Calibration['measured'],
  profileOnly: Calibration['profileOnly'],
  fitted: Calibration['fitted'],
): ComparisonRow[] {
  const row = (what: string, pick: (f: { replay: RunFigures; drain: RunFigures }) => number): ComparisonRow => ({
    what,
    measured: pick(measured),
    profileOnly: pick(profileOnly),
    fitted: pick(fitted),
  });
  return [
    row('service rate, drain (jobs/s)', (f) => f.drain.jobsPerSec),
    row('replay throughput (jobs/s)', (f) => f.replay.jobsPerSec),
    ...(['p50', 'p95', 'p99'] as const).map((q) => row(`replay queue wait ${q} (ms)`, (f) => f.replay.queueWaitMs[q])),
    ...(['p50', 'p95', 'p99'] as const).map((q) => row(`replay time to result ${q} (ms)`, (f) => f.replay.resultMs[q])),
  ];
}
