/**
 * `GET /v1/pool` (DESIGN §5, issue 4 §7): per deployment, its workers (from their heartbeats),
 * its queues (waiting, prioritized, delayed, active and the oldest job's age, over every version
 * it lists), the scaler's latest forecast and targets, and its last decisions with their inputs
 * (infra/scaler/decision-log.ts). `forecast` and `desired` are null until the scaler has decided
 * for the deployment; they come from the newest live decision, or the newest shadow one when only
 * a shadow scaler runs. `terms` are that decision's terms (use-cases/pool-terms.ts): the forecast's
 * mean and upper quantile, the SLO sizing, the backlog in rows, the standby for bursts, the
 * stabilisation and minimum-lifetime holds, which of them set each count, and whether the cold
 * start was learnt and the per-worker rate measured. Auth is applied by app.ts to `/v1/*`;
 * deployments are not per tenant.
 *
 * Shared pools (issue 31) are listed beside the deployments, under `sharedPools`
 * (use-cases/shared-pool-view.ts): each pool's workers and the models each holds, and the pool
 * controller's latest decision with its loads, evictions and terms.
 *
 * Where workers run is for ADMIN_TENANTS only (issue 20): every tenant sees the same counts,
 * states, queues and decisions (the dashboard draws them), but to the others a worker is an
 * opaque alias, without its pid or host, and the decisions name workers by the same aliases,
 * without the leader's identity or the provider's error text (which may carry host or cluster
 * names). A map of the fleet's hosts is what an attacker inside the network wants first.
 */
import { createHash } from 'node:crypto';
import { Hono } from 'hono';
import type { Backlog } from '../../infra/contracts/pool.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { createDeploymentStore, type Deployment, type DeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { createSharedPoolStore, type SharedPoolStore } from '../../infra/deployments/pool-store.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { createDecisionLog, createPoolDecisionLog, type DecisionRecord, type ScalerAction } from '../../infra/scaler/index.ts';
import type { AuthEnv } from '../http/auth.ts';
import type { Clock } from '../ports.ts';
import { type PoolTerms, poolTerms, redisScalerMeasurements, type ScalerMeasurements } from '../use-cases/pool-terms.ts';
import { type SharedPoolView, sharedPoolViews, withoutWhereSharedWorkersRun } from '../use-cases/shared-pool-view.ts';

export const POOL_DECISIONS_SHOWN = 20;

export interface PoolRoutesDeps {
  redis: RedisClient;
  prefix: string;
  /** Default: the deployment store on `redis`. */
  deployments?: Pick<DeploymentStore, 'list'>;
  /** Default: the shared pool store on `redis`. */
  pools?: Pick<SharedPoolStore, 'list' | 'members'>;
  /** A deployment's queues summed over the versions named (infra/queue/queue-stats.ts `backlog`). */
  backlog: (target: { model: string; versions: readonly string[] }) => Promise<Backlog>;
  /** Tenants that see workers' pids and hosts (ADMIN_TENANTS); none when absent. */
  adminTenants?: readonly string[];
  clock?: Clock;
  /** What the scaler measured, for records that do not say where their inputs came from; default: read from `redis`. */
  measurements?: ScalerMeasurements;
}

export interface PoolWorkerView {
  id: string;
  version: string;
  state: WorkerState;
  /** Admin tenants only. */
  pid?: number;
  /** Admin tenants only. */
  host?: string;
  rowsPerSec: number;
  /** Epoch ms the worker entered its state when it reports that, else when it started. */
  since: number;
}

export interface PoolDeploymentView {
  model: string;
  version: string;
  versions: Deployment['versions'];
  workers: PoolWorkerView[];
  queue: Backlog;
  forecast: { ratePerSec: number; horizonS: number; method: string } | null;
  desired: { active: number; standby: number; launched: number; shadow: boolean; at: number } | null;
  /** What set the latest decision's numbers; null until the scaler has decided. */
  terms: PoolTerms | null;
  decisions: DecisionRecord[];
}

