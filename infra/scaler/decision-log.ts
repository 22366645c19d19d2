/**
 * The scaler's decision log (DESIGN §8: "every decision is recorded with its inputs"): one Redis
 * stream per model, `<prefix>:scaler:decisions:<model>`, capped near the newest
 * DECISION_LOG_MAX_LEN entries (XADD MAXLEN ~). Each entry is one field, `record`, holding a
 * DecisionRecord as JSON: everything the policy saw and what was done about it, so the pool API
 * and a dashboard can explain each decision, and a policy change can be replayed against it.
 *
 * A decision is recorded when it changes, and otherwise once per DECISION_HEARTBEAT_MS: a steady
 * pool ticked every 2 s would fill the log (and push every change out of the pool API's last 20)
 * with identical rows. "Changes" means a field that says what the scaler decided or why: the
 * desired counts and actions, the reasons (they carry the forecast, backlog and per-worker terms,
 * rounded as the policy words them), the worker counts, the settings, the planned and applied
 * actions, the version and the leader. The times and the raw inputs behind the reasons do not
 * count on their own. The heartbeat says the scaler is alive and keeps readers that hold a record
 * until the next (the dashboard's worker timeline and forecast) supplied at least once a minute.
 * The last record per model and mode is remembered in this process: a new leader records its
 * first decision, and a record whose time is earlier than the last one (the clock went back) is
 * recorded and starts over from it.
 */

import type { Backlog, Forecast, PolicyDecision, PolicySettings, TuningChoice, WorkerCounts } from '../contracts/pool.ts';
import type { RedisClient } from '../redis/client.ts';
import { decisionStreamKey } from '../redis/keys.ts';
import type { RateSource } from './controller-observe.ts';

export const DECISION_LOG_MAX_LEN = 1000;
/** An unchanged decision is recorded again after this long (a heartbeat). */
export const DECISION_HEARTBEAT_MS = 60_000;

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
  /** Where perWorkerRatePerSec came from: busy workers, the warm-up profile, or neither (absent in records from before it). */
  perWorkerRateSource?: RateSource;
  settings: PolicySettings;
  /** Cold starts the settings' coldStartMs was learnt from; 0: it is the setting (absent in records from before it). */
  coldStartSamples?: number;
  /** The self-tuning choice in force that decided (absent: the deployment's own policy). */
  tuning?: TuningChoice;
  decision: Omit<PolicyDecision, 'memory'>;
  /** What the controller chose to do for the decision, per version and worker. */
  planned: ScalerAction[];
  /** What it did (empty in shadow mode); an action that failed carries `error`. */
  applied: ScalerAction[];
}

export interface DecisionLog {
  /** Records the decision unless it repeats the last one recorded less than a heartbeat ago; whether it was written. */
  record(entry: DecisionRecord): Promise<boolean>;
  /** The newest `n` records of a model, newest first. */
  recent(model: string, n: number): Promise<DecisionRecord[]>;
}

export interface DecisionLogOptions {
  /** Default DECISION_HEARTBEAT_MS. */
  heartbeatMs?: number;
}

export function createDecisionLog(
  redis: Pick<RedisClient, 'xadd' | 'xrevrange'>,
  prefix: string,
  options: DecisionLogOptions = {},
): DecisionLog {
  const changes = createChangeFilter(options.heartbeatMs ?? DECISION_HEARTBEAT_MS);
  return {
    async record(entry) {
      if (!changes.isDue(entry)) return false;
      const key = decisionStreamKey(prefix, entry.model);
      await redis.xadd(key, 'MAXLEN', '~', DECISION_LOG_MAX_LEN, '*', 'record', JSON.stringify(entry));
      // Remembered only once written: a failed write is tried again on the next tick.
      changes.recorded(entry);
      return true;
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

/** What makes two records the same decision (see the header): everything but the times and the raw inputs. */
export function decisionFingerprint(r: DecisionRecord): string {
  const { active, standby, launch, drain, reasons } = r.decision;
  const tuned = r.tuning ? [r.tuning.chosen.name, r.tuning.at] : null;
  return JSON.stringify([
    r.version,
    r.leader,
    r.workers,
    r.settings,
    [active, standby, launch, drain, reasons],
    r.planned,
    r.applied,
    tuned,
  ]);
}

/** Per model and mode, the last record written: a record is due when it differs, a heartbeat passed, or time went back. */
export function createChangeFilter(heartbeatMs: number) {
  const last = new Map<string, { at: number; fingerprint: string }>();
  const keyOf = (r: DecisionRecord) => `${r.shadow ? 'shadow' : 'live'}\u0000${r.model}`;
  return {
    isDue(r: DecisionRecord): boolean {
      const previous = last.get(keyOf(r));
      if (!previous || r.at < previous.at || r.at - previous.at >= heartbeatMs) return true;
      return previous.fingerprint !== decisionFingerprint(r);
    },
    recorded(r: DecisionRecord): void {
      last.set(keyOf(r), { at: r.at, fingerprint: decisionFingerprint(r) });
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
