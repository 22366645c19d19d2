import { describe, expect, it } from 'vitest';
import { calibrate, figures, simulateArrivals } from './calibration.ts';
import { profileService } from './service.ts';

describe('calibration (the simulated side)', () => {
  it('replays exact arrivals through a fixed pool: greedy batches, 10 ms per job', () => {
    const jobs = simulateArrivals([1_000, 1_000, 1_005], 1, (b) => 10 * b, 2);
    // The idle worker takes the first job alone the moment it arrives (as the real batcher does
    // a lone job after a quiet spell); the other two wait for it and go together at 1010.
    expect(jobs).toEqual([
      { arrivedMs: 1_000, startedMs: 1_000, doneMs: 1_010 },
      { arrivedMs: 1_000, startedMs: 1_010, doneMs: 1_030 },
      { arrivedMs: 1_005, startedMs: 1_010, doneMs: 1_030 },
    ]);
    const f = figures(jobs);
    expect(f.queueWaitMs).toEqual({ p50: 5, p95: 10, p99: 10 });
    expect(f.jobsPerSec).toBe(100);
  });

  it('recovers a per-job overhead the batch profile misses, fitted on the drain', () => {
    // The "real" worker: the profile's forward pass plus 2 ms per job; 4-row jobs, batches of 16 rows.
    const profile = [
      { batch: 1, ms: 1 },
      { batch: 16, ms: 4 },
    ];
    const pass = profileService(profile);
    const realService = (jobs: number) => pass(jobs * 4) + jobs * 2;
    const burst = new Array<number>(400).fill(10_000);
    const replayArrivals = Array.from({ length: 300 }, (_, i) => 20_000 + i * 9);
    const c = calibrate({
      workers: 1,
      rowsPerJob: 4,
      maxBatchRows: 16,
      profile,
      drains: [
        simulateArrivals(burst, 1, realService, 4),
        simulateArrivals(
          burst.map((t) => t + 60_000),
          1,
          realService,
          4,
        ),
      ],
      replay: simulateArrivals(replayArrivals, 1, realService, 4),
    });
    expect(c.fitted.jobOverheadMs).toBeCloseTo(2, 1);
    expect(c.profileOnly.drain.jobsPerSec).toBeGreaterThan(c.measured.drain.jobsPerSec);
    expect(c.fitted.drain.jobsPerSec).toBeCloseTo(c.measured.drain.jobsPerSec, 0);
    expect(c.fitted.replay.resultMs.p95).toBeCloseTo(c.measured.replay.resultMs.p95, 0);
    expect(c.rows.map((r) => r.what)).toContain('replay queue wait p95 (ms)');
  });
});
