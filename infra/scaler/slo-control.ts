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
 * Pure: the state lives in PolicyMemory, so a restart keeps it.
 */

import type { SloControlState } from '../contracts/pool.ts';

export const STEP = 0.05;
export const MIN_FACTOR = 0.5;
export const MAX_FACTOR = 4;
/** A gap between ticks longer than this many windows leaves a hole: the window is dropped. */
const GAP_WINDOWS = 4;

export interface SloTick {
  now: number;
  /** The SLO's time scale: the SLO, at least the tick. */
  windowMs: number;
  /** Since the previous tick. */
  sinceMs: number;
  /** The oldest waiting job is past the SLO and more capacity could have helped. */
  missed: boolean;
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
  const fresh = (): SloControlState => ({
    logHeadroom,
    windowStartMs: tick.now,
    windowMissTicks: 0,
    windowTicks: 0,
    updatedAt: tick.now,
  });
  // No state, the clock went back, or a hole: start a window here, keeping what was learnt.
  if (!state || tick.now < state.updatedAt || tick.now - state.updatedAt > GAP_WINDOWS * windowMs) return fresh();
  const next: SloControlState = {
    ...state,
    logHeadroom,
    windowMissTicks: state.windowMissTicks + (tick.missed ? 1 : 0),
    windowTicks: state.windowTicks + 1,
    updatedAt: tick.now,
  };
  if (tick.now - next.windowStartMs < windowMs) return next;
  const move = STEP * ((next.windowMissTicks > 0 ? 1 : 0) - (1 - targets.sloTarget));
  return { ...fresh(), logHeadroom: clamp(logHeadroom + move) };
}

function clamp(logFactor: number): number {
  return Math.min(LOG_MAX, Math.max(LOG_MIN, logFactor));
}
