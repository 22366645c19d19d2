/**
 * The measured hold (issue 28 §3): how long the pool keeps a surplus worker after demand falls,
 * chosen from the measured gaps between a fall in demand and its return, so a cold start is
 * never paid to save less idle time than it costs. policy.ts rule 5 holds the pool's total at
 * the most it wanted over a window h; this module measures the gaps and picks h.
 *
 * What is measured. Each worker of the pool is a unit k = 1, 2, …; a hold of h keeps unit k while
 * the raw want reached k within the last h (rule 5's window maximum). So unit k's cost over one
 * spell with want < k, lasting G, is G if G ≤ h (held idle throughout), and h + C if G > h
 * (held h, drained, relaunched with a cold start C when the want comes back) — ski rental per
 * unit, with one h for all. The gaps are read from the want, not from the policy's drains: a
 * drain happens only once the hold has expired, so drain-to-launch gaps would be cut by the hold
 * being tuned. A unit's gap opens on the tick its level is first above the want and closes on the
 * first tick the want reaches it again; one sample per unit, as each unit pays its own cold start.
 * The open spells are a staircase: the units above the last want, in ranges by when they fell
 * (older ranges are higher, since the want can only fall below what is already open); it holds at
 * most one range per tick of the horizon and one per unit of the pool, whichever is fewer.
 *
 * The horizon H = RELAUNCH_HORIZON_COLD_STARTS cold starts. A gap still open at H is censored:
 * recorded as its age then (a lower bound) and counted. For every hold h ≤ H such a gap costs h
 * plus a relaunch that every h ≤ H pays alike if it returns, so censoring at H leaves the choice
 * among h ≤ H exact. And H bounds what a cap loses: a hold h* > H pays at least H on each gap past
 * H, while stopping at H costs at most C more on each, so the best h ≤ H is within C/H of the best
 * hold of any length, for any distribution: 1/8 here. A horizon of a day would add nothing to that
 * and keep each long gap out of the sample for a day, while the short ones, finishing first, fill
 * it (a bias toward holding).
 *
 * The choice. h minimises the empirical E[min(G, h)] + C · P(H > G > h), over {0} ∪ the gaps below
 * H ∪ {H}: between two samples the cost only rises (it grows at the share still open), so the
 * best h over all of [0, H] is one of these. A tie goes to the hold with fewer relaunches (equal
 * worker-seconds, fewer cold starts), then to the shorter. No SLO price is added to a relaunch: the want is the forecast's (a cold start
 * ahead), so the relaunch starts when the want returns, in time for the demand; the risk left when
 * the forecast errs is what rules 2–4 and the closed-loop headroom size for and measure, and a
 * multiple of C here would be a second, unmeasured price for it. Lower bounds (the stabilisation
 * window, a tick) belong to the policy, which takes the maximum; 0 here means "as soon as the
 * policy's own rules allow".
 *
 * State (RelaunchHoldState, contracts/pool.ts, plain JSON): `gapsMs` the newest
 * RELAUNCH_GAP_SAMPLES per-unit gaps, censored ones as their age at censoring; `censored` how
 * many units were ever censored (for the log: the window's share is read from the samples, as a
 * lifetime count would outgrow a bounded window); `lastDrainAt` when the oldest open spell began;
 * `open` (one field beyond the contract) the last want, the last tick's time and the staircase.
 */

import type { RelaunchHoldState } from '../contracts/pool.ts';

/**
 * Per-unit gaps kept. Any share the choice reads is known within 1/(2√64) = 1/16 (one standard
 * error at worst), so the relaunch term within C/16; and a pool moving a few units a tick turns
 * 64 over in tens of ticks, the horizon's time scale, not the day's.
 */
export const RELAUNCH_GAP_SAMPLES = 64;
/**
 * Fewer gaps than this and the caller's fallback stands: at 16 a share is known within
 * 1/(2√16) = 1/8, the relaunch term within C/8 — the slack the horizon already allows.
 */
export const RELAUNCH_MIN_SAMPLES = 16;
/** The censoring horizon in cold starts: the best hold up to it is within 1/8 of the best of any length. */
export const RELAUNCH_HORIZON_COLD_STARTS = 8;

/** Units above `want` in ranges: levels[i] covers (levels[i + 1].level, or want, … level], out of the want since `since`. */
export interface OpenSurplus {
  want: number;
  /** The last tick's time (a tick before it means the clock went back). */
  at: number;
  /** Oldest and highest first. */
  levels: Array<{ level: number; since: number }>;
}

