/**
 * The scaling policy (DESIGN §8, issues 4 and 17): a pure function from what the scaler sees
 * (forecast, backlog, worker counts, per-worker throughput, settings, its own memory) to what the
 * pool should be. The live controller and the simulator run this same code, so it reads nothing
 * but its input: no clock, no randomness, no I/O, and the input is never mutated. Every unit is
 * rows: arrivals and a worker's rate are counted in rows, and the backlog's jobs are turned into
 * rows with `backlog.rowsPerJob` (a request may carry many).
 *
 * 1. Capacity. μ = the per-worker rate at full batch: measured as soon as a worker has been busy
 *    with a queue behind it, its batch profile until then (the controller's choice). With none
 *    (≤ 0 or not finite) it assumes FALLBACK_PER_WORKER_RATE_PER_SEC, deliberately low so the
 *    pool errs toward more workers (max caps it), and on such a tick it neither scales down nor
 *    remembers its guess: a guess must not hold the pool up once a real profile exists.
 * 2. SLO sizing. Active capacity C = c·μ must meet two conditions, and c is the fewest that do:
 *    - steady: at the forecast mean λ (plus what late bulk runs ask for) the queue is stable and
 *      its wait stays within the SLO. The queue is read as a diffusion (heavy-traffic) model of
 *      c batch servers: rows arrive at λ with variance D·λ per second (D the forecast's
 *      dispersion, 1 for Poisson) and leave at C, so the backlog's tail is exponential and
 *      P(wait > S′) ≈ exp(−2·C·S′·(C − λ) / (D·λ)). At most SLO_TAIL gives
 *      C ≥ (λ + √(λ² + 2·D·λ·ln(1/SLO_TAIL) / S′)) / 2, where S′ = the SLO S less one full batch
 *      (`batchServiceMs`: a job that arrives while every worker is busy waits for one to free);
 *    - transient: if the rate turns out at the forecast's upper quantile λ_q (forecast.ts step 6),
 *      the queue grows by (λ_q − C) a second until more capacity can arrive, a cold start L
 *      later (rule 3 launches for the backlog); its wait stays within S′ while
 *      (λ_q − C)·L ≤ C·S′, so C ≥ λ_q·L / (L + S′). A short cold start lets the pool run near
 *      the mean; a long one makes it hold the upper quantile.
 *    Why this model: it is closed-form and monotone in c (one line per tick, no search), it holds
 *    for hundreds of workers where M/D/c's sums are ill-conditioned, and it is exact where cost is
 *    decided (heavy traffic); a small simulation in the loop would answer the same question
 *    noisily, at a replay per tick. `targetUtilization` < 1 adds a cap: C ≥ λ / u.
 * 3. Backlog. What is queued (waiting + prioritized + delayed, in rows) must clear within a
 *    budget: half the SLO (the other half is for jobs arriving meanwhile), shrinking to what the
 *    oldest job has left of its SLO but not below a quarter; once the oldest job is past the SLO,
 *    an eighth, to stop the damage fast. needed = ⌈(forecast rate + rows / budget) / (μ·u)⌉.
 *    It asks for no launches when the warm workers (active + standby, at full rate, less the
 *    forecast arrivals) clear it within a cold start plus S′: a worker launched now arrives a cold
 *    start L later, and if the warm ones empty the queue by L + S′, every job arriving from L on
 *    waits less than S′ without it — the launch would change no job's SLO and cost a lifetime.
 *    (Jobs queued before L are already as late as they will be: a launch cannot reach them.)
 *    Otherwise it asks for the fewest workers m that, arriving at L to the B_L rows the warm ones
 *    leave, clear them within S′ together with the warm ones' spare rate s:
 *    m = ⌈(B_L / S′ − s) / (μ·u)⌉. Sizing them to clear the whole queue in an eighth of the SLO
 *    (or ignoring the warm ones' share) launched a pool for a queue mostly gone by the time it
 *    was warm and held it for its lifetime: on bursty traffic (gamma CV 2 within a minute) most
 *    launches were these, and cold starts outnumbered a queue-length scaler's.
 * 4. Standby for the burst a cold start cannot absorb. A burst at rate λ_b lasting T outruns C
 *    active capacity by (λ_b − C) for T, or for the cold start L a launch needs if it lasts
 *    longer; the queue absorbs that within the SLO while (λ_b − C)·T′ ≤ C·S (T′ = min(T, L)),
 *    so the warm pool must reach λ_b·T′ / (T′ + S), the most over the forecast's bursts by span
 *    (`burstsBySpan`; the horizon's burst rate, at least the upper quantile, lasting L when it has
 *    none): standby = ⌈that / μ⌉ − active, never below the setting. A one-minute spike against a
 *    30 s SLO needs two thirds of its rate warm, not the four fifths a cold-start-long one would.
 * 5. Up fast, down slow. desired active = the most rule 2/3 asked for over the last
 *    scaleDownStabilizationMs; the pool's total (active + standby) = the most it asked for over
 *    the minimum lifetime (minLifetimeColdStarts × the cold start, at least the stabilisation
 *    window): a worker launched for a peak is not drained within its lifetime, and a scale-down
 *    needs a surplus sustained for the whole window. Both are read as step functions (the value
 *    in force at the window's start counts), so a long gap between ticks (the clock jumping
 *    forwards) does not by itself expire a window. Entries from the future (the clock went
 *    backwards) are dropped; that tick holds the pool where it is and restarts the windows.
 *    Workers the total holds beyond active + standby stay active: they are paid for either way,
 *    and serving they shorten waits.
 * 6. Bounds: active ≤ max first, standby fills what max leaves, and if active + standby < min,
 *    active rises to reach min.
 * 7. Actions count the whole pool (starting + standby + active; draining workers are leaving):
 *    launch = target − pool when short, drain = pool − target when over, so never both. Starting
 *    workers are capacity on its way and are not launched again. The controller reaches the
 *    `active`/`standby` targets by moving warmed workers (controller-plan.ts). No drain on a
 *    skewed tick or on a guessed profile.
 *
 * `terms` names the number each rule produced and which one set `active` and `standby`; the
 * reasons say the same in words. The controller asks the forecaster for a horizon of at least
 * a cold start plus a tick, so a worker launched now is ready for the demand it was launched for.
 */