export interface PoolView {
  at: number;
  deployments: PoolDeploymentView[];
  sharedPools: SharedPoolView[];
}

export function poolRoutes(deps: PoolRoutesDeps): Hono<AuthEnv> {
  const app = new Hono<AuthEnv>();
  const deployments = deps.deployments ?? createDeploymentStore(deps.redis, deps.prefix);
  const decisions = createDecisionLog(deps.redis, deps.prefix);
  const clock = deps.clock ?? systemClock;
  const admins = deps.adminTenants ?? [];
  const measurements = deps.measurements ?? redisScalerMeasurements(deps.redis, deps.prefix);
  const shared = {
    pools: deps.pools ?? createSharedPoolStore(deps.redis, deps.prefix),
    decisions: createPoolDecisionLog(deps.redis, deps.prefix),
  };

  const viewOf = async (d: Deployment, beats: HeartbeatPayload[]): Promise<PoolDeploymentView> => {
    const [queue, recent] = await Promise.all([
      deps.backlog({ model: d.model, versions: d.versions.map((v) => v.version) }),
      decisions.recent(d.model, POOL_DECISIONS_SHOWN),
    ]);
    const latest = recent.find((r) => !r.shadow) ?? recent[0];
    const terms = await poolTerms(latest, measurements);
    return {
      model: d.model,
      version: d.version,
      versions: d.versions,
      workers: beats.filter((b) => b.model === d.model).map(workerView),
      queue,
      forecast: latest
        ? { ratePerSec: latest.forecast.ratePerSec, horizonS: latest.forecast.horizonS, method: latest.forecast.method }
        : null,
      desired: latest
        ? {
            active: latest.decision.active,
            standby: latest.decision.standby,
            launched: latest.decision.launch,
            shadow: latest.shadow,
            at: latest.at,
          }
        : null,
      terms,
      decisions: recent,
    };
  };

  app.get('/v1/pool', async (c) => {
    const [all, beats] = await Promise.all([deployments.list(), listHeartbeats(deps.redis, deps.prefix)]);
    const [views, sharedPools] = await Promise.all([Promise.all(all.map((d) => viewOf(d, beats))), sharedPoolViews(shared, beats)]);
    const view: PoolView = { at: clock.now(), deployments: views, sharedPools };
    return c.json(admins.includes(c.get('tenant')) ? view : withoutWhereWorkersRun(view));
  });

  return app;
}

/** The pool as a tenant outside ADMIN_TENANTS sees it: workers by alias, no pid, host or leader. */
export function withoutWhereWorkersRun(view: PoolView): PoolView {
  return {
    ...view,
    sharedPools: withoutWhereSharedWorkersRun(view.sharedPools, workerAlias),
    deployments: view.deployments.map((d) => ({
      ...d,
      workers: d.workers.map(({ pid: _pid, host: _host, ...w }) => ({ ...w, id: workerAlias(w.id) })),
      decisions: d.decisions.map((r) => ({
        ...r,
        leader: 'scaler',
        planned: r.planned.map(aliasAction),
        applied: r.applied.map(aliasAction),
      })),
    })),
  };
}

function aliasAction(a: ScalerAction): ScalerAction {
  const named = 'workerId' in a ? { ...a, workerId: workerAlias(a.workerId) } : { ...a };
  if (named.error !== undefined) named.error = 'failed';
  return named;
}

/** A stable stand-in for a worker id (`<host>-<pid>-<random>`): the same worker, the same alias. */
export function workerAlias(id: string): string {
  return `w-${createHash('sha256').update(id).digest('hex').slice(0, 12)}`;
}

function workerView(b: HeartbeatPayload): PoolWorkerView {
  return {
    id: b.id,
    version: b.version,
    state: b.state,
    pid: b.pid,
    host: b.host,
    rowsPerSec: b.rowsPerS,
    since: typeof b.stateSince === 'number' ? b.stateSince : b.startedAt,
  };
}
