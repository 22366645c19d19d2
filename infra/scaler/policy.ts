/**
 * The scaling policy (DESIGN §8, issue 4): a pure function from what the scaler sees (forecast,
 * backlog, worker counts, per-worker throughput, settings, its own memory) to what the pool
 * should be. The live controller and the simulator run this same code, so it reads nothing but
 * its input: no clock, no randomness, no I/O, and the input is never mutated.
 *
 * 1. Capacity. One active worker serves perWorkerRatePerSec × targetUtilization. With no profile
 *    yet (rate ≤ 0 or not finite) it assumes FALLBACK_PER_WORKER_RATE_PER_SEC, deliberately low
 *    so the pool errs toward more workers (max caps it), and on such a tick it neither scales
 *    down nor remembers its guess: a guess must not hold the pool up once a real profile exists.
 * 2. Need. needed active = ⌈(forecast rate + backlog / clearing budget) / capacity⌉, and at least
 *    ⌈(forecast rate + the rows/s late bulk runs ask for) / capacity⌉ (a deadline asks through
 *    the same min/max as everything else: max caps it). The forecast
 *    covers the lead time (the controller asks for a horizon ≥ coldStartMs), so a worker launched
 *    now is ready for the demand it was launched for. Backlog = waiting + prioritized + delayed
 *    (active jobs are already being served). Clearing budget = half the SLO (the other half is
 *    for jobs arriving meanwhile and the second a standby needs to activate), shrinking to what
 *    the oldest job has left of its SLO but not below a quarter; once the oldest job is past the
 *    SLO, an eighth: four times the normal drain rate, to stop the damage fast. The backlog asks
 *    for no launches when the warm workers (active + standby, at full rate) clear it within a
 *    cold start: a launched worker would arrive to an empty queue and then be held for the whole
 *    stabilisation window. If the backlog outlasts that estimate it grows, and a later tick
 *    launches.
 * 3. Up fast, down slow. desired active = the maximum of `needed` over the last
 *    scaleDownStabilizationMs, read as a step function (the value in force at the window's start
 *    counts), so a long gap between ticks (the clock jumping forwards) does not by itself expire
 *    the window. Entries from the future (the clock went backwards) are dropped; that tick holds
 *    the pool where it is and restarts the window from now.
 * 4. Standby = settings.standby, raised to ⌈burst rate / full rate⌉ − active when a burst would
 *    outrun the active workers (in a burst workers may run flat out; utilisation headroom is for
 *    steady load). Bounds: active ≤ max first, standby fills what max leaves, and if
 *    active + standby < min, active rises to reach min.
 * 5. Actions count the whole pool (starting + standby + active; draining workers are leaving):
 *    launch = target − pool when short, drain = pool − target when over, so never both. Starting
 *    workers are capacity on its way and are not launched again. The controller reaches the
 *    `active`/`standby` targets by moving warmed workers: standby is activated before launches
 *    arrive, and an active worker goes to standby rather than being drained while standby is
 *    below target. It drains starting workers first, then standby, then active, so the pool left
 *    equals the target and never holds fewer active workers than the `active` target. That is
 *    also why a drain cannot make the backlog miss its SLO: the active target is never below the
 *    need, backlog term included (only max can cap it: max is a hard quota and wins). No drain
 *    on a skewed tick or on a guessed profile.
 *
 * The controller should ask the forecaster for a horizon of at least a cold start plus a tick.
 */

import type { PolicyDecision, PolicyInput, PolicyMemory, PolicySettings, WorkerCounts } from '../contracts/pool.ts';
import { SCALER_DEFAULTS } from '../kernel/config.ts';

/** Rows (or jobs) per second assumed per worker until one reports a batch profile. */
export const FALLBACK_PER_WORKER_RATE_PER_SEC = 1;

type Entry = PolicyMemory['recentDesired'][number];

