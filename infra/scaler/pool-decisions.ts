/**
 * A shared pool's decision log: one Redis stream per pool, `<prefix>:scaler:pool-decisions:<pool>`
 * (capped near DECISION_LOG_MAX_LEN), each entry one `record` field holding a PoolDecisionRecord
 * as JSON: the planner's inputs (settings, each member's forecast, backlog, rate, load time and
 * memory; the workers and what each holds), the plan (workers, standby, placement, loads and
 * evictions with reasons, terms) and what was done — so `GET /v1/pool` and the dashboard can
 * explain each decision, and a planner change can be replayed against it.
 *
 * As the per-deployment log (decision-log.ts): a decision is recorded when it changes, and
 * otherwise once per DECISION_HEARTBEAT_MS; "changes" leaves out the time and the raw forecasts.
 */

import type { RedisClient } from '../redis/client.ts';
import { poolDecisionStreamKey } from '../redis/keys.ts';
import { DECISION_HEARTBEAT_MS, DECISION_LOG_MAX_LEN } from './decision-log.ts';
import type { PoolModelInput, PoolPlan, PoolPlanSettings, PoolWorkerView } from './pool-plan.ts';

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
  plan: Omit<PoolPlan, 'memory'>;
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
        DECISION_LOG_MAX_LEN,
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