import type {
  ActiveSource,
  DecisionTerms,
  PolicyDecision,
  PolicyInput,
  PolicyMemory,
  PolicySettings,
  RelaunchHoldState,
  SloControlState,
  WorkerCounts,
} from '../contracts/pool.ts';
import { SCALER_DEFAULTS } from '../kernel/config.ts';
import { measuredHoldMs, noteWant } from './relaunch-hold.ts';
import { noteSloTick, sloFactor } from './slo-control.ts';

/** Rows per second assumed per worker until one reports a batch profile. */
export const FALLBACK_PER_WORKER_RATE_PER_SEC = 1;
/** The probability the SLO sizing allows a job's wait past the SLO at the upper-quantile rate. */
export const SLO_TAIL = 0.01;

type Entry = PolicyMemory['recentDesired'][number];
type Settings = Required<PolicySettings>;

interface Capacity {
  /** Full rate of one worker. */
  fullPerSec: number;
  measured: boolean;
}

export function decide(input: PolicyInput): PolicyDecision {
  const reasons: string[] = [];
  const settings = normaliseSettings(input.settings);
  const workers = normaliseWorkers(input.workers);
  const capacity = workerCapacity(input.perWorkerRatePerSec, reasons);
  const demand = demandOf(input, reasons);
  const factor = capacityFactor(input.memory, settings, reasons);
  const sloActive = sloSizing(demand, input, settings, capacity, factor, reasons);
  const backlogActive = backlogNeed(input, settings, capacity, workers, reasons);
  const raw = Math.min(settings.max, Math.max(sloActive, backlogActive));
  reasons.push(`needs ${raw} active (${backlogActive > sloActive ? 'backlog' : 'SLO sizing'})`);
  const remember = capacity.measured;
  const active = stabilise(
    {
      now: input.now,
      raw,
      entries: input.memory.recentDesired,
      windowMs: settings.scaleDownStabilizationMs,
      current: workers.active,
      remember,
    },
    'active',
    reasons,
  );
  const burst = burstStandby(demand, settings, capacity, factor, active.value, reasons);
  const standbyWanted = Math.max(settings.standby, burst);
  // The pool's own want, from this tick's need (not the held one): each window holds only itself.
  const poolWant = raw + Math.max(settings.standby, burstStandby(demand, settings, capacity, factor, raw, []));
  const current = workers.active + workers.standby + workers.starting;
  const { pool, hold, relaunchHold } = holdPool(input, settings, { want: Math.min(settings.max, poolWant), current, remember }, reasons);
  const minLifetimeMs = hold.holdMs;
  const t = targets({ active: active.value, standby: standbyWanted, pool: pool.value }, settings, minLifetimeMs, reasons);
  const holdDrain = active.skewed || pool.skewed || !capacity.measured;
  const { launch, drain } = actions(workers, t.active, t.standby, holdDrain, reasons);
  const sloControl = remember ? noteSlo(input, settings, { pool: current, active: workers.active }) : input.memory.sloControl;
  const terms: DecisionTerms = {
    upperRatePerSec: demand.upperPerSec + demand.bulkPerSec,
    quantile: demand.quantile,
    perWorkerRatePerSec: capacity.fullPerSec,
    measuredRate: capacity.measured,
    coldStartMs: settings.coldStartMs,
    sloActive,
    backlogActive,
    burstStandby: burst,
    stabilisedActive: active.value,
    heldPool: pool.value,
    minLifetimeMs,
    activeSetBy: activeSource(t, raw, active.value, sloActive, backlogActive),
    standbySetBy: t.standbyCut ? 'max' : burst > settings.standby ? 'burst' : 'setting',
    sloFactor: factor,
    holdWhy: hold.why,
  };
  return {
    active: t.active,
    standby: t.standby,
    launch,
    drain,
    reasons,
    terms,
    memory: {
      ...input.memory,
      recentDesired: active.entries,
      recentPool: pool.entries,
      ...(sloControl ? { sloControl } : {}),
      ...(relaunchHold ? { relaunchHold } : {}),
    },
  };
}