interface Capacity {
  /** Full rate of one worker. */
  fullPerSec: number;
  /** Rate one active worker is planned at (full × utilisation). */
  plannedPerSec: number;
  measured: boolean;
}

export function decide(input: PolicyInput): PolicyDecision {
  const reasons: string[] = [];
  const settings = normaliseSettings(input.settings);
  const workers = normaliseWorkers(input.workers);
  const capacity = workerCapacity(input.perWorkerRatePerSec, settings.targetUtilization, reasons);
  const raw = Math.min(settings.max, neededActive(input, settings, capacity, workers, reasons));
  const windowMs = settings.scaleDownStabilizationMs;
  const stable = stabilise(
    { now: input.now, raw, memory: input.memory, windowMs, current: workers.active, remember: capacity.measured },
    reasons,
  );
  const { active, standby } = targets(stable.active, burstStandby(input, settings, capacity), settings, reasons);
  const hold = stable.skewed || !capacity.measured;
  const { launch, drain } = actions(workers, active, standby, hold, reasons);
  return { active, standby, launch, drain, reasons, memory: { recentDesired: stable.entries } };
}

function workerCapacity(perWorkerRatePerSec: number, utilization: number, reasons: string[]): Capacity {
  const measured = Number.isFinite(perWorkerRatePerSec) && perWorkerRatePerSec > 0;
  const fullPerSec = measured ? perWorkerRatePerSec : FALLBACK_PER_WORKER_RATE_PER_SEC;
  if (!measured) reasons.push(`no throughput profile yet: assuming ${rate(fullPerSec)} per worker, holding scale-down`);
  return { fullPerSec, plannedPerSec: fullPerSec * utilization, measured };
}

function neededActive(input: PolicyInput, settings: PolicySettings, capacity: Capacity, workers: WorkerCounts, reasons: string[]): number {
  const { forecast } = input;
  const ratePerSec = nonNegative(forecast.ratePerSec);
  reasons.push(
    `forecast ${rate(ratePerSec)} (${forecast.method}, ${forecast.horizonS}s ahead) at ${rate(capacity.plannedPerSec)} per worker`,
  );
  if (forecast.horizonS * 1000 < settings.coldStartMs) {
    reasons.push(`forecast horizon ${forecast.horizonS}s is shorter than the ${secs(settings.coldStartMs)} cold start`);
  }
  const bulkPerSec = nonNegative(input.capacityRequest?.rowsPerSecondNeeded ?? 0);
  if (bulkPerSec > 0) reasons.push(`late bulk runs ask for ${rate(bulkPerSec)} more`);
  const forRate = ceilCount((ratePerSec + bulkPerSec) / capacity.plannedPerSec);
  const need = Math.max(forRate, backlogNeed(input, settings, capacity, workers, reasons));
  reasons.push(`needs ${need} active`);
  return need;
}

/** Active workers the forecast plus the backlog's drain term ask for (rule 2); 0 with no backlog. */
function backlogNeed(input: PolicyInput, settings: PolicySettings, capacity: Capacity, workers: WorkerCounts, reasons: string[]): number {
  const b = input.backlog;
  const backlog = nonNegative(b.waiting) + nonNegative(b.prioritized) + nonNegative(b.delayed);
  if (backlog === 0) return 0;
  const ratePerSec = nonNegative(input.forecast.ratePerSec);
  const oldestAgeMs = nonNegative(b.oldestAgeMs);
  const clearMs = clearingBudgetMs(settings.sloQueueWaitMs, oldestAgeMs);
  const slo = settings.sloQueueWaitMs;
  const late = oldestAgeMs >= slo ? ` (oldest ${secs(oldestAgeMs)} is past the ${secs(slo)} SLO)` : '';
  reasons.push(`backlog ${round(backlog)} jobs to clear within ${secs(clearMs)}${late} adds ${rate(backlog / (clearMs / 1000))}`);
  const need = ceilCount((ratePerSec + backlog / (clearMs / 1000)) / capacity.plannedPerSec);
  const warm = workers.active + workers.standby;
  const spare = warm * capacity.fullPerSec - ratePerSec;
  const warmClearMs = spare > 0 ? (backlog / spare) * 1000 : Infinity;
  if (need <= warm || warmClearMs > settings.coldStartMs) return need;
  reasons.push(`${warm} warm workers clear it in ${secs(warmClearMs)}, before a cold start: no launch for it`);
  return warm;
}

