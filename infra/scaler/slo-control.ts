/**
 * Closed-loop SLO control (issue 28 §2): a bounded integral term that scales the capacity the
 * policy sizes for, moved by what the policy measures of its own outcome instead of a constant.
 *
 * Time is cut into windows of the SLO's own length (at least one tick): the scale at which a
 * queue turns a burst into a late job. A window is a miss when some tick in it saw the oldest
 * waiting job past the SLO while workers were active and the pool was below its max (a miss more
 * capacity could have prevented; one with no worker up is a question of min and standby, one at
 * max of the max). When a window closes, log(factor) moves by STEP × (miss − α), α = 1 − the SLO
 * target, then is clamped to [MIN_FACTOR, MAX_FACTOR]. This is adaptive conformal inference's
 * update: whatever the traffic, the long-run share of missed windows tends to α while the factor
 * is inside its bounds (the gap shrinks as 1 / (STEP × windows)), so nothing here is fitted to a
 * trace: sub-minute bursts the minute forecast cannot see raise it until they stop causing
 * misses, and slack lowers it slowly. The forecast's errors count through what they cause: a
 * second error, rows arriving past the planned upper rate (its quantile's own exceedance at the
 * SLO's scale), was tried and dropped — on the ServeGen traces' sub-minute bursts it fired on
 * windows the queue absorbed and cost 0.13–0.23× the oracle's cost for no attainment.
 *
 * STEP sets only the speed: 0.05 moves the factor 5 % on a miss and by 5 % × α on a clean
 * window, so with a 30 s SLO and a 99 % target a day of clean windows undoes some 30 misses.
 *
 * Where the rows served and those of them that waited past the SLO are counted (the workers'
 * late counter, the simulator's world), a window's error is the late rows themselves, not a
 * sighting: log(factor) moves by STEP × (late − α × served) / S, S the rows a window usually
 * serves (an EWMA over windows), so each late row moves it as much wherever it falls, a window
 * all late moves it as a missed window does above, and the long-run share of late rows tends to
 * α (ACI over jobs rather than windows). The oldest-waiting sighting misses what the ticks never
 * see: with an SLO shorter than a tick and jobs longer than it, a job can wait past the SLO and
 * start between two ticks, and on such worlds the sighting drove the factor to its floor while
 * 2 % of jobs were late. Late rows count only on ticks where more capacity could have helped (as
 * above); one window weighs at most MAX_WINDOW_WEIGHT usual windows, so one burst does not throw
 * the factor to its bound.
 * Pure: the state lives in PolicyMemory, so a restart keeps it.
 */

import type { SloControlState } from '../contracts/pool.ts';

export const STEP = 0.05;
export const MIN_FACTOR = 0.5;
export const MAX_FACTOR = 4;
/** A gap between ticks longer than this many windows leaves a hole: the window is dropped. */
const GAP_WINDOWS = 4;
/** The most one window's rows weigh, in usual windows (see the header). */
export const MAX_WINDOW_WEIGHT = 4;
/** How fast the usual rows per window follows: a window's weight in the EWMA. */
const SERVED_EWMA = 0.02;

export interface SloTick {
  now: number;
  /** The SLO's time scale: the SLO, at least the tick. */
  windowMs: number;
  /** Since the previous tick. */
  sinceMs: number;
  /** The oldest waiting job is past the SLO and more capacity could have helped. */
  missed: boolean;
  /** Rows served since the previous tick, and those that had waited past the SLO; absent where not counted. */
  served?: number;
  late?: number;
  /** More capacity could have helped this tick (workers active, the pool below its max): its late rows count. */
  canHelp?: boolean;
}

export interface SloTargets {
  sloTarget: number;
}

const LOG_MIN = Math.log(MIN_FACTOR);
const LOG_MAX = Math.log(MAX_FACTOR);

/** The factor on sized capacity; 1 before any window closed. */
export function sloFactor(state: SloControlState | undefined): number {
  if (!state || !Number.isFinite(state.logHeadroom)) return 1;
  return Math.exp(clamp(state.logHeadroom));
}

/** Adds one tick; closes the window when it has lasted `windowMs`. Returns the new state. */
export function noteSloTick(state: SloControlState | undefined, tick: SloTick, targets: SloTargets): SloControlState {
  const logHeadroom = state && Number.isFinite(state.logHeadroom) ? clamp(state.logHeadroom) : 0;
  const windowMs = Math.max(1, tick.windowMs);
  const counted = tick.served !== undefined && Number.isFinite(tick.served);
  const usual = state?.servedPerWindow;
  const fresh = (): SloControlState => ({
    logHeadroom,
    windowStartMs: tick.now,
    windowMissTicks: 0,
    windowTicks: 0,
    ...(counted ? { windowServed: 0, windowLate: 0 } : {}),
    ...(usual !== undefined ? { servedPerWindow: usual } : {}),
    updatedAt: tick.now,
  });
  // No state, the clock went back, or a hole: start a window here, keeping what was learnt.
  if (!state || tick.now < state.updatedAt || tick.now - state.updatedAt > GAP_WINDOWS * windowMs) return fresh();
  const served = counted ? Math.max(0, tick.served ?? 0) : 0;
  const late = counted && tick.canHelp !== false ? Math.min(served, Math.max(0, tick.late ?? 0)) : 0;
  const next: SloControlState = {
    ...state,
    logHeadroom,
    windowMissTicks: state.windowMissTicks + (tick.missed ? 1 : 0),
    windowTicks: state.windowTicks + 1,
    ...(counted ? { windowServed: (state.windowServed ?? 0) + served, windowLate: (state.windowLate ?? 0) + late } : {}),
    updatedAt: tick.now,
  };
  if (tick.now - next.windowStartMs < windowMs) return next;
  const alpha = 1 - targets.sloTarget;
  if (!counted || next.windowServed === undefined) {
    const move = STEP * ((next.windowMissTicks > 0 ? 1 : 0) - alpha);
    return { ...fresh(), logHeadroom: clamp(logHeadroom + move) };
  }
  // Counted: the window's late rows against α of its served rows, weighed by the usual window.
  const rows = next.windowServed;
  if (rows <= 0) return fresh();
  const norm = usual === undefined ? rows : usual;
  const weight = Math.min(MAX_WINDOW_WEIGHT, rows / norm);
  const move = STEP * weight * ((next.windowLate ?? 0) / rows - alpha);
  const servedPerWindow = usual === undefined ? rows : usual + SERVED_EWMA * (rows - usual);
  return { ...fresh(), logHeadroom: clamp(logHeadroom + move), servedPerWindow };
}

function clamp(logFactor: number): number {
  return Math.min(LOG_MAX, Math.max(LOG_MIN, logFactor));
}