function workerCapacity(perWorkerRatePerSec: number, reasons: string[]): Capacity {
  const measured = Number.isFinite(perWorkerRatePerSec) && perWorkerRatePerSec > 0;
  const fullPerSec = measured ? perWorkerRatePerSec : FALLBACK_PER_WORKER_RATE_PER_SEC;
  if (!measured) reasons.push(`no throughput profile yet: assuming ${rate(fullPerSec)} per worker, holding scale-down`);
  return { fullPerSec, measured };
}

interface Demand {
  meanPerSec: number;
  /** The forecast's upper quantile (its mean when it has none). */
  upperPerSec: number;
  quantile: number;
  /** Burst rates by span (seconds), the last lasting a cold start; see rule 4. */
  bursts: Array<{ spanS: number; ratePerSec: number }>;
  dispersion: number;
  bulkPerSec: number;
}

/** The forecast's rates, cleaned: an upper quantile or burst below the mean is the mean. */
function demandOf(input: PolicyInput, reasons: string[]): Demand {
  const f = input.forecast;
  const meanPerSec = nonNegative(f.ratePerSec);
  const hasUpper = f.upperRatePerSec !== undefined && Number.isFinite(f.upperRatePerSec);
  const upperPerSec = Math.max(meanPerSec, hasUpper ? nonNegative(f.upperRatePerSec ?? 0) : 0);
  const quantile = hasUpper && f.upperQuantile !== undefined && f.upperQuantile > 0 && f.upperQuantile < 1 ? f.upperQuantile : 0.5;
  const dispersion = f.dispersion !== undefined && f.dispersion >= 1 && Number.isFinite(f.dispersion) ? f.dispersion : 1;
  const bulkPerSec = nonNegative(input.capacityRequest?.rowsPerSecondNeeded ?? 0);
  reasons.push(
    `forecast ${rate(meanPerSec)}, q${Math.round(quantile * 100)} ${rate(upperPerSec)} (${f.method}, ${f.horizonS}s ahead, dispersion ${dispersion.toFixed(1)})`,
  );
  if (f.horizonS * 1000 < input.settings.coldStartMs) {
    reasons.push(`forecast horizon ${f.horizonS}s is shorter than the ${secs(input.settings.coldStartMs)} cold start`);
  }
  if (bulkPerSec > 0) reasons.push(`late bulk runs ask for ${rate(bulkPerSec)} more`);
  const bursts = (f.burstsBySpan ?? [])
    .filter((b) => Number.isFinite(b.spanS) && b.spanS > 0)
    .map((b) => ({ spanS: b.spanS, ratePerSec: Math.max(meanPerSec, nonNegative(b.ratePerSec)) }));
  // The longest burst is at least the upper quantile, lasting a cold start (the old single figure).
  bursts.push({ spanS: Infinity, ratePerSec: Math.max(upperPerSec, nonNegative(f.burstRatePerSec)) });
  return { meanPerSec, upperPerSec, quantile, bursts, dispersion, bulkPerSec };
}

