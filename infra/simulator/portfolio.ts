/**
 * The self-tuning portfolio (issue 28 §1): replay a deployment's recent window, as measured,
 * through a few candidate policies and adopt the cheapest that met the SLO target on it.
 *
 * Why it generalises: no constant here is fitted to a trace. Each candidate is scored on the
 * traffic the deployment actually got, with the world it measured — its own cold starts (the
 * replay draws them from the pool's recent launches), its per-worker rate and batch, the
 * within-minute burstiness its per-tick counts showed — so the choice tracks the best of the
 * portfolio in hindsight, with a lag of one retune. The portfolio holds the simple policies a user
 * would otherwise run (a queue-length scaler at three targets, the cheapest fixed fleet that met
 * the target on the window), so in steady traffic the adopted policy is never worse than the best
 * of them by more than what the traffic changed in one window; the predictive variants are what
 * can beat them, when the forecaster sees a ramp coming.
 *
 * The window (`tuningWindow`): the shortest span of whole hours, from one hour to a day, that
 * holds at least WINDOW_MISSES_EXPECTED / (1 − target) jobs, i.e. about 20 misses at the target:
 * an attainment of 99 % measured over fewer jobs than 2,000 cannot tell 98.5 % from 99.5 %. A
 * sparse deployment gets a day (and then retunes less often, see self-tuning.ts); a busy one an
 * hour, which follows a change in the traffic's character within the hour.
 *
 * The choice (`chooseCandidate`), with hysteresis so it does not flip on noise:
 *   - the current candidate missed the target on the window: the cheapest that met it;
 *   - it met it: another only when that one met it too and costs SWITCH_SAVING less;
 *   - none met it: the one with the best attainment (the cheaper on a tie): the window was
 *     harder than every candidate, and the one closest to the target errs towards capacity.
 *
 * CPU: candidates replay cheapest first (fixed, reactive, then predictive, which run the
 * forecaster; their forecasts are shared, one per minute for all of them), and once the budget is
 * spent the rest are left out of the choice (`partial` in the table), never half-scored.
 */
import type { ArrivalSeries, Candidate, CandidateScore, PolicySettings, TuningChoice, TuningRequest } from '../contracts/pool.ts';
import type { ArrivalPattern } from './arrivals.ts';
import { candidatePolicy, type ForecastCache, type PolicyContext } from './policies.ts';
import { linearService } from './service.ts';
import { MINUTE_MS, simulate, type WorldOptions } from './world.ts';

/** Misses a window must be expected to hold at the target for its attainment to mean something. */
export const WINDOW_MISSES_EXPECTED = 20;
export const WINDOW_MIN_MINUTES = 60;
export const WINDOW_MAX_MINUTES = 1440;
/** A met candidate replaces a met current one only when this much cheaper on the window. */
export const SWITCH_SAVING = 0.05;

/** What a retune knows (contracts/pool.ts TuningRequest), and how it reads its own CPU time. */
export interface TuningInput extends TuningRequest {
  /** CPU time used so far by this thread, ms (tuner-thread.ts reads the thread's own). */
  cpuMs: () => number;
  /**
   * Forecasts to reuse (minute and horizon → forecast): the forecaster reads only minutes before
   * the one it is asked at, so a forecast made on any longer cut of the same history is the same.
   */
  forecasts?: ForecastCache;
}

/** [from, to) minutes of `series` to replay: whole minutes before now, enough jobs for the target. */
export function tuningWindow(series: ArrivalSeries, now: number, target: number): { from: number; to: number } | undefined {
  const to = Math.min(series.perMinute.length, Math.floor((now - series.startMs) / MINUTE_MS));
  if (to < WINDOW_MIN_MINUTES) return undefined;
  const wanted = WINDOW_MISSES_EXPECTED / Math.max(1e-6, 1 - target);
  let jobs = 0;
  let from = to;
  while (from > Math.max(0, to - WINDOW_MAX_MINUTES)) {
    from--;
    jobs += series.perMinute[from] ?? 0;
    const span = to - from;
    if (span >= WINDOW_MIN_MINUTES && span % 60 === 0 && jobs >= wanted) break;
  }
  return jobs > 0 ? { from, to } : undefined;
}

