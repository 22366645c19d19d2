/**
 * The shared pools as `GET /v1/pool` shows them (issue 31 §4): per pool, its settings and member
 * models, its workers (heartbeats that name the pool) with the models each holds and in which
 * state, and the pool controller's latest decision with its terms (pooled vs per-model standby,
 * what set the worker count, per model copies and keep times), its loads and evictions with their
 * reasons, and the last decisions (infra/scaler/pool-decisions.ts).
 *
 * Where workers run is for ADMIN_TENANTS only, as for a deployment's workers (routes/pool.ts):
 * to the others a worker is its alias everywhere it appears, the leader is `scaler`, and an
 * action's error is `failed`.
 */
import type { SharedPool } from '../../infra/contracts/shared-pool.ts';
import type { HeartbeatPayload, PoolModelView, PoolWorkerCounts } from '../../infra/fleet/worker-states.ts';
import type { PoolAction, PoolDecisionLog, PoolDecisionRecord, PoolPlanTerms } from '../../infra/scaler/index.ts';

/** Fewer than a deployment's 20: a pool's record carries every member and every worker's holdings. */
export const SHARED_POOL_DECISIONS_SHOWN = 10;

export interface SharedPoolWorkerView {
  id: string;
  state: HeartbeatPayload['state'];
  /** Admin tenants only. */
  pid?: number;
  /** Admin tenants only. */
  host?: string;
  since: number;
  memoryBudgetBytes?: number;
  models: PoolModelView[];
  /** Its loads, models let go and jobs finished since it began (absent from a worker that does not report them). */
  counts?: PoolWorkerCounts;
}

/** The pool's workers' counts summed: what the workers up now did since each began. */
export interface SharedPoolCounts extends PoolWorkerCounts {
  /** jobsHit / (jobsHit + jobsMiss): the share of jobs whose model was resident when they were queued; null before any job. */
  hitRatio: number | null;
}

export interface SharedPoolLatest {
  at: number;
  shadow: boolean;
  trigger: PoolDecisionRecord['trigger'];
  workers: number;
  active: number;
  standby: number;
  launch: number;
  drain: string[];
  loads: PoolDecisionRecord['plan']['loads'];
  evictions: PoolDecisionRecord['plan']['evictions'];
  reasons: string[];
  terms: PoolPlanTerms;
}

export interface SharedPoolView {
  name: string;
  max: number;
  min: number;
  standby: number;
  memoryMb: number;
  /** The models whose deployments joined it, sorted. */
  members: string[];
  workers: SharedPoolWorkerView[];
  /** Models resident over all workers (copies counted). */
  resident: number;
  counts: SharedPoolCounts;
  /** The latest tick's decision (live before shadow), null until the pool controller has planned the pool. */
  latest: SharedPoolLatest | null;
  decisions: PoolDecisionRecord[];
}

export interface SharedPoolViewDeps {
  pools: { list(): Promise<SharedPool[]>; members(name: string): Promise<string[]> };
  decisions: Pick<PoolDecisionLog, 'recent'>;
}

export async function sharedPoolViews(deps: SharedPoolViewDeps, beats: readonly HeartbeatPayload[]): Promise<SharedPoolView[]> {
  const pools = await deps.pools.list();
  return Promise.all(pools.map((p) => viewOf(deps, p, beats)));
}

async function viewOf(deps: SharedPoolViewDeps, pool: SharedPool, beats: readonly HeartbeatPayload[]): Promise<SharedPoolView> {
  const [recent, members] = await Promise.all([
    deps.decisions.recent(pool.name, SHARED_POOL_DECISIONS_SHOWN),
    deps.pools.members(pool.name),
  ]);
  // A placement at once (trigger `demand`) has no terms: the latest is the newest planned one.
  const planned = recent.filter((r): r is PoolDecisionRecord & { plan: { terms: PoolPlanTerms } } => r.plan.terms !== undefined);
  const latest = planned.find((r) => !r.shadow) ?? planned[0];
  const workers = beats.filter((b) => b.pool === pool.name).map(workerView);
  return {
    name: pool.name,
    max: pool.max,
    min: pool.min,
    standby: pool.standby,
    memoryMb: pool.memoryMb,
    members,
    workers,
    resident: workers.reduce((t, w) => t + w.models.filter((m) => m.state === 'active').length, 0),
    counts: countsOf(workers),
    latest: latest ? latestOf(latest) : null,
    decisions: recent,
  };
}

function countsOf(workers: SharedPoolWorkerView[]): SharedPoolCounts {
  const sum: PoolWorkerCounts = { loads: 0, evictions: 0, jobsHit: 0, jobsMiss: 0 };
  for (const w of workers) {
    sum.loads += w.counts?.loads ?? 0;
    sum.evictions += w.counts?.evictions ?? 0;
    sum.jobsHit += w.counts?.jobsHit ?? 0;
    sum.jobsMiss += w.counts?.jobsMiss ?? 0;
  }
  const jobs = sum.jobsHit + sum.jobsMiss;
  return { ...sum, hitRatio: jobs > 0 ? sum.jobsHit / jobs : null };
}

function latestOf(r: PoolDecisionRecord & { plan: { terms: PoolPlanTerms } }): SharedPoolLatest {
  const { workers, active, standby, launch, drain, loads, evictions, reasons, terms } = r.plan;
  return { at: r.at, shadow: r.shadow, trigger: r.trigger, workers, active, standby, launch, drain, loads, evictions, reasons, terms };
}

function workerView(b: HeartbeatPayload): SharedPoolWorkerView {
  return {
    id: b.id,
    state: b.state,
    pid: b.pid,
    host: b.host,
    since: typeof b.stateSince === 'number' ? b.stateSince : b.startedAt,
    ...(b.memoryBudgetBytes !== undefined ? { memoryBudgetBytes: b.memoryBudgetBytes } : {}),
    models: b.models ?? [],
    ...(b.poolCounts ? { counts: b.poolCounts } : {}),
  };
}

/** The pools as a tenant outside ADMIN_TENANTS sees them (see the header); `alias` names a worker. */
export function withoutWhereSharedWorkersRun(views: SharedPoolView[], alias: (id: string) => string): SharedPoolView[] {
  const action = (a: PoolAction): PoolAction => {
    const named = 'workerId' in a ? { ...a, workerId: alias(a.workerId) } : { ...a };
    if (named.error !== undefined) named.error = 'failed';
    return named;
  };
  const placed = <T extends { workerId: string }>(x: T): T => ({ ...x, workerId: alias(x.workerId) });
  const plan = (p: PoolDecisionRecord['plan']): PoolDecisionRecord['plan'] => ({
    ...p,
    drain: p.drain.map(alias),
    placement: p.placement.map(placed),
    loads: p.loads.map(placed),
    evictions: p.evictions.map(placed),
  });
  return views.map((v) => ({
    ...v,
    workers: v.workers.map(({ pid: _pid, host: _host, ...w }) => ({ ...w, id: alias(w.id) })),
    latest: v.latest
      ? { ...v.latest, drain: v.latest.drain.map(alias), loads: v.latest.loads.map(placed), evictions: v.latest.evictions.map(placed) }
      : null,
    decisions: v.decisions.map((r) => ({
      ...r,
      leader: 'scaler',
      workers: r.workers.map((w) => ({ ...w, id: alias(w.id) })),
      plan: plan(r.plan),
      applied: r.applied.map(action),
    })),
  }));
}