/** How soon the current backlog should be gone (see rule 2 in the header). */
function clearingBudgetMs(sloMs: number, oldestAgeMs: number): number {
  if (oldestAgeMs >= sloMs) return sloMs / 8;
  return Math.max(sloMs / 4, Math.min(sloMs / 2, sloMs - oldestAgeMs));
}

interface StabiliseInput {
  now: number;
  /** This tick's need, capped by max. */
  raw: number;
  memory: PolicyMemory;
  windowMs: number;
  /** Active workers now: the floor on a tick that must not scale down. */
  current: number;
  /** False on a guessed profile: hold the pool, record nothing. */
  remember: boolean;
}

interface Stable {
  active: number;
  entries: Entry[];
  skewed: boolean;
}

function stabilise({ now, raw, memory, windowMs, current, remember }: StabiliseInput, reasons: string[]): Stable {
  const valid = memory.recentDesired.filter((e) => Number.isFinite(e.at) && Number.isFinite(e.active));
  // Folding every entry through record() keeps a memory written elsewhere in the canonical form.
  const past = valid
    .filter((e) => e.at <= now)
    .sort((a, b) => a.at - b.at)
    .reduce<Entry[]>((out, e) => record(out, e.at, e.active), []);
  const future = valid.length - past.length;
  if (future > 0) {
    const newest = Math.max(...valid.map((e) => e.at));
    reasons.push(`clock went back ${secs(newest - now)}: dropped ${future} future entries, no scale-down this tick`);
    const held = Math.max(raw, current, windowMax(prune(past, now, windowMs)));
    return { active: held, entries: prune(record(past, now, held), now, windowMs), skewed: true };
  }
  const entries = prune(remember ? record(past, now, raw) : past, now, windowMs);
  const active = Math.max(raw, windowMax(entries), remember ? 0 : current);
  if (active > raw && remember) reasons.push(`holding ${active} active, the most needed in the last ${secs(windowMs)}`);
  return { active, entries, skewed: false };
}

/**
 * Appends `active` at `now`, folding earlier entries it dominates into it: an entry followed by
 * a larger one can never be a window's maximum alone (the larger one is in every window that
 * reaches now), so it takes the larger value and keeps its own start. The list stays strictly
 * decreasing and short.
 */
function record(entries: Entry[], now: number, active: number): Entry[] {
  const out = entries.map((e) => ({ ...e }));
  let at = now;
  while (out.length > 0 && (out[out.length - 1]?.active ?? Infinity) <= active) at = out.pop()?.at ?? at;
  // Two ticks at the same instant: the larger value stands (it was in force at that time too).
  if (out[out.length - 1]?.at !== at) out.push({ at, active });
  return out;
}

/** Keeps the entries inside the window plus the one in force at its start. */
function prune(entries: Entry[], now: number, windowMs: number): Entry[] {
  const start = now - windowMs;
  let first = 0;
  entries.forEach((e, i) => {
    if (e.at <= start) first = i;
  });
  return entries.slice(first);
}

function windowMax(entries: Entry[]): number {
  return entries.reduce((m, e) => Math.max(m, e.active), 0);
}

/** Standby beyond the setting when a burst would outrun the active workers at full rate. */
function burstStandby(input: PolicyInput, settings: PolicySettings, capacity: Capacity): (active: number) => number {
  const burst = Math.max(nonNegative(input.forecast.burstRatePerSec), nonNegative(input.forecast.ratePerSec));
  const burstWorkers = ceilCount(burst / capacity.fullPerSec);
  return (active) => Math.max(settings.standby, burstWorkers - active);
}