export type MeasuredHoldState = RelaunchHoldState & { open?: OpenSurplus };

export interface WantTick {
  now: number;
  /** This tick's raw pool want (before holding), in workers. */
  want: number;
  /** The pool total the policy holds: seeds the surplus on the first tick. */
  held: number;
  coldStartMs: number;
}

/**
 * Folds one tick's want into the state: closes the units the want reached again, opens those it
 * fell below, censors those open a horizon. Returns a new state; the input is not mutated. On a
 * clock gone back the open spells are dropped (their lengths are unknowable) and measuring restarts.
 */
export function noteWant(state: RelaunchHoldState | undefined, tick: WantTick): MeasuredHoldState {
  const gapsMs = samplesOf(state);
  let censored = Number.isFinite(state?.censored) ? Math.max(0, state?.censored ?? 0) : 0;
  const want = units(tick.want);
  const prior = openOf(state);
  if (want === undefined || !Number.isFinite(tick.now)) return build(gapsMs, censored, prior);
  const { now } = tick;
  const restart = prior === undefined || now < prior.at;
  const lastWant = restart ? (prior?.want ?? units(tick.held) ?? want) : prior.want;
  const levels = restart ? [] : prior.levels.map((l) => ({ ...l }));

  // Returns: the lowest ranges first, a range the want only reaches into is split.
  let bottom = lastWant;
  for (let top = levels.at(-1); top !== undefined && want > bottom; top = levels.at(-1)) {
    const reached = Math.min(want, top.level);
    record(gapsMs, now - top.since, reached - bottom);
    if (reached < top.level) break;
    bottom = top.level;
    levels.pop();
  }
  // A fall: every open unit is above the last want, so the new range goes below them all.
  if (want < lastWant) levels.push({ level: lastWant, since: now });
  // Censoring: the oldest (highest) ranges first.
  const horizon = horizonMs(tick.coldStartMs);
  for (let old = levels[0]; old !== undefined && horizon !== undefined && now - old.since >= horizon; old = levels[0]) {
    const count = old.level - (levels[1]?.level ?? want);
    record(gapsMs, now - old.since, count);
    censored += count;
    levels.shift();
  }
  return build(gapsMs, censored, { want, at: now, levels });
}

export interface MeasuredHold {
  holdMs: number;
  samples: number;
  why: string;
}

/** The hold that minimises the expected cost per surplus worker on the measured gaps; `fallbackMs` with too few. */
export function measuredHoldMs(state: RelaunchHoldState | undefined, coldStartMs: number, fallbackMs: number): MeasuredHold {
  const gaps = samplesOf(state);
  const samples = gaps.length;
  const fallback = Number.isFinite(fallbackMs) ? Math.max(0, fallbackMs) : 0;
  const horizon = horizonMs(coldStartMs);
  if (horizon === undefined) {
    return { holdMs: fallback, samples, why: `hold ${dur(fallback)} (fallback): no cold start to weigh the gaps against` };
  }
  if (samples < RELAUNCH_MIN_SAMPLES) {
    return {
      holdMs: fallback,
      samples,
      why: `hold ${dur(fallback)} (fallback): ${samples} measured gaps of ${RELAUNCH_MIN_SAMPLES} needed`,
    };
  }
  const sorted = [...gaps].sort((a, b) => a - b);
  const best = cheapestHold(sorted, coldStartMs, horizon);
  const past = sorted.filter((g) => g >= horizon).length;
  const p50 = sorted[Math.floor((samples - 1) / 2)] ?? 0;
  const beyond = past > 0 ? `, ${past} past the ${dur(horizon)} horizon` : '';
  return {
    holdMs: best.holdMs,
    samples,
    why:
      `hold ${dur(best.holdMs)}: ${samples} measured gaps (p50 ${dur(p50)}${beyond}), a relaunch costs ${dur(coldStartMs)}: ` +
      `${dur(best.costMs)} a surplus worker, ${dur(best.drainNowMs)} draining at once`,
  };
}

/**
 * The expected cost (ms of worker time) per surplus unit of holding `holdMs` on these gaps: idle
 * min(G, h), plus C when the gap returns after the hold and within the horizon. For the decision
 * log and for checking the choice; `gapsMs` need not be sorted.
 */
export function holdCostMs(gapsMs: readonly number[], holdMs: number, coldStartMs: number): number {
  const horizon = horizonMs(coldStartMs) ?? Infinity;
  if (gapsMs.length === 0) return 0;
  const total = gapsMs.reduce((sum, g) => sum + Math.min(g, holdMs) + (g > holdMs && g < horizon ? coldStartMs : 0), 0);
  return total / gapsMs.length;
}

