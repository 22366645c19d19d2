/**
 * From a deployment-wide decision to actions on named workers (pure; the controller applies them).
 *
 * Versions. The policy decides for the deployment's versions with traffic as one pool. With one
 * such version its decision is taken as it is. With a split, each version with weight > 0 gets
 * its share of the active count (at least one while any is wanted: a 10% canary with no worker
 * would strand its jobs) and a largest-remainder share of the standby count; each version
 * launches what it lacks (the policy's extra launches go to the stable version) and drains its
 * surplus only once no version lacks workers or has any starting — make before break, as when a
 * deployment rolls to a new version. Versions without traffic (weight 0, or no longer listed but
 * still running) keep one active worker while their queue holds jobs, then drain, again only
 * once the versions with traffic are settled.
 *
 * Workers. Within a version, in this order (the order the controller applies them in):
 * 1. activate standby workers (the longest warm first) up to the active target — a second;
 * 2. launch the policy's new workers: as active for the active shortfall that neither standby
 *    nor workers already starting cover, the rest as standby;
 * 3. move surplus active workers (the least busy) to standby while standby is short;
 * 4. drain, in the order infra/scaler/policy.ts counts on (so the pool left is its target and
 *    never below the active target): starting workers first (newest first: the least invested),
 *    then standby (surplus first, newest first), then active ones least busy first (by jobs held,
 *    when the heartbeat says; then newest) — never one holding many jobs when an idler one will do.
 */

import type { PolicyDecision } from '../contracts/pool.ts';
import { countWorkers, isStarting, type ObservedWorker } from './controller-observe.ts';
import type { ScalerAction } from './decision-log.ts';

export interface VersionTargets {
  version: string;
  active: number;
  standby: number;
  launch: number;
  drain: number;
}

export interface VersionView {
  version: string;
  /** Traffic percent; 0 for versions without traffic. */
  weight: number;
  workers: ObservedWorker[];
}

type Counts = Pick<PolicyDecision, 'active' | 'standby' | 'launch' | 'drain'>;

/** Workers that count: not on their way out. */
export function usableWorkers(workers: readonly ObservedWorker[]): ObservedWorker[] {
  return workers.filter((w) => w.state !== 'draining' && w.state !== 'stopped' && w.state !== 'failed');
}

/** Targets of the versions with traffic; `versions` lists them stable first. */
export function allocate(decision: Counts, versions: readonly VersionView[]): VersionTargets[] {
  const [only] = versions;
  if (versions.length === 1 && only) return [{ version: only.version, ...pick(decision) }];
  const standbyShares = largestRemainder(
    decision.standby,
    versions.map((v) => v.weight),
  );
  const shaped = versions.map((v, i) => {
    const active = decision.active > 0 ? Math.max(1, Math.round((decision.active * v.weight) / 100)) : 0;
    const standby = standbyShares[i] ?? 0;
    const counts = countWorkers(usableWorkers(v.workers));
    const deficit = active + standby - (counts.starting + counts.standby + counts.active);
    return { version: v.version, active, standby, deficit, starting: counts.starting };
  });
  const settled = shaped.every((s) => s.deficit <= 0 && s.starting === 0);
  const launches = shaped.reduce((sum, s) => sum + Math.max(0, s.deficit), 0);
  return shaped.map((s, i) => ({
    version: s.version,
    active: s.active,
    standby: s.standby,
    launch: Math.max(0, s.deficit) + (i === 0 ? Math.max(0, decision.launch - launches) : 0),
    drain: settled ? Math.max(0, -s.deficit) : 0,
  }));
}

/** Targets of a version without traffic (see the header). */
export function retireTargets(view: VersionView, queuedJobs: number, othersSettled: boolean): VersionTargets {
  const usable = usableWorkers(view.workers);
  const counts = countWorkers(usable);
  if (queuedJobs > 0) {
    return { version: view.version, active: Math.max(1, counts.active), standby: 0, launch: usable.length === 0 ? 1 : 0, drain: 0 };
  }
  return { version: view.version, active: 0, standby: 0, launch: 0, drain: othersSettled ? usable.length : 0 };
}

/** Whether versions' targets ask for no launches and their workers are all warm. */
export function isSettled(targets: readonly VersionTargets[], views: readonly VersionView[]): boolean {
  return targets.every((t) => t.launch === 0) && views.every((v) => countWorkers(usableWorkers(v.workers)).starting === 0);
}

