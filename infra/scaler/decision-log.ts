/**
 * The scaler's decision log (DESIGN §8: "every decision is recorded with its inputs"): one Redis
 * stream per model, `<prefix>:scaler:decisions:<model>`, capped near the newest
 * DECISION_LOG_MAX_LEN entries (XADD MAXLEN ~). Each entry is one field, `record`, holding a
 * DecisionRecord as JSON: everything the policy saw and what was done about it, so the pool API
 * and a dashboard can explain each decision, and a policy change can be replayed against it.
 */

import type { Backlog, Forecast, PolicyDecision, PolicySettings, WorkerCounts } from '../contracts/pool.ts';
import type { RedisClient } from '../redis/client.ts';
import { decisionStreamKey } from '../redis/keys.ts';

export const DECISION_LOG_MAX_LEN = 1000;

/** One thing done (or, in shadow mode, that would have been done) to the pool. */
export type ScalerAction =
  | { action: 'activate' | 'standby' | 'drain'; version: string; workerId: string; error?: string }
  | { action: 'launch'; version: string; count: number; startAs: 'active' | 'standby'; error?: string };

export interface DecisionRecord {
  /** Epoch ms of the tick. */
  at: number;
  model: string;
  /** The deployment's stable version. */
  version: string;
  shadow: boolean;
  /** The controller that decided (its leader-lock token). */
  leader: string;
  forecast: Forecast;
  backlog: Backlog;
  workers: WorkerCounts;
  perWorkerRatePerSec: number;
  settings: PolicySettings;
  decision: Omit<PolicyDecision, 'memory'>;
  /** What the controller chose to do for the decision, per version and worker. */
  planned: ScalerAction[];
  /** What it did (empty in shadow mode); an action that failed carries `error`. */
  applied: ScalerAction[];
}

export interface DecisionLog {
  record(entry: DecisionRecord): Promise<void>;
  /** The newest `n` records of a model, newest first. */
  recent(model: string, n: number): Promise<DecisionRecord[]>;
}

export function createDecisionLog(redis: Pick<RedisClient, 'xadd' | 'xrevrange'>, prefix: string): DecisionLog {
  return {
    async record(entry) {
      const key = decisionStreamKey(prefix, entry.model);
      await redis.xadd(key, 'MAXLEN', '~', DECISION_LOG_MAX_LEN, '*', 'record', JSON.stringify(entry));
    },
    async recent(model, n) {
      if (n <= 0) return [];
      const entries = await redis.xrevrange(decisionStreamKey(prefix, model), '+', '-', 'COUNT', n);
      const records: DecisionRecord[] = [];
      for (const [, fields] of entries) {
        const record = parseRecord(fields);
        if (record) records.push(record);
      }
      return records;
    },
  };
}

/** The `record` field of a stream entry; anything malformed is skipped, not thrown. */
function parseRecord(fields: string[]): DecisionRecord | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) {
    if (fields[i] !== 'record') continue;
    try {
      return JSON.parse(fields[i + 1] as string) as DecisionRecord;
    } catch {
      return undefined;
    }
  }
  return undefined;
}
