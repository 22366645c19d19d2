/**
 * The dashboard simulator's worker, from the deployment's measurements: the per-job overhead is
 * fitted so the simulated rate equals the rate the scaler measured (as `simulate calibrate` fits
 * it on a drain), the freshest profile of the stable version is used, and whatever was not
 * measured is named instead of replaced silently.
 */
import { describe, expect, it } from 'vitest';
import type { HeartbeatPayload } from '../../infra/fleet/worker-states.ts';
import { ASSUMED_ROWS_PER_SEC, DEFAULT_MAX_BATCH, latestProfile, worldModel } from './world-model.ts';

/** 32 rows in 16 ms at the chosen batch: 2000 rows/s of forward passes. */
const profile = {
  points: [
    { batch: 1, ms: 1 },
    { batch: 32, ms: 16 },
  ],
  chosenBatch: 32,
  rowsPerS: 2000,
};

function beat(id: string, version: string, updatedAt: number, rowsPerS?: number): HeartbeatPayload {
  return {
    id,
    model: 'm',
    version,
    state: 'active',
    pid: 1,
    host: 'h',
    startedAt: 0,
    updatedAt,
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    ...(rowsPerS === undefined
      ? {}
      : {
          batchProfile: {
            threads: 1,
            chosenBatch: 32,
            rowsPerS,
            entries: [{ batch: 32, p50Ms: (32 / rowsPerS) * 1000, p95Ms: 1, rowsPerS }],
          },
        }),
  };
}

describe('worldModel', () => {
  it('fits the per-job overhead so a simulated worker serves at the measured rate', () => {
    const w = worldModel(profile, 400);
    // 1/400 s − 1/2000 s per row = 2 ms outside the forward pass.
    expect(w).toMatchObject({ source: 'profile+measured', jobOverheadMs: 2, workerRowsPerSec: 400, maxBatch: 32, missing: [] });
    expect(w.measuredRowsPerSec).toBe(400);
    expect(w.profileRowsPerSec).toBe(2000);
    expect(w.batchProfile).toEqual(profile.points);
  });

  it('never fits a negative overhead: a measured rate above the profile keeps the profile', () => {
    expect(worldModel(profile, 5000)).toMatchObject({ jobOverheadMs: 0, workerRowsPerSec: 2000 });
  });

  it('with a profile and no measured rate, says the overhead is not measured', () => {
    const w = worldModel(profile, undefined);
    expect(w).toMatchObject({ source: 'profile', jobOverheadMs: 0, workerRowsPerSec: 2000, measuredRowsPerSec: null });
    expect(w.missing).toEqual([expect.stringMatching(/^per-job overhead: the scaler has not measured a busy worker/)]);
  });

  it('with a measured rate and no profile, serves at the measured rate and names the assumed batch', () => {
    const w = worldModel(undefined, 250);
    expect(w).toMatchObject({ source: 'measured', workerRowsPerSec: 250, maxBatch: DEFAULT_MAX_BATCH, profileRowsPerSec: null });
    expect(w.batchProfile).toBeUndefined();
    expect(w.missing).toEqual([expect.stringMatching(/^batch profile: no live worker published one/)]);
  });

  it('with nothing measured, says what it assumes rather than using a default silently', () => {
    for (const rate of [undefined, 0, Number.NaN]) {
      const w = worldModel(undefined, rate);
      expect(w).toMatchObject({ source: 'assumed', workerRowsPerSec: ASSUMED_ROWS_PER_SEC, measuredRowsPerSec: null });
      expect(w.missing[0]).toContain(`${ASSUMED_ROWS_PER_SEC} rows/s per worker assumed`);
      expect(w.missing).toHaveLength(2);
    }
  });
});

describe('latestProfile', () => {
  it("takes the stable version's freshest profile, then another version's, and none without one", () => {
    const beats = [beat('a', '2', 300, 900), beat('b', '1', 100, 1000), beat('c', '1', 200, 1200), beat('d', '1', 400)];
    expect(latestProfile(beats, 'm', '1')?.rowsPerS).toBe(1200);
    expect(latestProfile(beats, 'm', '3')?.rowsPerS).toBe(900);
    expect(latestProfile([beat('d', '1', 400)], 'm', '1')).toBeUndefined();
    expect(latestProfile(beats, 'other', '1')).toBeUndefined();
  });
});