/** One sweep over the sorted gaps: each candidate's total from running sums (O(n), no re-scan). */
function cheapestHold(sorted: readonly number[], coldStartMs: number, horizon: number) {
  const n = sorted.length;
  const returned = sorted.filter((g) => g < horizon).length;
  const candidates = [0, ...new Set(sorted.filter((g) => g < horizon)), horizon];
  let below = 0;
  let sumBelow = 0;
  let best = { holdMs: 0, total: Infinity, relaunches: Infinity };
  let drainNow = 0;
  for (const h of candidates) {
    for (let g = sorted[below]; g !== undefined && g <= h; g = sorted[below]) {
      sumBelow += g;
      below++;
    }
    const relaunches = Math.max(0, returned - below);
    const total = sumBelow + h * (n - below) + coldStartMs * relaunches;
    if (h === 0) drainNow = total;
    // Ascending h: a tie replaces the best only when it saves relaunches (past the last gap a longer hold costs the same).
    if (total < best.total || (total === best.total && relaunches < best.relaunches)) best = { holdMs: h, total, relaunches };
  }
  return { holdMs: best.holdMs, costMs: best.total / n, drainNowMs: drainNow / n };
}

function horizonMs(coldStartMs: number): number | undefined {
  return Number.isFinite(coldStartMs) && coldStartMs > 0 ? RELAUNCH_HORIZON_COLD_STARTS * coldStartMs : undefined;
}

/** Appends `count` copies of one gap (more than the window holds would only be cut again), newest last. */
function record(gapsMs: number[], gapMs: number, count: number): void {
  for (let i = 0; i < Math.min(count, RELAUNCH_GAP_SAMPLES); i++) gapsMs.push(gapMs);
  if (gapsMs.length > RELAUNCH_GAP_SAMPLES) gapsMs.splice(0, gapsMs.length - RELAUNCH_GAP_SAMPLES);
}

function build(gapsMs: number[], censored: number, open: OpenSurplus | undefined): MeasuredHoldState {
  const oldest = open?.levels[0]?.since;
  return { gapsMs, censored, ...(oldest !== undefined ? { lastDrainAt: oldest } : {}), ...(open ? { open } : {}) };
}

/** The persisted gaps, cleaned (finite, non-negative, the newest window). */
function samplesOf(state: RelaunchHoldState | undefined): number[] {
  const gaps = Array.isArray(state?.gapsMs) ? state.gapsMs : [];
  return gaps.filter((g) => typeof g === 'number' && Number.isFinite(g) && g >= 0).slice(-RELAUNCH_GAP_SAMPLES);
}

/** Workers as whole units (a fractional want needs the whole worker); undefined when not a number. */
function units(x: number): number | undefined {
  return Number.isFinite(x) ? Math.max(0, Math.ceil(x)) : undefined;
}

/** The staircase from persisted JSON, or undefined when absent or not one (measuring then restarts). */
function openOf(state: RelaunchHoldState | undefined): OpenSurplus | undefined {
  if (state === undefined || !('open' in state)) return undefined;
  const o: unknown = state.open;
  if (typeof o !== 'object' || o === null || !('want' in o) || !('at' in o) || !('levels' in o)) return undefined;
  const { want, at, levels } = o;
  if (typeof want !== 'number' || units(want) !== want || typeof at !== 'number' || !Number.isFinite(at)) return undefined;
  if (!Array.isArray(levels)) return undefined;
  const out: OpenSurplus['levels'] = [];
  let above = { level: Infinity, since: -Infinity };
  for (const l of levels as unknown[]) {
    if (typeof l !== 'object' || l === null || !('level' in l) || !('since' in l)) return undefined;
    const { level, since } = l;
    if (typeof level !== 'number' || typeof since !== 'number' || !Number.isInteger(level) || !Number.isFinite(since)) return undefined;
    // Lower ranges fell later; every range is above the want and at or before the last tick.
    if (level >= above.level || level <= want || since < above.since || since > at) return undefined;
    above = { level, since };
    out.push(above);
  }
  return { want, at, levels: out };
}

/** Milliseconds for people: "45 s", "3.2 min", "2.5 h". */
function dur(ms: number): string {
  const s = ms / 1000;
  if (s < 120) return `${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  if (s < 7200) return `${(s / 60).toFixed(1)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