function targets(
  stableActive: number,
  standbyFor: (active: number) => number,
  settings: PolicySettings,
  reasons: string[],
): { active: number; standby: number } {
  let active = Math.min(settings.max, stableActive);
  if (active < stableActive) reasons.push(`max ${settings.max} caps active at ${active}`);
  const wanted = standbyFor(active);
  const standby = Math.min(settings.max - active, wanted);
  if (wanted > settings.standby) reasons.push(`burst raises standby from ${settings.standby} to ${wanted}`);
  if (standby < wanted) reasons.push(`max ${settings.max} leaves standby ${standby} of ${wanted}`);
  if (active + standby < settings.min) {
    active = settings.min - standby;
    reasons.push(`min ${settings.min} raises active to ${active}`);
  }
  return { active, standby };
}

function actions(
  workers: WorkerCounts,
  active: number,
  standby: number,
  hold: boolean,
  reasons: string[],
): { launch: number; drain: number } {
  const pool = workers.active + workers.standby + workers.starting;
  const target = active + standby;
  const activate = Math.min(workers.standby, Math.max(0, active - workers.active));
  if (activate > 0) reasons.push(`activate ${activate} standby`);
  const demote = Math.min(Math.max(0, workers.active - active), Math.max(0, standby - workers.standby));
  if (demote > 0) reasons.push(`move ${demote} active to standby`);
  if (pool < target) {
    const covered = workers.starting > 0 ? ` (${workers.starting} starting count)` : '';
    reasons.push(`launch ${target - pool}: pool ${pool} below ${active} active + ${standby} standby${covered}`);
    return { launch: target - pool, drain: 0 };
  }
  if (pool === target) return { launch: 0, drain: 0 };
  if (hold) {
    reasons.push(`pool ${pool} above target ${target}: drain held`);
    return { launch: 0, drain: 0 };
  }
  reasons.push(`drain ${pool - target}: pool ${pool} above ${active} active + ${standby} standby`);
  return { launch: 0, drain: pool - target };
}

function normaliseSettings(s: PolicySettings): PolicySettings {
  const min = count(s.min);
  const util = s.targetUtilization;
  return {
    min,
    max: Number.isFinite(s.max) ? Math.max(min, Math.floor(s.max)) : min,
    standby: count(s.standby),
    sloQueueWaitMs: Number.isFinite(s.sloQueueWaitMs) && s.sloQueueWaitMs > 0 ? s.sloQueueWaitMs : SCALER_DEFAULTS.sloQueueWaitMs,
    coldStartMs: nonNegative(s.coldStartMs),
    scaleDownStabilizationMs: nonNegative(s.scaleDownStabilizationMs),
    targetUtilization: Number.isFinite(util) && util > 0 ? Math.min(1, util) : SCALER_DEFAULTS.targetUtilization,
  };
}

function normaliseWorkers(w: WorkerCounts): WorkerCounts {
  return { starting: count(w.starting), standby: count(w.standby), active: count(w.active), draining: count(w.draining) };
}

/** Workers for a ratio of rates; a hair of tolerance so 2.0000000001 is 2, not 3. */
function ceilCount(workers: number): number {
  if (Number.isNaN(workers) || workers <= 0) return 0;
  return Math.ceil(workers - 1e-9);
}

function count(n: number): number {
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

/** NaN and negatives are 0; +Infinity stays (max caps what it asks for). */
function nonNegative(x: number): number {
  return x > 0 ? x : 0;
}

const round = (x: number) => Math.round(x);
const rate = (perSec: number) => `${perSec.toFixed(1)}/s`;
const secs = (ms: number) => `${(ms / 1000).toFixed(1)}s`;
