/**
 * A bank of random worlds (issue 28 §4): traffic nobody fitted a constant to, for judging scaling
 * policies. World i of a bank with seed S depends on (i, S) only, so a bank of 20 is the first 20
 * of a bank of 200, and a seed never tuned on is a fresh test.
 *
 * A world is a family of arrival process (round-robin by index, so each is equally represented)
 * with random parameters, crossed with a random cold start, SLO and service (job size, batch).
 * Each family draws a per-minute intensity λ(t) and then Poisson counts from it (Hawkes draws its
 * counts as it goes, since its intensity depends on them). Intensities are scaled so the trace's
 * mean is the drawn mean rate; the family decides only the shape.
 *
 * Everything is per minute (no per-job work): 200 worlds of four days is about a million minutes.
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { seededRandom } from '../kernel/seeded-random.ts';
import type { ArrivalPattern } from './arrivals.ts';
import type { Trace } from './trace.ts';

export const BANK_FAMILIES = ['diurnal', 'mmpp', 'hawkes', 'flash-crowd', 'ramp', 'on-off', 'sparse-heavy'] as const;
export type BankFamily = (typeof BANK_FAMILIES)[number];

export interface BankWorld {
  /** e.g. `w017-hawkes`: index (3 digits) and family; unique within a bank. */
  name: string;
  family: BankFamily;
  /** The family's drawn parameters, for the report (plain numbers, rounded sensibly). */
  params: Record<string, number>;
  /** Per-minute counts from a Monday-based epoch plus a random start day, so weekly phase is real. */
  trace: Trace;
  /** Within-minute spread: Poisson, or gamma with cv 1–3 for the bursty families. */
  pattern: ArrivalPattern;
  /** Log-uniform 10 – 600 s. */
  coldStartS: number;
  /** Log-uniform 1 – 300 s. */
  sloS: number;
  /** Service: one worker's rows/s at full batch, the batch size, and a fixed per-job overhead (ms). */
  workerRps: number;
  maxBatch: number;
  jobOverheadMs: number;
  /** Length of the trace in days. */
  days: number;
}

interface WorldOptions {
  /** Length of each world; default 4 (two of history, two scored: the runner splits at half). */
  days?: number;
}

const DEFAULT_DAYS = 4;
const DAY_MIN = 1440;
const DAY_MS = 86_400_000;
/** Monday 5 January 2026, 00:00 UTC: a world starts `startDay` days after it (0 = Monday). */
const EPOCH_MS = Date.UTC(2026, 0, 5);

/** Ranges of the issue: cold start 10 s – 10 min, SLO 1 s – 5 min, both log-uniform. */
const COLD_START_S: Range = [10, 600];
const SLO_S: Range = [1, 300];
/** Mean jobs/s: up to 20/s keeps a four-day world under ~7 M jobs; sparse-heavy is a job every 20 s – 8 min. */
const MEAN_RPS: Range = [0.05, 20];
const SPARSE_MEAN_RPS: Range = [0.002, 0.05];
/** Within-minute gamma cv of the bursty families: 1 is Poisson-like, 3 is ServeGen-like bursts and beyond. */
const BURST_CV: Range = [1, 3];
const BURSTY: ReadonlySet<BankFamily> = new Set(['mmpp', 'hawkes', 'flash-crowd', 'on-off']);

/** Service: 70 % of worlds short and batched, the rest long one-at-a-time jobs (a GPU serving a large model). */
const SHORT_SHARE = 0.7;
const BATCH_SIZES = [1, 2, 4, 8, 16, 32] as const;
const SHORT_WORKER_RPS: Range = [2, 400];
/** Short jobs: workers at the peak minute, log-uniform (a pool of one to tens). */
const SHORT_PEAK_WORKERS: Range = [1, 64];
/** What keeps a short job short: its full batch takes at most this long. */
const SHORT_BATCH_MAX_S = 10;
const SHORT_OVERHEAD_MS: Range = [0, 20];
const LONG_JOB_S: Range = [2, 60];
/** Above this many workers at the mean a replay gets slow and says nothing new: the worker is made faster. */
const MAX_WORKERS_AT_MEAN = 200;

