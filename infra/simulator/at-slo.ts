/**
 * The baselines at the SLO target (issue 17 §1): a cost ratio against a baseline that misses the
 * SLO says nothing, so each baseline is also replayed at the cheapest setting of its one knob
 * whose SLO attainment reaches the target, found by bisection:
 *
 * - static-peak → `workers`, the fixed fleet (an integer; the answer is exact);
 * - reactive → `backlogPerWorker`, its per-replica target in waiting jobs (real, bisected in
 *   log scale: fewer jobs per replica is more generous);
 * - oracle → `headroom` h, holding ⌈rate × (1 + h) / full-batch rate⌉ (real; its as-is run holds
 *   rate / 0.9, h ≈ 0.11). With perfect foresight of arrivals and launches a cold start ahead it
 *   meets the target by construction once h is large enough; the report checks that it did.
 *
 * The search: replay the generous end of the range; while it misses, widen it (static: double the
 * fleet up to the policy's max; reactive: a quarter of the jobs per replica, down to 1/256 of its
 * default; oracle: h → 2h + 1, up to 15), and if the widest still misses, the baseline cannot
 * meet the target here — reported as such with the attainment it reached, never with a cost.
 * Then the cheap end (static: 1 worker; reactive: 4 × its default target; oracle: h = 0, each
 * minute's mean rate); while it meets, go cheaper (reactive: 4 × the jobs per replica, up to 256
 * × its default, where only its throughput trigger still acts; oracle: h − 0.25, down to −0.5, a
 * pool below the mean rate whose queue drains after the minute), and where the cheapest end of
 * the range still meets, that is the answer (`missedAt` null: the range, not the target, bounded
 * it). Then halve the interval between the dearest setting that missed and the cheapest that met
 * until the two are adjacent (integers) or within RESOLUTION, at most MAX_RUNS replays per
 * baseline in all. Each replay is a full one, so the figures reported are a setting that was
 * replayed and met the target. Bisection assumes attainment grows with the setting's generosity;
 * where noise breaks that, the setting found meets the target but a cheaper one might too.
 */
import {
  compare,
  type PolicyName,
  type PolicyReport,
  reactiveBacklogPerWorker,
  type SimulationSettings,
  staticPeakWorkers,
} from './compare.ts';
import type { WorkerSeconds } from './recorder.ts';
import { NO_COUNT, type ReplayCounter } from './replay-counter.ts';
import type { Trace } from './trace.ts';

/** The SLO attainment the baselines are sized to when none is given (`--slo-target`, the dashboard). */
export const DEFAULT_SLO_TARGET = 0.99;

/** Replays per baseline, every widening and bisection step included. */
export const MAX_RUNS = 12;

export const AT_SLO_BASELINES = ['static-peak', 'reactive', 'oracle'] as const;

/** Replays baselinesAtSlo() makes at most, every baseline searched (a progress line's plan, replay-counter.ts). */
export const AT_SLO_REPLAYS = AT_SLO_BASELINES.length * MAX_RUNS;
export type AtSloBaseline = (typeof AT_SLO_BASELINES)[number];

/** One baseline at the SLO target (report.json's `atSlo`). */
export interface AtSlo {
  /** Whether some setting tried met the target. */
  met: boolean;
  setting: 'workers' | 'backlogPerWorker' | 'headroom';
  /** The setting's value in the as-is run (static-peak's fleet, reactive's default target, the oracle's 1 / 0.9 − 1). */
  asIs: number;
  /** The cheapest setting that met the target; null when none did. */
  value: number | null;
  /** At `value`; when none met, the best reached (at the most generous setting tried). */
  sloAttainment: number;
  /** At `value`; null when none met (no cost pretends to be at the SLO). */
  workerSeconds: WorkerSeconds | null;
  cost: number | null;
  /** The cheapest-side neighbour that missed the target (null: the cheapest setting searched met it). */
  missedAt: number | null;
  /** Replays this search took. */
  runs: number;
  /** Why there is no setting, when there is none. */
  reason?: string;
}

export interface AtSloReport {
  /** The SLO attainment each baseline was sized to reach. */
  target: number;
  maxRuns: number;
  baselines: Partial<Record<AtSloBaseline, AtSlo>>;
}

