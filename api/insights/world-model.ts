/**
 * The simulated worker of the dashboard's simulator, from what the deployment measured — the
 * same two halves `warmpool simulate calibrate` fits (infra/simulator/calibration.ts):
 *
 * - the forward pass: the batch profile a live worker's warm-up published in its heartbeat
 *   (rows → ms per pass, and the batch size it serves at);
 * - the per-job overhead: what a real worker spends per job outside the forward pass (queue
 *   fetch and lock, result write, events), which the profile cannot see. It is the overhead that
 *   makes the simulated worker serve at the rate the scaler measured on busy workers while jobs
 *   queued (its per-worker rate, infra/scaler/controller-observe.ts): 1/measured − 1/profile
 *   seconds per job, a job being one row, the replay's unit.
 *
 * With only one of them the replay uses that one (a measured rate without a profile serves at the
 * measured rate with batches of DEFAULT_MAX_BATCH). With neither, it assumes ASSUMED_ROWS_PER_SEC
 * and says so: `missing` names what was not measured, for the page to print beside the figures.
 */
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';
import { type BatchPoint, batchPointsFrom } from '../../infra/simulator/index.ts';
import { round } from './series.ts';

/** The replay's worker speed when nothing was measured (the simulator's own default). */
export const ASSUMED_ROWS_PER_SEC = 100;
/** Batch size in rows when no profile names one (the simulator's default). */
export const DEFAULT_MAX_BATCH = 32;

export interface WorldModel {
  /** Where the worker's speed comes from. */
  source: 'profile+measured' | 'profile' | 'measured' | 'assumed';
  /** Rows/s one worker serves at a full batch in the replay. */
  workerRowsPerSec: number;
  /** The scaler's per-worker rate measured under load; null when it has none. */
  measuredRowsPerSec: number | null;
  /** Warm-up's rows/s at its chosen batch (forward passes only); null without a profile. */
  profileRowsPerSec: number | null;
  /** Per job (row) beyond the forward pass, ms. */
  jobOverheadMs: number;
  maxBatch: number;
  batchProfile?: BatchPoint[];
  /** What was not measured, in words; empty when everything was. */
  missing: string[];
}

/**
 * The freshest batch profile among the model's live workers, those of `version` first; undefined
 * when none published one.
 */
export function latestProfile(beats: readonly HeartbeatPayload[], model: string, version: string) {
  const withProfile = beats
    .filter((b) => b.model === model && b.batchProfile)
    .sort((a, b) => Number(b.version === version) - Number(a.version === version) || b.updatedAt - a.updatedAt);
  for (const beat of withProfile) {
    const points = batchPointsFrom(beat);
    // The profile times one session; a worker with several runs that many passes at once.
    const rowsPerS = (beat.batchProfile?.rowsPerS ?? 0) * (beat.sessions ?? 1);
    if (points && rowsPerS > 0) return { ...points, rowsPerS };
  }
  return undefined;
}

export function worldModel(
  profile: { points: BatchPoint[]; chosenBatch?: number; rowsPerS: number } | undefined,
  measuredRowsPerSec: number | undefined,
): WorldModel {
  const measured = measuredRowsPerSec !== undefined && Number.isFinite(measuredRowsPerSec) && measuredRowsPerSec > 0;
  const m = measured ? measuredRowsPerSec : null;
  if (profile) {
    // Never negative: a measured rate above the profile's means the profile undersells, not that jobs take less than nothing.
    const jobOverheadMs = m === null ? 0 : Math.max(0, 1000 / m - 1000 / profile.rowsPerS);
    return {
      source: m === null ? 'profile' : 'profile+measured',
      workerRowsPerSec: round(1 / (1 / profile.rowsPerS + jobOverheadMs / 1000), 1),
      measuredRowsPerSec: m === null ? null : round(m, 1),
      profileRowsPerSec: round(profile.rowsPerS, 1),
      jobOverheadMs: round(jobOverheadMs, 3),
      maxBatch: profile.chosenBatch ?? DEFAULT_MAX_BATCH,
      batchProfile: profile.points,
      missing:
        m === null
          ? ['per-job overhead: the scaler has not measured a busy worker yet, so only forward passes are timed and waits may read low']
          : [],
    };
  }
  const rate = m ?? ASSUMED_ROWS_PER_SEC;
  return {
    source: m === null ? 'assumed' : 'measured',
    workerRowsPerSec: round(rate, 1),
    measuredRowsPerSec: m === null ? null : round(m, 1),
    profileRowsPerSec: null,
    jobOverheadMs: 0,
    maxBatch: DEFAULT_MAX_BATCH,
    missing: [
      ...(m === null
        ? [`worker speed: nothing measured yet, ${ASSUMED_ROWS_PER_SEC} rows/s per worker assumed, so the simulated waits are a guess`]
        : []),
      `batch profile: no live worker published one, batches of ${DEFAULT_MAX_BATCH} rows assumed`,
    ],
  };
}
