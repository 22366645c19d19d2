/**
 * The self-tuning policy in a replay (issue 28 §1): what the live scaler does, so `warmpool
 * simulate` shows what it would have done. It runs the adopted candidate every tick
 * (candidates.ts, through the same driver as every policy here) and, every retune interval,
 * replays the window before now — only minutes already past, so it is walk-forward by
 * construction — through the portfolio (portfolio.ts) with the world as it measured it: the
 * cold starts of its own launches, its measured per-worker rate, the per-tick burstiness.
 *
 * Retunes are spaced as the live controller spaces them (`retuneSpacingMs`, infra/scaler).
 *
 * A replay is deterministic: the CPU budget a live retune has is not applied here (a replay's
 * result must not depend on the machine it ran on); the portfolio's CPU is reported instead.
 */
import type { Candidate, PolicySettings, TuningChoice } from '../contracts/pool.ts';
import { emptyPolicyMemory } from '../contracts/pool.ts';
import { emptyTickDispersion, noteTick, retuneSpacingMs, tickDispersion } from '../scaler/index.ts';
import { BASE_CANDIDATE, candidateDriver, initialPool, type PolicyContext } from './policies.ts';
import { retune, tuningWindow } from './portfolio.ts';
import { MINUTE_MS, type Scaler } from './world.ts';

export interface SelfTuningOptions {
  retuneIntervalMs: number;
  sloTarget: number;
  seed?: number;
}

export interface SelfTuningScaler extends Scaler {
  /** Every retune's choice, in order. */
  choices(): readonly TuningChoice[];
}

export function selfTuningPolicy(ctx: PolicyContext, settings: PolicySettings, o: SelfTuningOptions): SelfTuningScaler {
  const state: { memory: ReturnType<typeof emptyPolicyMemory>; candidate: Candidate } = {
    memory: emptyPolicyMemory(),
    candidate: BASE_CANDIDATE,
  };
  // One forecast cache for the run and every retune's replays (portfolio.ts TuningInput.forecasts).
  const forecasts = new Map();
  const driver = candidateDriver(ctx, settings, state, forecasts);
  const choices: TuningChoice[] = [];
  let dispersion = emptyTickDispersion();
  let nextRetune = Number.NEGATIVE_INFINITY;
  let lastRate = ctx.profileRate ?? ctx.workerRate;
  return {
    name: 'predictive',
    initial: () => initialPool(ctx, settings, BASE_CANDIDATE),
    tick(obs) {
      dispersion = noteTick(dispersion, obs.now, obs.arrivedJobs);
      if (obs.now >= nextRetune) {
        const minute = Math.floor((obs.now - ctx.series.startMs) / MINUTE_MS);
        const past = { startMs: ctx.series.startMs, perMinute: ctx.series.perMinute.slice(0, minute) };
        const choice = retune({
          series: past,
          missing: ctx.missing.slice(0, minute),
          now: obs.now,
          settings,
          sloTarget: o.sloTarget,
          perWorkerRatePerSec: lastRate,
          maxBatch: ctx.maxBatch ?? 1,
          tickMs: ctx.tickMs,
          coldStartsMs: driver.meter.coldStarts(),
          ...(tickDispersion(dispersion) !== undefined ? { dispersion: tickDispersion(dispersion) as number } : {}),
          current: state.candidate.name,
          cpuBudgetMs: Number.POSITIVE_INFINITY,
          cpuMs: () => 0,
          seed: (o.seed ?? 1) + minute,
          forecasts,
        });
        const window = tuningWindow(past, obs.now, o.sloTarget);
        const spanMin = window ? window.to - window.from : 60;
        nextRetune = obs.now + retuneSpacingMs(o.retuneIntervalMs, spanMin * MINUTE_MS);
        if (choice) {
          choices.push(choice);
          state.candidate = choice.chosen;
        }
      }
      const actions = driver.tick(obs);
      lastRate = driver.lastRate();
      return actions;
    },
    plannedRatePerSec: () => driver.planned(),
    choices: () => choices,
  };
}