/** The figures a replay returns (one policy's report, chart series optional). */
export type Figures = Pick<PolicyReport, 'sloAttainment' | 'workerSeconds' | 'cost'>;

/** Replays one policy with these settings (in this thread or on a sweep thread). */
export type Replay = (settings: SimulationSettings, policy: PolicyName) => Promise<Figures>;

interface Knob {
  setting: AtSlo['setting'];
  asIs: number;
  cheap: number;
  generous: number;
  /** The next, wider generous end, or undefined when the range is exhausted. */
  widen(v: number): number | undefined;
  /** The next, cheaper cheap end, or undefined when the range is exhausted. */
  cheaper(v: number): number | undefined;
  /** A setting strictly between two, or undefined when they are close enough. */
  between(a: number, b: number): number | undefined;
  apply(s: SimulationSettings, v: number): SimulationSettings;
}

/** How close a real setting's bracket must be: 2 % of the ratio (reactive), 0.02 of headroom (oracle). */
const RESOLUTION = { ratio: 1.02, headroom: 0.02 };

function knobFor(name: AtSloBaseline, trace: Trace, s: SimulationSettings): Knob {
  if (name === 'static-peak') {
    const max = Math.max(1, s.policy.max);
    const peak = staticPeakWorkers(trace, s);
    return {
      setting: 'workers',
      asIs: peak,
      cheap: 1,
      generous: Math.min(max, peak),
      widen: (v) => (v >= max ? undefined : Math.min(max, v * 2)),
      cheaper: () => undefined,
      between: (a, b) => (Math.abs(a - b) <= 1 ? undefined : Math.floor((a + b) / 2)),
      apply: (x, v) => ({ ...x, staticWorkers: v }),
    };
  }
  if (name === 'reactive') {
    return { ...backlogPerWorkerKnob(reactiveBacklogPerWorker(s)), apply: (x, v) => ({ ...x, reactiveBacklogPerWorker: v }) };
  }
  return { ...headroomKnob(1 / s.oracleUtilization - 1), apply: (x, v) => ({ ...x, oracleUtilization: 1 / (1 + v) }) };
}

/** A queue-length scaler's target (waiting jobs per replica) from `asIs`: ×4 steps, 2 % resolution. */
export function backlogPerWorkerKnob(asIs: number): SettingKnob {
  return {
    setting: 'backlogPerWorker',
    asIs,
    cheap: asIs * 4,
    generous: asIs / 4,
    widen: (v) => (v <= asIs / 256 ? undefined : v / 4),
    cheaper: (v) => (v >= asIs * 256 ? undefined : v * 4),
    between: (a, b) => (Math.max(a, b) / Math.min(a, b) <= RESOLUTION.ratio ? undefined : Math.sqrt(a * b)),
  };
}

/** An oracle's headroom over the true rate, from `asIs`: −0.5 to 15, 0.02 resolution. */
export function headroomKnob(asIs: number): SettingKnob {
  return {
    setting: 'headroom',
    asIs,
    cheap: 0,
    generous: 1,
    widen: (v) => (v >= 15 ? undefined : 2 * v + 1),
    cheaper: (v) => (v <= -0.5 ? undefined : v - 0.25),
    between: (a, b) => (Math.abs(a - b) <= RESOLUTION.headroom ? undefined : (a + b) / 2),
  };
}

/** The cheapest setting of one baseline meeting `target`, by the search in the header. */
export async function baselineAtSlo(
  name: AtSloBaseline,
  trace: Trace,
  s: SimulationSettings,
  target: number,
  replay: Replay,
): Promise<AtSlo> {
  const knob = knobFor(name, trace, s);
  const found = await searchSetting(knob, (v) => replay(knob.apply(s, v), name), target);
  return found.missedAll ? notMet(name, knob, found.ok, found.runs, s) : met(knob, found.ok, found.missed, found.runs);
}

/** A knob's range and steps, for searchSetting (the settings it applies to are the caller's). */
export type SettingKnob = Omit<Knob, 'apply'>;

/**
 * The search in the header over one knob, whatever it sizes (the many-model policies use it too,
 * many-model-compare.ts): `ok` the cheapest setting replayed that met `target`, or with
 * `missedAll` the most generous one tried, which missed.
 */