/** Rule 2: the fewest active workers that hold the queue wait within the SLO (see the header). */
function sloSizing(demand: Demand, input: PolicyInput, s: Settings, capacity: Capacity, factor: number, reasons: string[]): number {
  const mean = demand.meanPerSec + demand.bulkPerSec;
  const upper = demand.upperPerSec + demand.bulkPerSec;
  if (upper <= 0) return 0;
  const budgetS = waitBudgetMs(s, input.batchServiceMs) / 1000;
  const spread = (2 * demand.dispersion * mean * Math.log(1 / SLO_TAIL)) / budgetS;
  const steady = (mean + Math.sqrt(mean * mean + spread)) / 2;
  const coldS = s.coldStartMs / 1000;
  const transient = (upper * coldS) / (coldS + budgetS);
  const capped = mean / s.targetUtilization;
  // The closed-loop factor scales what the model asks for, never below the mean (a stable queue).
  const needed = Math.max(mean, steady * factor, transient * factor, capped);
  const workers = ceilCount(needed / capacity.fullPerSec);
  const by =
    needed === capped && capped > steady * factor
      ? `utilisation cap ${s.targetUtilization}`
      : needed === mean
        ? 'the mean'
        : needed === steady * factor
          ? 'the mean with its noise'
          : `q${Math.round(demand.quantile * 100)} for a cold start`;
  // The wait budget is the SLO less a batch's service: said so, since it is shown beside the SLO.
  const served = budgetS * 1000 < s.sloQueueWaitMs ? ` (the ${secs(s.sloQueueWaitMs)} SLO less a batch's service)` : '';
  reasons.push(
    `SLO sizing: ${rate(needed)} of capacity (${by}) keeps queue waits under ${secs(budgetS * 1000)}${served} at ${rate(capacity.fullPerSec)} per worker: ${workers} active`,
  );
  return workers;
}