/** The diurnal family: a daily swing of up to ±90 %, weekends down to 30 % of a weekday. */
const DIURNAL_AMPLITUDE = 0.9;
const DIURNAL_WEEKEND = 0.3;
/** The daily cycle under the other families (and half the sparse ones): present but not the point. */
const MILD_AMPLITUDE = 0.3;
const MILD_WEEKEND = 0.7;
const SPARSE_AMPLITUDE = 0.5;

type Random = () => number;
/** [low, high] of a draw. */
type Range = readonly [number, number];
type Params = Record<string, number>;

/** What a family is given: the trace's length, its first day of the week, and the mean jobs per minute. */
interface Frame {
  minutes: number;
  startDay: number;
  perMinute: number;
}

interface Drawn {
  counts: number[];
  params: Params;
}

export function generateBank(n: number, seed: number, o: WorldOptions = {}): BankWorld[] {
  if (!Number.isInteger(n) || n < 0) throw new InvalidInputError('invalid_bank', `bank size must be a whole number ≥ 0, not ${n}`);
  return Array.from({ length: n }, (_, i) => generateWorld(i, seed, o));
}

export function generateWorld(index: number, seed: number, o: WorldOptions = {}): BankWorld {
  if (!Number.isInteger(index) || index < 0)
    throw new InvalidInputError('invalid_bank', `world index must be a whole number ≥ 0, not ${index}`);
  const minutes = Math.round((o.days ?? DEFAULT_DAYS) * DAY_MIN);
  if (!(minutes >= 1)) throw new InvalidInputError('invalid_bank', `a world needs at least a minute, not ${o.days} days`);
  const family = BANK_FAMILIES[index % BANK_FAMILIES.length] as BankFamily;
  // Two streams, so how many draws a family makes never shifts the cold start, SLO or service.
  const world = seededRandom(worldSeed(seed, index, 1));
  const arrivals = seededRandom(worldSeed(seed, index, 2));
  const startDay = Math.floor(world() * 7);
  const meanRps = logUniform(world, ...(family === 'sparse-heavy' ? SPARSE_MEAN_RPS : MEAN_RPS));
  const cv = BURSTY.has(family) ? uniform(world, ...BURST_CV) : undefined;
  const coldStartS = logUniform(world, ...COLD_START_S);
  const sloS = logUniform(world, ...SLO_S);
  const { counts, params } = FAMILIES[family](arrivals, { minutes, startDay, perMinute: meanRps * 60 });
  const rows = counts.reduce((a, b) => a + b, 0);
  const service = fitToLoad(drawService(world, family), rows / minutes / 60, counts.reduce((a, b) => Math.max(a, b), 0) / 60);
  return {
    name: `w${String(index).padStart(3, '0')}-${family}`,
    family,
    params: rounded({ meanRps, startDay, ...(cv === undefined ? {} : { cv }), ...params, ...service.params }),
    trace: { series: { startMs: EPOCH_MS + startDay * DAY_MS, perMinute: counts }, missing: new Array<boolean>(minutes).fill(false), rows },
    pattern: cv === undefined ? { kind: 'poisson' } : { kind: 'gamma', cv: round(cv) },
    coldStartS: round(coldStartS),
    sloS: round(sloS),
    workerRps: service.workerRps,
    maxBatch: service.maxBatch,
    jobOverheadMs: service.jobOverheadMs,
    days: minutes / DAY_MIN,
  };
}