/** The actions that move one version's workers to its targets (see the header for the order). */
export function planVersion(t: VersionTargets, workers: readonly ObservedWorker[]): ScalerAction[] {
  const usable = usableWorkers(workers);
  const active = usable.filter((w) => w.state === 'active');
  const standby = usable.filter((w) => w.state === 'standby');
  const starting = usable.filter((w) => isStarting(w.state));

  const toActivate = [...standby].sort(byOldest).slice(0, Math.max(0, t.active - active.length));
  const standbyLeft = standby.filter((w) => !toActivate.includes(w));
  const activeAfter = active.length + toActivate.length;

  const launchActive = Math.min(t.launch, Math.max(0, t.active - activeAfter - starting.length));
  const launchStandby = t.launch - launchActive;

  const room = Math.max(0, t.standby - standbyLeft.length);
  const toStandby = [...active].sort(byLeastBusy).slice(0, Math.min(Math.max(0, activeAfter - t.active), room));

  const surplusStandby = [...standbyLeft].sort(byNewest).slice(0, Math.max(0, standbyLeft.length + toStandby.length - t.standby));
  const candidates = unique([
    ...[...starting].sort(byNewest),
    ...surplusStandby,
    ...[...standbyLeft].sort(byNewest),
    ...active.filter((w) => !toStandby.includes(w)).sort(byLeastBusy),
  ]);
  const toDrain = candidates.slice(0, Math.max(0, t.drain));

  const v = t.version;
  return [
    ...toActivate.map((w): ScalerAction => ({ action: 'activate', version: v, workerId: w.id })),
    ...(launchActive > 0 ? [{ action: 'launch', version: v, count: launchActive, startAs: 'active' } as const] : []),
    ...(launchStandby > 0 ? [{ action: 'launch', version: v, count: launchStandby, startAs: 'standby' } as const] : []),
    ...toStandby.map((w): ScalerAction => ({ action: 'standby', version: v, workerId: w.id })),
    ...toDrain.map((w): ScalerAction => ({ action: 'drain', version: v, workerId: w.id })),
  ];
}

const ACTION_ORDER: Record<ScalerAction['action'], number> = { activate: 0, launch: 1, standby: 2, drain: 3 };

/** Every version's actions in apply order: all activations, then launches, standby moves, drains. */
export function inApplyOrder(actions: readonly ScalerAction[]): ScalerAction[] {
  return [...actions].sort((a, b) => ACTION_ORDER[a.action] - ACTION_ORDER[b.action]);
}

function pick(c: Counts): Counts {
  return { active: c.active, standby: c.standby, launch: c.launch, drain: c.drain };
}

/** Splits `total` by weights into integers summing to it; ties go to the earlier entry. */
export function largestRemainder(total: number, weights: readonly number[]): number[] {
  const sum = weights.reduce((a, b) => a + b, 0);
  if (total <= 0 || sum <= 0) return weights.map(() => 0);
  const exact = weights.map((w) => (total * w) / sum);
  const shares = exact.map(Math.floor);
  let left = total - shares.reduce((a, b) => a + b, 0);
  const order = exact.map((x, i) => ({ i, frac: x - Math.floor(x) })).sort((a, b) => b.frac - a.frac || a.i - b.i);
  for (const { i } of order) {
    if (left <= 0) break;
    shares[i] = (shares[i] ?? 0) + 1;
    left--;
  }
  return shares;
}

function unique<T>(items: T[]): T[] {
  return [...new Set(items)];
}

const started = (w: ObservedWorker) => w.startedAt ?? Number.POSITIVE_INFINITY;
/** Longest running first (unknown start last). */
const byOldest = (a: ObservedWorker, b: ObservedWorker) => started(a) - started(b) || a.id.localeCompare(b.id);
/** Newest first (unknown start last). */
const byNewest = (a: ObservedWorker, b: ObservedWorker) =>
  (b.startedAt ?? Number.NEGATIVE_INFINITY) - (a.startedAt ?? Number.NEGATIVE_INFINITY) || a.id.localeCompare(b.id);
/** Fewest jobs held first (unknown last), then newest. */
const byLeastBusy = (a: ObservedWorker, b: ObservedWorker) =>
  (a.jobsInFlight ?? Number.MAX_SAFE_INTEGER) - (b.jobsInFlight ?? Number.MAX_SAFE_INTEGER) || byNewest(a, b);