/** Rule 3: active workers the backlog's drain term asks for; 0 with no backlog. */
function backlogNeed(input: PolicyInput, s: Settings, capacity: Capacity, workers: WorkerCounts, reasons: string[]): number {
  const b = input.backlog;
  const jobs = nonNegative(b.waiting) + nonNegative(b.prioritized) + nonNegative(b.delayed);
  if (jobs === 0) return 0;
  const rowsPerJob = b.rowsPerJob !== undefined && Number.isFinite(b.rowsPerJob) && b.rowsPerJob >= 1 ? b.rowsPerJob : 1;
  const rows = jobs * rowsPerJob;
  const ratePerSec = nonNegative(input.forecast.ratePerSec);
  const oldestAgeMs = nonNegative(b.oldestAgeMs);
  const clearMs = clearingBudgetMs(s.sloQueueWaitMs, oldestAgeMs);
  const late = oldestAgeMs >= s.sloQueueWaitMs ? ` (oldest ${secs(oldestAgeMs)} is past the ${secs(s.sloQueueWaitMs)} SLO)` : '';
  const unit = rowsPerJob === 1 ? '' : ` (${round(jobs)} jobs × ${rowsPerJob.toFixed(1)})`;
  reasons.push(`backlog ${round(rows)} rows${unit} to clear within ${secs(clearMs)}${late} adds ${rate(rows / (clearMs / 1000))}`);
  const need = ceilCount((ratePerSec + rows / (clearMs / 1000)) / (capacity.fullPerSec * s.targetUtilization));
  const warm = workers.active + workers.standby;
  if (need <= warm) return need;
  const spare = warm * capacity.fullPerSec - ratePerSec;
  const warmClearMs = spare > 0 ? (rows / spare) * 1000 : Infinity;
  const budgetMs = waitBudgetMs(s, input.batchServiceMs);
  if (warmClearMs <= s.coldStartMs + budgetMs) {
    reasons.push(`${warm} warm workers clear it in ${secs(warmClearMs)}, within a cold start plus the SLO: no launch for it`);
    return warm;
  }
  // Launched workers arrive a cold start from now, to what the warm ones leave by then (more if
  // arrivals outrun them), which they and the warm ones' spare clear within S′.
  const left = rows - (spare * s.coldStartMs) / 1000;
  const perWorker = capacity.fullPerSec * s.targetUtilization;
  const more = ceilCount((left / (budgetMs / 1000) - spare) / perWorker);
  if (warm + more >= need) return need;
  reasons.push(`${warm} warm workers leave ${round(left)} rows after a cold start: ${more} more for them`);
  return warm + more;
}

/** S′: the SLO less one full batch (a job arriving while every worker is busy waits for one), at least a quarter of it. */
function waitBudgetMs(s: Settings, batchServiceMs: number | undefined): number {
  return Math.max(s.sloQueueWaitMs / 4, s.sloQueueWaitMs - nonNegative(batchServiceMs ?? 0));
}

/** How soon the current backlog should be gone (rule 3). */
function clearingBudgetMs(sloMs: number, oldestAgeMs: number): number {
  if (oldestAgeMs >= sloMs) return sloMs / 8;
  return Math.max(sloMs / 4, Math.min(sloMs / 2, sloMs - oldestAgeMs));
}

/** Rule 4: standby beyond `active` so the warm pool reaches what a cold start cannot absorb. */
function burstStandby(demand: Demand, s: Settings, capacity: Capacity, factor: number, active: number, reasons: string[]): number {
  const coldMs = s.coldStartMs;
  let worst = { ratePerSec: 0, lastsMs: 0, warm: 0 };
  for (const b of demand.bursts) {
    const ratePerSec = b.ratePerSec + demand.bulkPerSec;
    const lastsMs = Math.min(b.spanS * 1000, coldMs);
    const warm = lastsMs > 0 ? (factor * ratePerSec * lastsMs) / (lastsMs + s.sloQueueWaitMs) : 0;
    if (warm > worst.warm) worst = { ratePerSec, lastsMs, warm };
  }
  const standby = Math.max(0, ceilCount(worst.warm / capacity.fullPerSec) - active);
  if (standby > s.standby) {
    reasons.push(
      `burst ${rate(worst.ratePerSec)} lasting ${secs(worst.lastsMs)} (cold start ${secs(coldMs)}) needs ${rate(worst.warm)} warm: standby ${standby} (setting ${s.standby})`,
    );
  }
  return standby;
}

/** The closed-loop factor (slo-control.ts) times 1 + capacityMargin, applied to rules 2 and 4. */
function capacityFactor(memory: PolicyMemory, s: Settings, reasons: string[]): number {
  const loop = sloFactor(memory.sloControl);
  const factor = loop * (1 + s.capacityMargin);
  if (factor !== 1) {
    const margin = s.capacityMargin > 0 ? ` × margin ${(1 + s.capacityMargin).toFixed(2)}` : '';
    reasons.push(`capacity × ${factor.toFixed(2)} (measured SLO control ${loop.toFixed(2)}${margin})`);
  }
  return factor;
}