/** A 32-bit hash of (seed, index, stream): murmur3's finaliser over the three mixed together. */
function worldSeed(seed: number, index: number, stream: number): number {
  let h = Math.imul(seed ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(index + 1, 0xc2b2ae35) ^ Math.imul(stream, 0x27d4eb2f);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const FAMILIES: Record<BankFamily, (r: Random, f: Frame) => Drawn> = {
  diurnal: (r, f) => {
    const cycle = dailyCycle(r, f, DIURNAL_AMPLITUDE, DIURNAL_WEEKEND);
    return { counts: poissonCounts(r, scaledTo(cycle.shape, f.perMinute)), params: cycle.params };
  },
  mmpp,
  hawkes,
  'flash-crowd': flashCrowd,
  ramp,
  'on-off': onOff,
  'sparse-heavy': (r, f) => {
    // Half of them flat, half with a daily cycle.
    const cycle = dailyCycle(r, f, r() < 0.5 ? 0 : SPARSE_AMPLITUDE, MILD_WEEKEND);
    return { counts: poissonCounts(r, scaledTo(cycle.shape, f.perMinute)), params: cycle.params };
  },
};

/** (1 + a·sin(2π(t/1440 − φ))) × w on Saturdays and Sundays; a in [0, maxAmplitude), w in [minWeekend, 1). */
function dailyCycle(r: Random, f: Frame, maxAmplitude: number, minWeekend: number): { shape: Float64Array; params: Params } {
  const amplitude = uniform(r, 0, maxAmplitude);
  const phase = r();
  const weekend = uniform(r, minWeekend, 1);
  const shape = new Float64Array(f.minutes);
  for (let t = 0; t < f.minutes; t++) {
    const dayOfWeek = (f.startDay + Math.floor(t / DAY_MIN)) % 7;
    shape[t] = (1 + amplitude * Math.sin(2 * Math.PI * (t / DAY_MIN - phase))) * (dayOfWeek >= 5 ? weekend : 1);
  }
  return { shape, params: { amplitude, phase, weekend } };
}

/**
 * A 2- or 3-state Markov chain stepped each minute over a mild daily base: the base state lasts
 * 20–600 min on average, each burst state 2–60 min at 2–20× the base; leaving a state goes to
 * one of the others at random.
 */
function mmpp(r: Random, f: Frame): Drawn {
  const base = dailyCycle(r, f, MILD_AMPLITUDE, MILD_WEEKEND);
  const states = r() < 0.5 ? 2 : 3;
  const multiplier = [1];
  const sojournMin = [logUniform(r, 20, 600)];
  for (let s = 1; s < states; s++) {
    multiplier.push(logUniform(r, 2, 20));
    sojournMin.push(logUniform(r, 2, 60));
  }
  let state = Math.floor(r() * states);
  let burstMinutes = 0;
  for (let t = 0; t < f.minutes; t++) {
    base.shape[t] = (base.shape[t] as number) * (multiplier[state] as number);
    if (state > 0) burstMinutes++;
    if (r() < 1 / (sojournMin[state] as number)) state = (state + 1 + Math.floor(r() * (states - 1))) % states;
  }
  const params: Params = { ...base.params, states, burstShare: burstMinutes / f.minutes };
  for (let s = 0; s < states; s++) {
    if (s > 0) params[`multiplier${s}`] = multiplier[s] as number;
    params[`sojournMin${s}`] = sojournMin[s] as number;
  }
  return { counts: poissonCounts(r, scaledTo(base.shape, f.perMinute)), params };
}

/**
 * Discrete-time Hawkes over *events*: e_t ~ Poisson(μ(t) + α·Σ_{s<t} exp(−(t−s)/τ)·e_s), kept in
 * O(T) by a running decayed sum; each event brings Poisson(J) jobs in its minute. Branching ratio
 * b = α·Σ_{k≥1} exp(−k/τ) in 0.3–0.9, τ 1–30 min, μ = events·(1 − b) over a mild daily cycle, so
 * the long-run mean is the drawn one. Why events: a Hawkes process of single jobs at hundreds a
 * minute is a sum of many small clusters, hence nearly Poisson; 1–30 events a minute, each a
 * burst of J = mean/events jobs, keeps the bursts visible at any rate (J ≥ 1: at low rates it is
 * a plain Hawkes process of jobs).
 */
function hawkes(r: Random, f: Frame): Drawn {
  const base = dailyCycle(r, f, MILD_AMPLITUDE, 1);
  const branching = uniform(r, 0.3, 0.9);
  const tauMin = logUniform(r, 1, 30);
  const eventsPerMin = Math.min(logUniform(r, 1, 30), f.perMinute);
  const jobsPerEvent = f.perMinute / eventsPerMin;
  const decay = Math.exp(-1 / tauMin);
  const alpha = (branching * (1 - decay)) / decay;
  const mu = scaledTo(base.shape, eventsPerMin * (1 - branching));
  const counts = new Array<number>(f.minutes);
  let excitation = 0; // Σ_{s<t} exp(−(t−s)/τ)·e_s
  for (let t = 0; t < f.minutes; t++) {
    const events = poisson(r, (mu[t] as number) + alpha * excitation);
    counts[t] = poisson(r, events * jobsPerEvent);
    excitation = decay * (excitation + events);
  }
  return { counts, params: { ...base.params, branching, tauMin, eventsPerMin, jobsPerEvent } };
}

/**
 * A mild daily base times spikes: Poisson-many (1–4 a day on average, at least one per trace),
 * each multiplying the rate by 5–50 at its top, reached linearly in 1–5 min, then decaying with a
 * time constant of 5–60 min.
 */
function flashCrowd(r: Random, f: Frame): Drawn {
  const base = dailyCycle(r, f, MILD_AMPLITUDE, MILD_WEEKEND);
  const spikesPerDay = uniform(r, 1, 4);
  const spikes = Math.max(1, poisson(r, (spikesPerDay * f.minutes) / DAY_MIN));
  const boost = new Float64Array(f.minutes);
  let largest = 0;
  let decaySum = 0;
  for (let k = 0; k < spikes; k++) {
    const at = Math.floor(r() * f.minutes);
    const multiplier = logUniform(r, 5, 50);
    const riseMin = uniform(r, 1, 5);
    const decayMin = logUniform(r, 5, 60);
    // Past 10 time constants a spike adds under 0.005 % of its top: stop there.
    const end = Math.min(f.minutes, at + Math.ceil(riseMin + 10 * decayMin));
    for (let t = at; t < end; t++) {
      const since = t - at + 1;
      const height = since <= riseMin ? since / riseMin : Math.exp(-(since - riseMin) / decayMin);
      boost[t] = (boost[t] as number) + (multiplier - 1) * height;
    }
    largest = Math.max(largest, multiplier);
    decaySum += decayMin;
  }
  for (let t = 0; t < f.minutes; t++) base.shape[t] = (base.shape[t] as number) * (1 + (boost[t] as number));
  const params = { ...base.params, spikesPerDay, spikes, largestMultiplier: largest, meanDecayMin: decaySum / spikes };
  return { counts: poissonCounts(r, scaledTo(base.shape, f.perMinute)), params };
}

/** A mild daily base times a trend from 1 to r over the trace (r log-uniform 1/3 – 3), linear or exponential. */
function ramp(r: Random, f: Frame): Drawn {
  const base = dailyCycle(r, f, MILD_AMPLITUDE, MILD_WEEKEND);
  const ratio = logUniform(r, 1 / 3, 3);
  const exponential = r() < 0.5;
  const last = Math.max(1, f.minutes - 1);
  for (let t = 0; t < f.minutes; t++) {
    const trend = exponential ? ratio ** (t / last) : 1 + ((ratio - 1) * t) / last;
    base.shape[t] = (base.shape[t] as number) * trend;
  }
  const params = { ...base.params, ratio, exponential: exponential ? 1 : 0 };
  return { counts: poissonCounts(r, scaledTo(base.shape, f.perMinute)), params };
}

/**
 * Alternating on and off periods, their lengths Pareto (one shape 1.2–2: long tails; a minimum of
 * 2–30 min each for on and off; capped at a day), starting on. Nothing arrives while off; while
 * on, the rate is the mean over the trace's realised duty cycle.
 */
function onOff(r: Random, f: Frame): Drawn {
  const shape = uniform(r, 1.2, 2);
  const onMin = uniform(r, 2, 30);
  const offMin = uniform(r, 2, 30);
  const intensity = new Float64Array(f.minutes);
  let on = true;
  let onMinutes = 0;
  for (let t = 0; t < f.minutes; on = !on) {
    const length = Math.min(DAY_MIN, Math.ceil((on ? onMin : offMin) * (1 - r()) ** (-1 / shape)));
    const end = Math.min(f.minutes, t + length);
    if (on) intensity.fill(1, t, end);
    if (on) onMinutes += end - t;
    t = end;
  }
  const params = { shape, onMin, offMin, duty: onMinutes / f.minutes };
  return { counts: poissonCounts(r, scaledTo(intensity, f.perMinute)), params };
}

interface Service {
  workerRps: number;
  maxBatch: number;
  jobOverheadMs: number;
  long: boolean;
  /** Short jobs: the workers the peak minute needs, drawn; the speed follows from it (fitToLoad). */
  peakWorkers?: number;
}

function drawService(r: Random, family: BankFamily): Service {
  const short = r() < SHORT_SHARE && family !== 'sparse-heavy';
  if (!short) return { workerRps: 1 / logUniform(r, ...LONG_JOB_S), maxBatch: 1, jobOverheadMs: 0, long: true };
  const maxBatch = BATCH_SIZES[Math.floor(r() * BATCH_SIZES.length)] as number;
  const jobOverheadMs = round(uniform(r, ...SHORT_OVERHEAD_MS));
  return {
    workerRps: logUniform(r, ...SHORT_WORKER_RPS),
    maxBatch,
    jobOverheadMs,
    long: false,
    peakWorkers: logUniform(r, ...SHORT_PEAK_WORKERS),
  };
}

/**
 * The worker's speed bent so the world needs at least one worker at its peak minute (a faster
 * one would idle even then, and the world would ask a scaler nothing but whether to keep one)
 * and at most MAX_WORKERS_AT_MEAN at its mean. A worker spends 1/workerRps + overhead seconds
 * per row at full batch (service.ts, compare.ts serviceModel).
 */
function fitToLoad(s: Service, meanRps: number, peakRps: number): Omit<Service, 'long'> & { params: Params } {
  const overheadS = s.jobOverheadMs / 1000;
  let secondsPerRow = 1 / s.workerRps + overheadS;
  // A drawn speed against a drawn rate mostly lands on one worker at the peak; short jobs take the
  // pool's size at the peak as drawn instead, so the bank spans pools of one to tens of workers —
  // as far as their batches stay short: a full batch within SHORT_BATCH_MAX_S.
  if (s.peakWorkers !== undefined && peakRps > 0) {
    const slowest = SHORT_BATCH_MAX_S / s.maxBatch;
    secondsPerRow = Math.max(secondsPerRow, Math.min(slowest, s.peakWorkers / peakRps));
  }
  if (peakRps > 0 && peakRps * secondsPerRow < 1) secondsPerRow = 1 / peakRps;
  // A short job stays short even where that leaves its one worker idle at the peak (scale to zero).
  if (s.peakWorkers !== undefined) secondsPerRow = Math.min(secondsPerRow, Math.max(overheadS * 1.01, SHORT_BATCH_MAX_S / s.maxBatch));
  if (meanRps * secondsPerRow > MAX_WORKERS_AT_MEAN) secondsPerRow = MAX_WORKERS_AT_MEAN / meanRps;
  const workerRps = round(1 / (secondsPerRow - overheadS));
  const perRow = 1 / workerRps + overheadS;
  const params = { longJobs: s.long ? 1 : 0, realisedRps: meanRps, workersAtMean: meanRps * perRow, workersAtPeak: peakRps * perRow };
  return { workerRps, maxBatch: s.maxBatch, jobOverheadMs: s.jobOverheadMs, params };
}

/** λ scaled so its mean is `mean` (all zeros stays all zeros). */
function scaledTo(shape: Float64Array, mean: number): Float64Array {
  const total = shape.reduce((a, b) => a + b, 0);
  const k = total > 0 ? (mean * shape.length) / total : 0;
  return shape.map((x) => x * k);
}

function poissonCounts(r: Random, lambda: Float64Array): number[] {
  return Array.from(lambda, (mean) => poisson(r, mean));
}

/** Above this mean a rounded normal replaces inversion: its skew, 1/√mean, is then under 0.15. */
const POISSON_NORMAL_ABOVE = 50;

/** A Poisson draw: inversion (exact) for small means, a rounded normal clamped at 0 above. */
function poisson(r: Random, mean: number): number {
  if (!(mean > 0)) return 0;
  if (mean > POISSON_NORMAL_ABOVE) return Math.max(0, Math.round(mean + Math.sqrt(mean) * normal(r)));
  const u = r();
  let k = 0;
  let p = Math.exp(-mean);
  let cdf = p;
  // `p > 0`: should rounding leave the cdf just under u, the terms underflow and the walk stops.
  while (u > cdf && p > 0) {
    k++;
    p *= mean / k;
    cdf += p;
  }
  return k;
}

/** Box–Muller: one standard normal from two uniforms. */
function normal(r: Random): number {
  return Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
}

function uniform(r: Random, lo: number, hi: number): number {
  return lo + (hi - lo) * r();
}

function logUniform(r: Random, lo: number, hi: number): number {
  return lo * (hi / lo) ** r();
}

/** Four significant digits: enough for a report, and no float noise in it. */
function round(x: number): number {
  return Number(x.toPrecision(4));
}

function rounded(p: Params): Params {
  return Object.fromEntries(Object.entries(p).map(([k, v]) => [k, round(v)]));
}
