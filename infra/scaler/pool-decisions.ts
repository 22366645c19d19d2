/**
 * A shared pool's decision log: one Redis stream per pool, `<prefix>:scaler:pool-decisions:<pool>`
 * (capped near POOL_DECISION_LOG_MAX_LEN: a pool's record lists every member and every worker's
 * holdings, so it is far larger than a deployment's and fewer are kept), each entry one `record` field holding a PoolDecisionRecord
 * as JSON: the planner's inputs (settings, each member's forecast, backlog, rate, load time and
 * memory; the workers and what each holds), the plan (workers, standby, placement, loads and
 * evictions with reasons, terms) and what was done — so `GET /v1/pool` and the dashboard can
 * explain each decision, and a planner change can be replayed against it.
 *
 * As the per-deployment log (decision-log.ts): a decision is recorded when it changes, and
 * otherwise once per DECISION_HEARTBEAT_MS; "changes" leaves out the time and the raw forecasts.
 */

import type { Forecast } from '../contracts/pool.ts';
import type { RedisClient } from '../redis/client.ts';
import { poolDecisionStreamKey } from '../redis/keys.ts';
import { DECISION_HEARTBEAT_MS } from './decision-log.ts';
import type { PoolModelInput, PoolPlan, PoolPlanSettings, PoolPlanTerms, PoolWorkerView } from './pool-plan.ts';

export const POOL_DECISION_LOG_MAX_LEN = 200;

/** One thing done (or, in shadow mode, that would have been) to a shared pool. */
export type PoolAction =
  | { action: 'launch'; count: number; error?: string }
  | { action: 'drain'; workerId: string; error?: string }
  | { action: 'hold'; workerId: string; models: string[]; error?: string }
  | { action: 'load-now'; workerId: string; model: string; why: string; error?: string };

export interface PoolDecisionRecord {
  at: number;
  pool: string;
  shadow: boolean;
  leader: string;
  /** What made the decision: a tick (the planner) or a first request's placement at once. */
  trigger: 'tick' | 'demand';
  settings: PoolPlanSettings;
  /** Per member model version, what the planner was given (forecast summarised). */
  models: Array<Omit<PoolModelInput, 'forecast'> & { forecast: { ratePerSec: number; upperRatePerSec?: number; method: string } }>;
  workers: PoolWorkerView[];
  /** A demand record's has no terms (it placed one model; the planner did not run). */
  plan: Omit<PoolPlan, 'memory' | 'terms'> & { terms?: PoolPlanTerms };
  applied: PoolAction[];
}

export interface PoolDecisionLog {
  record(entry: PoolDecisionRecord): Promise<boolean>;
  /** The newest `n` records of a pool, newest first. */
  recent(pool: string, n: number): Promise<PoolDecisionRecord[]>;
}

export function createPoolDecisionLog(
  redis: Pick<RedisClient, 'xadd' | 'xrevrange'>,
  prefix: string,
  options: { heartbeatMs?: number } = {},
): PoolDecisionLog {
  const heartbeatMs = options.heartbeatMs ?? DECISION_HEARTBEAT_MS;
  const last = new Map<string, { at: number; fingerprint: string }>();
  return {
    async record(entry) {
      const key = `${entry.shadow ? 'shadow' : 'live'}\u0000${entry.pool}`;
      const fingerprint = poolDecisionFingerprint(entry);
      const previous = last.get(key);
      const due = !previous || entry.at < previous.at || entry.at - previous.at >= heartbeatMs || previous.fingerprint !== fingerprint;
      if (!due) return false;
      await redis.xadd(
        poolDecisionStreamKey(prefix, entry.pool),
        'MAXLEN',
        '~',
        POOL_DECISION_LOG_MAX_LEN,
        '*',
        'record',
        JSON.stringify(entry),
      );
      last.set(key, { at: entry.at, fingerprint });
      return true;
    },
    async recent(pool, n) {
      if (n <= 0) return [];
      const entries = await redis.xrevrange(poolDecisionStreamKey(prefix, pool), '+', '-', 'COUNT', n);
      const records: PoolDecisionRecord[] = [];
      for (const [, fields] of entries) {
        const i = fields.indexOf('record');
        if (i < 0 || i + 1 >= fields.length) continue;
        try {
          records.push(JSON.parse(fields[i + 1] as string) as PoolDecisionRecord);
        } catch {
          // a malformed entry is skipped
        }
      }
      return records;
    },
  };
}

/** What a placement at once did, as a record: the pool as it stood, the one load (or launch) and why. */
export function demandRecord(
  base: Pick<PoolDecisionRecord, 'at' | 'pool' | 'shadow' | 'leader' | 'settings' | 'workers' | 'applied'>,
  model: string,
  load: { workerId: string; why: string } | undefined,
  launched: boolean,
): PoolDecisionRecord {
  const warm = base.workers.filter((w) => w.state === 'warm');
  return {
    ...base,
    trigger: 'demand',
    models: [],
    plan: {
      workers: base.workers.length + (launched ? 1 : 0),
      // As the pool stood when the placement was asked, before the load lands.
      active: warm.filter((w) => w.models.length > 0).length,
      standby: warm.filter((w) => w.models.length === 0).length,
      launch: launched ? 1 : 0,
      drain: [],
      placement: [],
      loads: load ? [{ workerId: load.workerId, model, reason: `first request, no worker held it: ${load.why}` }] : [],
      evictions: [],
      reasons: [launched ? `${model}: first request and no warm worker: launch one` : `${model}: first request placed at once`],
    },
  };
}

/** A forecast as a record keeps it: the rates that sized the pool, and how they were forecast. */
export function forecastSummary(f: Forecast): PoolDecisionRecord['models'][number]['forecast'] {
  return { ratePerSec: f.ratePerSec, ...(f.upperRatePerSec !== undefined ? { upperRatePerSec: f.upperRatePerSec } : {}), method: f.method };
}

/** What makes two records the same decision: the counts, the placement, the actions and why; not the time or the raw inputs. */
export function poolDecisionFingerprint(r: PoolDecisionRecord): string {
  const { workers, active, standby, launch, drain, placement, loads, evictions, reasons } = r.plan;
  const held = r.workers.map((w) => [w.id, w.state, w.models.map((h) => [h.model, h.loading])]);
  return JSON.stringify([
    r.leader,
    r.trigger,
    r.settings,
    held,
    [workers, active, standby, launch, drain, placement, loads, evictions, reasons],
    r.applied,
  ]);
}