/** Folds this tick's outcome into the SLO controller; unchanged without the controller's counts. */
function noteSlo(input: PolicyInput, s: Settings, pool: { pool: number; active: number }): SloControlState | undefined {
  const seen = input.observed;
  if (!seen || !Number.isFinite(seen.sinceMs) || seen.sinceMs <= 0) return input.memory.sloControl;
  const late = nonNegative(input.backlog.oldestAgeMs) > s.sloQueueWaitMs;
  const canHelp = pool.active > 0 && pool.pool < s.max;
  const counted = seen.lateRows !== undefined && Number.isFinite(seen.lateRows) && Number.isFinite(seen.servedRows);
  return noteSloTick(
    input.memory.sloControl,
    {
      now: input.now,
      windowMs: Math.max(s.sloQueueWaitMs, seen.sinceMs),
      sinceMs: seen.sinceMs,
      missed: late && canHelp,
      ...(counted ? { served: nonNegative(seen.servedRows), late: nonNegative(seen.lateRows ?? 0), canHelp } : {}),
    },
    { sloTarget: s.sloTarget },
  );
}

/** Rule 5 for the pool's total: the want held for the hold (poolHold), whose gaps this tick's want adds to. */
function holdPool(
  input: PolicyInput,
  s: Settings,
  p: { want: number; current: number; remember: boolean },
  reasons: string[],
): { pool: Stable; hold: { holdMs: number; why: string }; relaunchHold: RelaunchHoldState | undefined } {
  const relaunchHold = p.remember
    ? noteWant(input.memory.relaunchHold, { now: input.now, want: p.want, held: p.current, coldStartMs: s.coldStartMs })
    : input.memory.relaunchHold;
  const hold = poolHold(relaunchHold, s, reasons);
  // Remembered on a guessed profile too: a worker launched then (a backlog at min 0 before any
  // worker reported its rate) was wanted, and forgetting that want drained it the moment its
  // profile arrived, so each sporadic request paid a cold start. Its lifetime holds it whatever
  // the rate turns out to be; a guess too high costs at most that lifetime.
  const pool = stabilise(
    {
      now: input.now,
      raw: p.want,
      entries: input.memory.recentPool ?? [],
      windowMs: hold.holdMs,
      current: p.current,
      remember: true,
    },
    'pool',
    reasons,
  );
  return { pool, hold, relaunchHold };
}

/**
 * Rule 5's pool hold: the minimum lifetime, lengthened to the measured hold (relaunch-hold.ts)
 * where the measured gaps say a relaunch would come back within it. Never shorter than the
 * lifetime: the gaps price a relaunch at its cold start only, while a return the forecast did
 * not see a cold start ahead also costs waits, which no gap shows.
 */
function poolHold(state: RelaunchHoldState | undefined, s: Settings, reasons: string[]): { holdMs: number; why: string } {
  const lifetime = minLifetime(s);
  const measured = measuredHoldMs(state, s.coldStartMs, lifetime);
  if (measured.holdMs > lifetime) {
    reasons.push(measured.why);
    return { holdMs: measured.holdMs, why: measured.why };
  }
  const shorter = measured.samples > 0 ? `; ${measured.why}, no shorter` : '';
  return { holdMs: lifetime, why: `minimum lifetime ${secs(lifetime)}${shorter}` };
}

interface StabiliseInput {
  now: number;
  /** This tick's want, capped by max. */
  raw: number;
  entries: readonly Entry[];
  windowMs: number;
  /** What the pool has now: the floor on a tick that must not scale down. */
  current: number;
  /** False on a guessed profile: hold at least what there is, record nothing (the pool window always records). */
  remember: boolean;
}

interface Stable {
  value: number;
  entries: Entry[];
  skewed: boolean;
}

