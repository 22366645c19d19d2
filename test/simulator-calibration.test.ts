/**
 * The simulator against a real worker, briefly: the suite's Redis and S3 server, the API
 * in-process, one real `warmpool worker` process, a burst drained before and after a 15-second
 * replay of the Azure trace. Asserts only that the comparison is produced with sane values —
 * finite, positive, every job accounted for — never how close the prediction is (that depends on
 * the machine; docs/SIMULATOR.md reports a full run).
 */
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { calibrationText, DEFAULT_CALIBRATION_TRACE, runCalibration } from '../scripts/commands/simulate-calibrate.ts';
import { testEnv } from './support/services.ts';

const present = existsSync(DEFAULT_CALIBRATION_TRACE);
if (!present) console.warn(`calibration test skipped: ${DEFAULT_CALIBRATION_TRACE} not found`);

describe.skipIf(!present)('warmpool simulate calibrate', () => {
  it('replays a short trace against a real worker and compares it with the simulator', async () => {
    const logs: string[] = [];
    const report = await runCalibration(
      { trace: DEFAULT_CALIBRATION_TRACE, fromMinute: 10, minutes: 0.25, load: 0.5, workers: 1, rowsPerJob: 32, drainJobs: 200, seed: 1 },
      testEnv({ WARMUP_ITERATIONS: '2' }),
      (line) => logs.push(line),
    );
    console.log(`\n${calibrationText(report)}\n`);
    const c = report.calibration;
    expect(report.real.replayJobs).toBeGreaterThan(0);
    expect(report.real.drainJobs).toBe(400);
    expect(c.measured.replay.jobs).toBe(report.real.replayJobs);
    // The simulator saw the same jobs.
    expect(c.profileOnly.replay.jobs).toBe(report.real.replayJobs);
    expect(c.fitted.drain.jobs).toBe(400);
    for (const row of c.rows) {
      for (const value of [row.measured, row.profileOnly, row.fitted]) {
        expect(Number.isFinite(value), row.what).toBe(true);
        expect(value, row.what).toBeGreaterThanOrEqual(0);
      }
    }
    for (const rate of [c.measured.drain.jobsPerSec, c.profileOnly.drain.jobsPerSec, c.fitted.drain.jobsPerSec])
      expect(rate).toBeGreaterThan(0);
    expect(c.fitted.jobOverheadMs).toBeGreaterThanOrEqual(0);
    expect(report.real.profile.length).toBeGreaterThan(0);
    const phases = report.real.coldStarts[0];
    expect(phases).toBeDefined();
    for (const ms of Object.values(phases ?? {})) expect(ms).toBeGreaterThanOrEqual(0);
    expect(calibrationText(report)).toContain('| service rate, drain (jobs/s) |');
  }, 300_000);
});