export async function searchSetting<F extends Figures>(
  knob: SettingKnob,
  replay: (value: number) => Promise<F>,
  target: number,
): Promise<{ ok: { value: number; figures: F }; missed: number | null; runs: number; missedAll: boolean }> {
  let runs = 0;
  const at = async (v: number) => {
    runs++;
    return { value: v, figures: await replay(v) };
  };
  const meets = (f: Figures) => f.sloAttainment >= target;
  let ok = await at(knob.generous);
  let missed: number | null = null;
  for (let wider = knob.widen(ok.value); !meets(ok.figures); wider = knob.widen(ok.value)) {
    if (wider === undefined || runs >= MAX_RUNS) return { ok, missed: ok.value, runs, missedAll: true };
    missed = ok.value;
    ok = await at(wider);
  }
  if (missed === null) {
    let cheap = ok.value === knob.cheap ? ok : await at(knob.cheap);
    while (meets(cheap.figures)) {
      ok = cheap;
      const next = knob.cheaper(cheap.value);
      if (next === undefined || runs >= MAX_RUNS) return { ok, missed: null, runs, missedAll: false };
      cheap = await at(next);
    }
    missed = cheap.value;
  }
  for (let mid = knob.between(missed, ok.value); mid !== undefined && runs < MAX_RUNS; mid = knob.between(missed, ok.value)) {
    const tried = await at(mid);
    if (meets(tried.figures)) ok = tried;
    else missed = mid;
  }
  return { ok, missed, runs, missedAll: false };
}

function met(knob: Knob, ok: { value: number; figures: Figures }, missedAt: number | null, runs: number): AtSlo {
  const f = ok.figures;
  return {
    met: true,
    setting: knob.setting,
    asIs: knob.asIs,
    value: ok.value,
    sloAttainment: f.sloAttainment,
    workerSeconds: f.workerSeconds,
    cost: f.cost,
    missedAt,
    runs,
  };
}

function notMet(name: AtSloBaseline, knob: Knob, best: { value: number; figures: Figures }, runs: number, s: SimulationSettings): AtSlo {
  const pct = `${(best.figures.sloAttainment * 100).toFixed(3)} %`;
  const why =
    name === 'reactive' && s.coldStartMs > s.sloMs
      ? `: it launches after the queue forms, and a cold start (${s.coldStartMs / 1000} s) is longer than the SLO (${s.sloMs / 1000} s)`
      : '';
  return {
    met: false,
    setting: knob.setting,
    asIs: knob.asIs,
    value: null,
    sloAttainment: best.figures.sloAttainment,
    workerSeconds: null,
    cost: null,
    missedAt: best.value,
    runs,
    reason: `${name} cannot meet the target at any ${knob.setting} tried: at its most generous, ${knob.setting} = ${round(best.value)}, it reaches ${pct}${why}`,
  };
}

const round = (x: number) => Number(x.toPrecision(4));

/**
 * Every baseline's search, run side by side (each replay goes to `replay`, e.g. a pool of sweep
 * threads). `counter` hears each replay as it comes back, and, as a search ends, the replays of
 * its MAX_RUNS it did not need.
 */
export async function baselinesAtSlo(
  trace: Trace,
  s: SimulationSettings,
  target: number,
  replay: Replay,
  only: readonly AtSloBaseline[] = AT_SLO_BASELINES,
  counter: ReplayCounter = NO_COUNT,
): Promise<AtSloReport> {
  const counted: Replay = async (settings, policy) => {
    const figures = await replay(settings, policy);
    counter.done();
    return figures;
  };
  const search = async (name: AtSloBaseline) => {
    const found = await baselineAtSlo(name, trace, s, target, counted);
    counter.plan(found.runs - MAX_RUNS);
    return found;
  };
  const found = await Promise.all(only.map(search));
  return { target, maxRuns: MAX_RUNS, baselines: Object.fromEntries(only.map((name, i) => [name, found[i]])) };
}

/** Replays in this thread (tests, small traces); the CLI spreads them over sweep threads (replay-pool.ts). */
export function inThisThread(trace: Trace): Replay {
  return async (settings, policy) => compare(trace, settings, [policy]).policies[0] as PolicyReport;
}

/** Whether the oracle was searched and met the target (it must, by construction; the report says when not). */
export function oracleMeetsTarget(r: AtSloReport): boolean {
  const o = r.baselines.oracle;
  return o?.met === true && o.sloAttainment >= r.target;
}
