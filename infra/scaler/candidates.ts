/**
 * The self-tuning portfolio's candidates (issue 28 §1), each a pure decision over the same input
 * as `decide()`: the live controller runs the one a retune adopted, and the simulator's
 * self-tuning policy and its counterfactual replays run the very same function, so what a replay
 * scored is what the scaler then does.
 *
 * - predictive: `decide()` with the candidate's settings over the deployment's own (standby, the
 *   holds, a capacity margin);
 * - reactive: a queue-length scaler as KEDA/HPA run one, two triggers and the larger answer wins:
 *   the queued rows at `backlogPerWorker` a replica, and the rows served per second over the last
 *   minute (a `rate(…[1m])`) at REACTIVE_UTILIZATION of a worker's full rate; up at once, down
 *   only to the most desired over REACTIVE_STABILIZATION_MS; no standby, launches active. The
 *   simulator's reactive baseline is this function with the world's true worker rate;
 * - fixed: a fleet of `workers`, active all the time.
 *
 * Every candidate stays inside the deployment's min and max, and none drains while the worker
 * rate is a guess (no worker measured yet): a guess must not shrink a pool a real profile would
 * keep. Reactive and fixed write their wants into the same stabilisation memory `decide()` reads,
 * so switching to a predictive candidate holds the pool the previous one built for the predictive
 * window instead of draining it on the first tick.
 */
import type { Candidate, PolicyDecision, PolicyInput, PolicyMemory, WorkerCounts } from '../contracts/pool.ts';
import { decide } from './policy.ts';

/** The reactive trigger's share of a worker's full rate (HPA's usual 80 % target). */
export const REACTIVE_UTILIZATION = 0.8;
/** The reactive scaler's scale-down window (HPA's default stabilisation, 300 s). */
export const REACTIVE_STABILIZATION_MS = 300_000;
/** The window its throughput trigger averages over (a Prometheus `rate(…[1m])`). */
export const REACTIVE_RATE_WINDOW_MS = 60_000;

export function decideCandidate(candidate: Candidate, input: PolicyInput): PolicyDecision {
  if (candidate.kind === 'predictive') return decide({ ...input, settings: { ...input.settings, ...candidate.overrides } });
  if (candidate.kind === 'reactive') return reactive(candidate.backlogPerWorker, input, candidate.name);
  return fixed(candidate.workers, input, candidate.name);
}

/** The served-rate window of the reactive trigger, with this tick's count in it. */
function servedWindow(input: PolicyInput): NonNullable<PolicyMemory['recentServed']> {
  const kept = (input.memory.recentServed ?? []).filter((e) => e.at <= input.now && e.at > input.now - REACTIVE_RATE_WINDOW_MS);
  const o = input.observed;
  if (o && Number.isFinite(o.servedRows) && o.servedRows >= 0 && o.sinceMs > 0)
    kept.push({ at: input.now, rows: o.servedRows, ms: o.sinceMs });
  return kept;
}

function reactive(backlogPerWorker: number, input: PolicyInput, name: string): PolicyDecision {
  const b = input.backlog;
  const rowsPerJob = b.rowsPerJob !== undefined && b.rowsPerJob >= 1 ? b.rowsPerJob : 1;
  const queuedRows = (pos(b.waiting) + pos(b.prioritized) + pos(b.delayed)) * rowsPerJob;
  const served = servedWindow(input);
  const servedMs = served.reduce((t, e) => t + e.ms, 0);
  const servedPerSec = servedMs > 0 ? served.reduce((t, e) => t + e.rows, 0) / (servedMs / 1000) : 0;
  const measured = Number.isFinite(input.perWorkerRatePerSec) && input.perWorkerRatePerSec > 0;
  const workerRate = measured ? input.perWorkerRatePerSec : 1;
  const perReplica = backlogPerWorker > 0 ? backlogPerWorker : 1;
  const forQueue = ceil(queuedRows / perReplica);
  const forRate = ceil(servedPerSec / (workerRate * REACTIVE_UTILIZATION));
  const raw = clamp(Math.max(forQueue, forRate), input.settings.min, input.settings.max);
  const recent = slidingMax(input.memory.recentDesired, input.now, raw);
  const desired = recent[0]?.active ?? raw;
  const reasons = [
    `candidate ${name}: ${queuedRows} queued rows at ${perReplica.toFixed(1)} a replica ask ${forQueue}, ${servedPerSec.toFixed(1)}/s served at ${REACTIVE_UTILIZATION} of ${workerRate.toFixed(1)}/s ask ${forRate}; ${desired} active (the most over ${REACTIVE_STABILIZATION_MS / 1000}s)`,
  ];
  return finish(desired, input, reasons, { ...input.memory, recentDesired: recent, recentServed: served }, measured);
}

/**
 * The most desired over the window, kept as a decreasing list (a value followed by a larger one
 * can never be a window's maximum again, so it goes): its head is the maximum, and the list stays
 * a few entries long however many ticks the window holds.
 */
function slidingMax(entries: PolicyMemory['recentDesired'], now: number, value: number): PolicyMemory['recentDesired'] {
  const out: PolicyMemory['recentDesired'] = [];
  for (const e of entries) if (e.at <= now && e.at >= now - REACTIVE_STABILIZATION_MS) out.push(e);
  while (out.length > 0 && (out[out.length - 1] as { active: number }).active <= value) out.pop();
  out.push({ at: now, active: value });
  return out;
}

function fixed(workers: number, input: PolicyInput, name: string): PolicyDecision {
  const active = clamp(workers, input.settings.min, input.settings.max);
  // One entry: a predictive candidate adopted next holds this fleet for its own window.
  const memory: PolicyMemory = { ...input.memory, recentDesired: [{ at: input.now, active }] };
  const measured = Number.isFinite(input.perWorkerRatePerSec) && input.perWorkerRatePerSec > 0;
  return finish(active, input, [`candidate ${name}: a fixed fleet of ${active} active`], memory, measured);
}

/** Targets to actions as decide() does: the pool counts starting workers; no drain on a guessed rate. */
function finish(active: number, input: PolicyInput, reasons: string[], memory: PolicyMemory, measured: boolean): PolicyDecision {
  const w: WorkerCounts = input.workers;
  const pool = pos(w.active) + pos(w.standby) + pos(w.starting);
  let launch = 0;
  let drain = 0;
  if (pool < active) {
    launch = active - pool;
    reasons.push(`launch ${launch}: pool ${pool} below ${active} active`);
  } else if (pool > active) {
    if (measured) {
      drain = pool - active;
      reasons.push(`drain ${drain}: pool ${pool} above ${active} active`);
    } else reasons.push(`pool ${pool} above target ${active}: drain held (no measured worker rate yet)`);
  }
  const kept = measured ? active : Math.max(active, pos(w.active));
  return { active: kept, standby: 0, launch, drain, reasons, memory };
}

function clamp(n: number, min: number, max: number): number {
  const lo = Number.isFinite(min) && min > 0 ? Math.floor(min) : 0;
  const hi = Number.isFinite(max) ? Math.max(lo, Math.floor(max)) : lo;
  return Math.min(hi, Math.max(lo, n));
}

const pos = (x: number) => (Number.isFinite(x) && x > 0 ? x : 0);
const ceil = (x: number) => (Number.isFinite(x) && x > 0 ? Math.ceil(x - 1e-9) : 0);