/** The candidates for a deployment: predictive variants, reactive at three targets, a fixed fleet. */
export function portfolio(input: Pick<TuningInput, 'perWorkerRatePerSec' | 'settings'>, fixedWorkers: number): Candidate[] {
  const mu = input.perWorkerRatePerSec;
  // The reactive targets: what one worker clears in half the SLO (the baseline's own), ÷4 and ×4.
  const perReplica = Math.max(1, (mu * input.settings.sloQueueWaitMs) / 2000);
  const lifetime = input.settings.minLifetimeColdStarts ?? 1;
  return [
    { kind: 'fixed', name: 'fixed', workers: fixedWorkers },
    ...[0.25, 1, 4].map((k): Candidate => ({ kind: 'reactive', name: `reactive-x${k}`, backlogPerWorker: perReplica * k })),
    { kind: 'predictive', name: 'predictive', overrides: {} },
    { kind: 'predictive', name: 'predictive-margin', overrides: { capacityMargin: 0.25 } },
    { kind: 'predictive', name: 'predictive-standby', overrides: { standby: input.settings.standby + 1 } },
    { kind: 'predictive', name: 'predictive-long-hold', overrides: { minLifetimeColdStarts: lifetime * 3 } },
    { kind: 'predictive', name: 'predictive-short-hold', overrides: { minLifetimeColdStarts: lifetime / 3 } },
  ];
}

export function chooseCandidate(scores: readonly CandidateScore[], current: string | undefined): { name: string; why: string } | undefined {
  const scored = scores.filter((s) => !s.partial && s.jobs > 0);
  if (scored.length === 0) return undefined;
  const met = scored.filter((s) => s.met).sort((a, b) => a.cost - b.cost);
  const mine = scored.find((s) => s.name === current);
  const cheapest = met[0];
  if (!cheapest) {
    const best = [...scored].sort((a, b) => b.attainment - a.attainment || a.cost - b.cost)[0] as CandidateScore;
    return { name: best.name, why: `no candidate met the target on the window: ${best.name} came closest (${pct(best.attainment)})` };
  }
  if (!mine) return { name: cheapest.name, why: `${cheapest.name} is the cheapest that met the target (${pct(cheapest.attainment)})` };
  if (!mine.met) {
    return {
      name: cheapest.name,
      why: `${mine.name} missed the target (${pct(mine.attainment)}): ${cheapest.name} is the cheapest that met it`,
    };
  }
  if (cheapest.name !== mine.name && cheapest.cost <= mine.cost * (1 - SWITCH_SAVING)) {
    return {
      name: cheapest.name,
      why: `${cheapest.name} met the target at ${ratio(cheapest.cost / mine.cost)} the cost of ${mine.name}`,
    };
  }
  return { name: mine.name, why: `${mine.name} met the target and nothing met it ${Math.round(SWITCH_SAVING * 100)} % cheaper` };
}

