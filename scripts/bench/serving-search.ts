/**
 * `serving_efficiency`'s numerator, as MLPerf's Server scenario defines it: the highest rate of
 * single-row requests, offered open loop, whose p99 submit → succeeded stays within a bound.
 *
 * A few short runs search for it. The first offers the closed-loop maximum; a run that keeps
 * the bound (and loses no request) raises the rate by `up` until one does not, one that misses
 * it lowers the rate by `down` until one keeps it; then the rate between the highest kept and
 * the lowest missed above it is tried, until they are within `precision` or the runs are spent.
 * A missed run below a kept one (the machine's noise) is not believed over the kept one.
 */
import { measureOpenLoop, type OpenLoopRun, type StackUnderTest } from './e2e.ts';
import { planLatencyRun } from './stats.ts';

export interface ServingTrial {
  ratePerS: number;
  p99Ms: number;
  /** p99 within the bound, every request accepted and succeeded. */
  kept: boolean;
}

export interface SearchOptions {
  /** Runs at most. */
  steps: number;
  /** Stop when the lowest missed rate is within this share above the highest kept. */
  precision?: number;
  up?: number;
  down?: number;
}

/** The highest rate kept so far; NaN when none was. */
export function bestKeptRate(trials: readonly ServingTrial[]): number {
  const kept = trials.filter((t) => t.kept).map((t) => t.ratePerS);
  return kept.length > 0 ? Math.max(...kept) : NaN;
}

/** The rate to try next, or undefined when the search is done. */
export function nextServingRate(trials: readonly ServingTrial[], start: number, options: SearchOptions): number | undefined {
  const { steps, precision = 0.1, up = 1.25, down = 0.5 } = options;
  if (trials.length >= steps) return undefined;
  if (trials.length === 0) return start;
  const lo = bestKeptRate(trials);
  const missedAbove = trials.filter((t) => !t.kept && !(t.ratePerS <= lo)).map((t) => t.ratePerS);
  const hi = missedAbove.length > 0 ? Math.min(...missedAbove) : NaN;
  if (Number.isNaN(hi)) return lo * up;
  if (Number.isNaN(lo)) return hi * down;
  if (hi <= lo * (1 + precision)) return undefined;
  return (lo + hi) / 2;
}

export interface ServingSearch {
  /** The highest kept rate, requests/s (NaN: none kept). */
  ratePerS: number;
  trials: ServingTrial[];
  /** The run at the highest kept rate. */
  best?: OpenLoopRun;
}

/** Short open-loop runs on `stack` from `start` requests/s, each `durationS` long (at least `minRequests`). */
export async function searchServingRate(
  stack: StackUnderTest,
  start: number,
  options: SearchOptions & { durationS: number; p99BoundMs: number; seed: number; minRequests?: number },
): Promise<ServingSearch> {
  const trials: ServingTrial[] = [];
  let best: OpenLoopRun | undefined;
  let seed = options.seed;
  for (let rate = nextServingRate(trials, start, options); rate !== undefined; rate = nextServingRate(trials, start, options)) {
    const plan = planLatencyRun(rate, { fraction: 1, durationS: options.durationS });
    const amount = Math.max(options.minRequests ?? 200, plan.amount);
    const ratePerS = plan.ratePerS;
    const run = await measureOpenLoop(stack, { ...plan, amount, seed });
    seed += amount;
    const kept = run.latency.p99 <= options.p99BoundMs && run.rejected === 0 && run.failed === 0 && run.latency.count === run.accepted;
    trials.push({ ratePerS, p99Ms: run.latency.p99, kept });
    if (kept && !(ratePerS < bestKeptRate(trials))) best = run;
  }
  return { ratePerS: bestKeptRate(trials), trials, ...(best ? { best } : {}) };
}

/** `300✓ 41 ms, 375✗ 180 ms`: each run's rate, whether it kept the bound, and its p99. */
export function describeTrials(trials: readonly ServingTrial[]): string {
  return trials
    .map((t) => `${Math.round(t.ratePerS)}${t.kept ? '✓' : '✗'} ${Number.isFinite(t.p99Ms) ? Math.round(t.p99Ms) : 'n/a'} ms`)
    .join(', ');
}
