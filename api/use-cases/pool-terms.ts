/**
 * What set the pool's numbers (issue 17 §4), as `GET /v1/pool` and the dashboard show them: the
 * terms of a deployment's latest scaler decision, named as the policy names them
 * (infra/scaler/policy.ts `terms`): the forecast's mean and upper quantile it sized from, the SLO
 * sizing, the backlog's ask, the standby for the burst a cold start cannot absorb, the active held
 * by the scale-down window and the pool held for its minimum lifetime, and which of them set the
 * active and standby counts. Everything comes from the decision record, so the view explains the
 * decision the scaler made, not one recomputed here.
 *
 * Two of the policy's inputs also say where they came from:
 *   - the per-worker rate: measured on busy workers, the warm-up batch profile until then, or none
 *     (the policy then assumes a low rate and holds scale-down);
 *   - the cold start: learnt from the pool's own recent starts, or the setting until there is one.
 * A record says so itself (`perWorkerRateSource`, `coldStartSamples`); one from a controller that
 * does not is read against the scaler's measurements (its busy-rate EWMA and its cold-start
 * samples, infra/scaler/controller-observe.ts), which the controller always plans from once they
 * exist: a measured rate replaces the profile for good, and one sample makes the cold start learnt.
 */
import type { DecisionTerms, TuningChoice } from '../../infra/contracts/pool.ts';
import { queuedJobs } from '../../infra/queue/index.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { scalerColdStartKey, scalerWorkerRateKey } from '../../infra/redis/keys.ts';
import type { DecisionRecord } from '../../infra/scaler/index.ts';

/** Where the per-worker rate came from (see the header). */
export type RateSource = 'measured' | 'warm-up' | 'none';

/** A decision record as a controller that names its inputs' sources writes it; older ones lack both. */
export type SourcedDecisionRecord = DecisionRecord & {
  perWorkerRateSource?: RateSource;
  /** Cold starts the settings' coldStartMs was learnt from; 0: it is the setting. */
  coldStartSamples?: number;
};

export interface PoolTerms {
  /** The decision they come from: its time, and whether a shadow scaler made it. */
  at: number;
  shadow: boolean;
  /** The forecast the policy sized from; the upper quantile, its level and the dispersion are null where the forecaster gave none. */
  forecast: {
    ratePerSec: number;
    upperRatePerSec: number | null;
    upperQuantile: number | null;
    dispersion: number | null;
    burstRatePerSec: number;
    /** Recent peak rates by how long they lasted (seconds), shortest first; empty where the forecaster gave none. */
    burstsBySpan: Array<{ spanS: number; ratePerSec: number }>;
    horizonS: number;
    method: string;
  };
  sloQueueWaitMs: number;
  /** The policy's own terms; null when the policy that decided gave none. */
  policy: DecisionTerms | null;
  perWorker: { ratePerSec: number; source: RateSource };
  coldStart: { ms: number; source: 'learned' | 'setting'; samples: number };
  /** The queued jobs the policy saw, in rows: jobs × rows per job (1 where the backlog did not say). */
  backlog: { jobs: number; rowsPerJob: number; rows: number };
  /** The self-tuning choice that decided, with its candidate table (issue 28); null without one. */
  tuning: TuningChoice | null;
}

/** What the scaler has measured for a model (its own keys: a shadow scaler keeps its own). */
export interface ScalerMeasurements {
  /** The busy-worker rate the scaler measured; undefined before the first. */
  measuredRate(model: string, shadow: boolean): Promise<number | undefined>;
  /** Cold-start samples it keeps for the model. */
  coldStartSamples(model: string, shadow: boolean): Promise<number>;
}

export function redisScalerMeasurements(redis: Pick<RedisClient, 'get' | 'llen'>, prefix: string): ScalerMeasurements {
  return {
    async measuredRate(model, shadow) {
      const rate = Number(await redis.get(scalerWorkerRateKey(prefix, shadow, model)));
      return Number.isFinite(rate) && rate > 0 ? rate : undefined;
    },
    coldStartSamples: (model, shadow) => redis.llen(scalerColdStartKey(prefix, shadow, model)),
  };
}

/** The terms of `record` (a deployment's latest decision); null without one. */
export async function poolTerms(record: SourcedDecisionRecord | undefined, measurements: ScalerMeasurements): Promise<PoolTerms | null> {
  if (!record) return null;
  const f = record.forecast;
  const [rateSource, samples] = await Promise.all([rateSourceOf(record, measurements), coldStartSamplesOf(record, measurements)]);
  return {
    at: record.at,
    shadow: record.shadow,
    forecast: {
      ratePerSec: f.ratePerSec,
      upperRatePerSec: f.upperRatePerSec ?? null,
      upperQuantile: f.upperQuantile ?? null,
      dispersion: f.dispersion ?? null,
      burstRatePerSec: f.burstRatePerSec,
      burstsBySpan: (f.burstsBySpan ?? []).map((b) => ({ spanS: b.spanS, ratePerSec: b.ratePerSec })),
      horizonS: f.horizonS,
      method: f.method,
    },
    sloQueueWaitMs: record.settings.sloQueueWaitMs,
    policy: record.decision.terms ?? null,
    perWorker: { ratePerSec: record.perWorkerRatePerSec, source: rateSource },
    coldStart: { ms: record.settings.coldStartMs, source: samples > 0 ? 'learned' : 'setting', samples },
    backlog: backlogRows(record),
    tuning: record.tuning ?? null,
  };
}

async function rateSourceOf(r: SourcedDecisionRecord, m: ScalerMeasurements): Promise<RateSource> {
  if (r.perWorkerRateSource) return r.perWorkerRateSource;
  if (!(r.perWorkerRatePerSec > 0)) return 'none';
  return (await m.measuredRate(r.model, r.shadow)) !== undefined ? 'measured' : 'warm-up';
}

async function coldStartSamplesOf(r: SourcedDecisionRecord, m: ScalerMeasurements): Promise<number> {
  return r.coldStartSamples ?? (await m.coldStartSamples(r.model, r.shadow));
}

function backlogRows(r: DecisionRecord): PoolTerms['backlog'] {
  const b = r.backlog;
  const jobs = queuedJobs(b);
  const rowsPerJob = b.rowsPerJob !== undefined && b.rowsPerJob >= 1 ? b.rowsPerJob : 1;
  return { jobs, rowsPerJob, rows: jobs * rowsPerJob };
}