/** One retune: the window, the candidates replayed within the budget, the choice. Undefined: too little history. */
export function retune(input: TuningInput): TuningChoice | undefined {
  const startCpu = input.cpuMs();
  const window = tuningWindow(input.series, input.now, input.sloTarget);
  if (!window || !(input.perWorkerRatePerSec > 0)) return undefined;
  const counts = input.series.perMinute.slice(0, window.to).map((n) => Math.max(0, Math.round(n)));
  const series: ArrivalSeries = { startMs: input.series.startMs, perMinute: counts };
  const mu = input.perWorkerRatePerSec;
  const serviceMs = linearService(mu, Math.max(1, input.maxBatch));
  const ctx: PolicyContext = {
    series,
    missing: [...(input.missing ?? [])].slice(0, window.to),
    workerRate: mu,
    batchMs: serviceMs(Math.max(1, input.maxBatch)),
    maxBatch: Math.max(1, input.maxBatch),
    tickMs: input.tickMs,
    fromMinute: window.from,
  };
  const colds = input.coldStartsMs.filter((ms) => Number.isFinite(ms) && ms >= 0);
  const world: WorldOptions = {
    counts,
    startMs: series.startMs,
    fromMinute: window.from,
    toMinute: window.to,
    pattern: patternOf(input.dispersion),
    seed: input.seed ?? 1,
    // The n-th launch of every candidate draws the same measured cold start (common random numbers).
    coldStartMs: colds.length > 0 ? (n: number) => colds[(n * 7919) % colds.length] as number : input.settings.coldStartMs,
    activateMs: 1_000,
    maxBatch: Math.max(1, input.maxBatch),
    serviceMs,
    tickMs: input.tickMs,
    sloMs: input.settings.sloQueueWaitMs,
  };
  const forecasts: ForecastCache = input.forecasts ?? new Map();
  const table: CandidateScore[] = [];
  const replay = (candidate: Candidate): CandidateScore => {
    const run = simulate(candidatePolicy(ctx, input.settings, candidate, { forecasts }), world);
    const ws = run.workerSeconds;
    return {
      name: candidate.name,
      kind: candidate.kind,
      cost: ws.active + ws.starting + ws.standby,
      attainment: run.sloAttainment,
      coldStarts: run.coldStarts,
      jobs: run.jobs,
      met: run.sloAttainment >= input.sloTarget,
    };
  };
  const overBudget = () => input.cpuMs() - startCpu > input.cpuBudgetMs;
  const fixed = cheapestFixedFleet(counts.slice(window.from), mu, input.settings, replay, overBudget);
  if (fixed) table.push(fixed.score);
  const candidates = portfolio(input, fixed?.workers ?? peakFleet(counts.slice(window.from), mu, input.settings));
  for (const candidate of candidates) {
    if (candidate.kind === 'fixed') continue;
    if (overBudget())
      table.push({ name: candidate.name, kind: candidate.kind, cost: 0, attainment: 0, coldStarts: 0, jobs: 0, met: false, partial: true });
    else table.push(replay(candidate));
  }
  const choice = chooseCandidate(table, input.current);
  if (!choice) return undefined;
  const chosen = [...candidates, ...(fixed ? [fixed.candidate] : [])].find((c) => c.name === choice.name) as Candidate;
  return {
    at: input.now,
    fromMs: series.startMs + window.from * MINUTE_MS,
    toMs: series.startMs + window.to * MINUTE_MS,
    chosen,
    ...(input.current ? { previous: input.current } : {}),
    why: choice.why,
    table,
    cpuMs: Math.round(input.cpuMs() - startCpu),
  };
}

/** Workers a fixed fleet needs for the window's peak minute (the static-peak sizing), within min and max. */
function peakFleet(counts: readonly number[], mu: number, s: PolicySettings): number {
  const peak = counts.reduce((m, n) => Math.max(m, n), 0);
  return clampFleet(Math.ceil(peak / 60 / mu - 1e-9), s);
}

function clampFleet(n: number, s: PolicySettings): number {
  return Math.min(Math.max(1, s.max), Math.max(1, s.min, n));
}

/**
 * The smallest fixed fleet that met the target on the window, by bisection between the mean's
 * need and the peak minute's (attainment grows with the fleet); the peak's when even it missed.
 */
function cheapestFixedFleet(
  counts: readonly number[],
  mu: number,
  s: PolicySettings,
  replay: (c: Candidate) => CandidateScore,
  overBudget: () => boolean,
): { workers: number; score: CandidateScore; candidate: Candidate } | undefined {
  const mean = counts.reduce((t, n) => t + n, 0) / Math.max(1, counts.length);
  let lo = clampFleet(Math.ceil(mean / 60 / mu - 1e-9), s) - 1;
  let hi = peakFleet(counts, mu, s);
  // One name for every size, so the hysteresis compares the fleet in force with this window's.
  const make = (workers: number): Candidate => ({ kind: 'fixed', name: 'fixed', workers });
  let best = { workers: hi, score: replay(make(hi)), candidate: make(hi) };
  if (!best.score.met) return best;
  while (hi - lo > 1 && !overBudget()) {
    const mid = Math.floor((lo + hi) / 2);
    const score = replay(make(mid));
    if (score.met) {
      hi = mid;
      best = { workers: mid, score, candidate: make(mid) };
    } else lo = mid;
  }
  return best;
}

/** Gamma placement with the CV the per-tick counts showed (a renewal process's counts have dispersion ≈ CV²), else Poisson. */
export function patternOf(dispersion: number | undefined): ArrivalPattern {
  if (dispersion === undefined || !Number.isFinite(dispersion) || dispersion <= 1.2) return { kind: 'poisson' };
  return { kind: 'gamma', cv: Math.min(4, Math.sqrt(dispersion)) };
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
const ratio = (x: number) => `${x.toFixed(2)}×`;