/** Rule 5 for one quantity: the most wanted over the window, with the clock's skew handled. */
function stabilise({ now, raw, entries, windowMs, current, remember }: StabiliseInput, what: string, reasons: string[]): Stable {
  const valid = entries.filter((e) => Number.isFinite(e.at) && Number.isFinite(e.active));
  // Folding every entry through record() keeps a memory written elsewhere in the canonical form.
  const past = valid
    .filter((e) => e.at <= now)
    .sort((a, b) => a.at - b.at)
    .reduce<Entry[]>((out, e) => record(out, e.at, e.active), []);
  const future = valid.length - past.length;
  if (future > 0) {
    const newest = Math.max(...valid.map((e) => e.at));
    reasons.push(`clock went back ${secs(newest - now)}: dropped ${future} future ${what} entries, no scale-down this tick`);
    const held = Math.max(raw, current, windowMax(prune(past, now, windowMs)));
    return { value: held, entries: prune(record(past, now, held), now, windowMs), skewed: true };
  }
  const kept = prune(remember ? record(past, now, raw) : past, now, windowMs);
  const value = Math.max(raw, windowMax(kept), remember ? 0 : current);
  if (value > raw && remember) reasons.push(`holding ${value} ${what}, the most wanted in the last ${secs(windowMs)}`);
  return { value, entries: kept, skewed: false };
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

interface Targets {
  active: number;
  standby: number;
  /** Which rule last moved active (rule 5's pool hold, or a bound). */
  activeBy?: 'min-lifetime' | 'min' | 'max';
  standbyCut: boolean;
}

/** Rules 5 (the held surplus stays active) and 6 (max, then min). */
function targets(want: { active: number; standby: number; pool: number }, s: Settings, holdMs: number, reasons: string[]): Targets {
  let activeBy: Targets['activeBy'];
  let active = Math.max(want.active, want.pool - want.standby);
  if (active > want.active) {
    activeBy = 'min-lifetime';
    reasons.push(`pool held at ${want.pool} for the ${secs(holdMs)} hold: ${active} active`);
  }
  if (active > s.max) {
    reasons.push(`max ${s.max} caps active at ${s.max}`);
    active = s.max;
    activeBy = 'max';
  }
  const standby = Math.min(s.max - active, want.standby);
  if (standby < want.standby) reasons.push(`max ${s.max} leaves standby ${standby} of ${want.standby}`);
  if (active + standby < s.min) {
    active = s.min - standby;
    activeBy = 'min';
    reasons.push(`min ${s.min} raises active to ${active}`);
  }
  return { active, standby, ...(activeBy ? { activeBy } : {}), standbyCut: standby < want.standby };
}

const minLifetime = (s: Settings) => Math.max(s.scaleDownStabilizationMs, s.minLifetimeColdStarts * s.coldStartMs);

function activeSource(t: Targets, raw: number, stable: number, slo: number, backlog: number): ActiveSource {
  if (t.activeBy) return t.activeBy;
  if (stable > raw) return 'stabilisation';
  return backlog > slo ? 'backlog' : 'slo-sizing';
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

function normaliseSettings(s: PolicySettings): Settings {
  const min = count(s.min);
  const util = s.targetUtilization;
  const lifetime = s.minLifetimeColdStarts;
  return {
    min,
    max: Number.isFinite(s.max) ? Math.max(min, Math.floor(s.max)) : min,
    standby: count(s.standby),
    sloQueueWaitMs: Number.isFinite(s.sloQueueWaitMs) && s.sloQueueWaitMs > 0 ? s.sloQueueWaitMs : SCALER_DEFAULTS.sloQueueWaitMs,
    coldStartMs: Number.isFinite(s.coldStartMs) ? nonNegative(s.coldStartMs) : 0,
    scaleDownStabilizationMs: Number.isFinite(s.scaleDownStabilizationMs) ? nonNegative(s.scaleDownStabilizationMs) : 0,
    targetUtilization: Number.isFinite(util) && util > 0 ? Math.min(1, util) : SCALER_DEFAULTS.targetUtilization,
    minLifetimeColdStarts:
      lifetime !== undefined && Number.isFinite(lifetime) && lifetime >= 0 ? lifetime : SCALER_DEFAULTS.minLifetimeColdStarts,
    sloTarget: s.sloTarget !== undefined && s.sloTarget > 0.5 && s.sloTarget < 1 ? s.sloTarget : SCALER_DEFAULTS.sloTarget,
    capacityMargin:
      s.capacityMargin !== undefined && Number.isFinite(s.capacityMargin) && s.capacityMargin > 0 ? Math.min(4, s.capacityMargin) : 0,
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
