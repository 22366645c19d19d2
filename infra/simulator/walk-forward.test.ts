import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SIMULATE_DEFAULTS } from '../kernel/config.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { realiseCounts } from './arrivals.ts';
import { defaultSettings } from './compare.ts';
import type { PolicySummary, SweepResult } from './sweep.ts';
import { parseSweep, sweepReplays } from './sweep.ts';
import type { Trace } from './trace.ts';
import {
  chooseSetting,
  runWalkForward,
  splitMinutes,
  TUNED_POLICY,
  trainingTrace,
  walkForwardReplays,
  writeWalkForward,
} from './walk-forward.ts';

const START = Date.UTC(2024, 0, 1);
const trace = (perMinute: number[]): Trace => ({
  series: { startMs: START, perMinute },
  missing: perMinute.map(() => false),
  rows: perMinute.length,
});
// 1 job/s workers, batch 4, 60 s cold starts, 30 s SLO: a few workers at 30 jobs/min.
const settings = defaultSettings(SIMULATE_DEFAULTS, { workerRps: 1, maxBatch: 4, coldStartMs: 60_000, sloMs: 30_000, seed: 3 });

describe('splitMinutes', () => {
  it('splits the replayable minutes, after the history and up to --days', () => {
    const t = trace(new Array(3 * 1440).fill(10));
    expect(splitMinutes(t, settings, 0.5)).toEqual({ from: 0, split: 2160, to: 4320 });
    expect(splitMinutes(t, { ...settings, historyDays: 1 }, 0.5)).toEqual({ from: 1440, split: 2880, to: 4320 });
    expect(splitMinutes(t, { ...settings, historyDays: 1, days: 1 }, 0.25)).toEqual({ from: 1440, split: 1800, to: 2880 });
  });

  it('refuses a fraction that leaves either part empty', () => {
    const t = trace(new Array(4).fill(10));
    expect(() => splitMinutes(t, settings, 0.1)).toThrow(InvalidInputError);
    expect(() => splitMinutes(t, settings, 0.9)).toThrow(/leaves no minute to evaluate/);
    expect(() => splitMinutes(t, settings, 1)).toThrow(InvalidInputError);
  });

  it('cuts the training trace at the split: the minutes after it do not exist for the sweep', () => {
    const t = trainingTrace(trace([1, 2, 3, 4]), 2);
    expect(t.series.perMinute).toEqual([1, 2]);
    expect(t.missing).toEqual([false, false]);
  });
});

describe('chooseSetting', () => {
  const result = (cost: number, sloAttainment: number) => ({ cost, sloAttainment }) as PolicySummary;
  const sweep = (points: Array<[number, number]>): SweepResult => ({
    axes: [{ name: 'standby', values: points.map((_, i) => i) }],
    sloTarget: 0.99,
    baselines: [],
    points: points.map(([cost, slo], i) => ({ setting: { standby: i }, result: result(cost, slo), pareto: false })),
    cheapest: undefined,
  });

  it('takes the cheapest point meeting the target', () => {
    expect(
      chooseSetting(
        sweep([
          [10, 0.98],
          [12, 0.995],
          [11, 0.991],
        ]),
      ),
    ).toEqual({ index: 2, setting: { standby: 2 }, metInTraining: true });
  });

  it('takes the best attainment when none meets it, the cheaper on a tie, and says so', () => {
    expect(
      chooseSetting(
        sweep([
          [10, 0.9],
          [14, 0.95],
          [12, 0.95],
        ]),
      ),
    ).toEqual({ index: 2, setting: { standby: 2 }, metInTraining: false });
  });
});

describe('runWalkForward', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warmpool-wf-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const axes = parseSweep(['standby=0,1', 'scaleDownStabilizationMs=60000,300000']);
  // Same first half; the second half is either the same traffic or bursts of twenty times it
  // and silence — starting with a burst, so an oracle looking past the split would see it.
  const first = Array.from({ length: 120 }, (_, m) => 20 + (m % 30));
  const calm = trace([...first, ...first]);
  const wild = trace([...first, ...first.map((n, m) => (m % 40 < 10 ? n * 20 : 0))]);

  it('tunes on the first part only: a wildly different second half changes nothing the sweep saw or chose', async () => {
    const o = { trainFraction: 0.5, axes, sloTarget: 0.99, threads: 2 };
    let planned = walkForwardReplays(axes);
    let done = 0;
    const counter = { plan: (n: number) => (planned += n), done: (n = 1) => (done += n) };
    const [a, b] = [await runWalkForward(calm, settings, { ...o, counter }), await runWalkForward(wild, settings, o)];
    // Every replay was counted as it came back, and the searches gave back what they did not use.
    const searched = Object.values(a.report.atSlo?.baselines ?? {}).reduce((n, x) => n + x.runs, 0);
    expect(done).toBe(sweepReplays(axes) + 5 + searched);
    expect(planned).toBe(done);
    expect(a.split).toEqual({ from: 0, split: 120, to: 240 });
    expect(b.sweep).toEqual(a.sweep);
    expect(b.tuned).toEqual(a.tuned);
    // … while the evaluated part is the second half's own, so its scores differ.
    const jobs = (t: Trace) =>
      realiseCounts(t.series.perMinute, t.missing, 1, settings.seed)
        .slice(120)
        .reduce((x, y) => x + y, 0);
    for (const [wf, t] of [
      [a, calm],
      [b, wild],
    ] as const) {
      expect(wf.report.minutes).toEqual({ from: 120, to: 240 });
      expect(wf.report.policies.map((p) => p.name)).toEqual(['predictive', TUNED_POLICY, 'reactive', 'static-peak', 'oracle']);
      for (const p of wf.report.policies) expect(p.jobs).toBe(jobs(t));
      expect(wf.report.atSlo?.baselines.oracle?.met).toBe(true);
    }
    // The sweep's points replayed the training half's jobs only.
    const trainingJobs = realiseCounts(first, calm.missing.slice(0, 120), 1, settings.seed).reduce((x, y) => x + y, 0);
    for (const point of a.sweep.points) expect(point.result.jobs).toBe(trainingJobs);
    expect(b.report.policies[0]?.jobs).not.toBe(a.report.policies[0]?.jobs);

    writeWalkForward(dir, { file: 'wild.csv', rows: 240, minutes: 240, start: '', end: '' }, b, 0.5);
    const json = JSON.parse(readFileSync(path.join(dir, 'report.json'), 'utf8'));
    expect(json.replayedMinutes).toEqual({ from: 120, to: 240 });
    expect(json.walkForward.parts.training.minutes).toEqual([0, 120]);
    expect(json.walkForward.parts.evaluated.minutes).toEqual([120, 240]);
    expect(json.walkForward.tuned.setting).toEqual(b.tuned.setting);
    expect(json.policies.find((p: { name: string }) => p.name === 'reactive').atSlo.setting).toBe('backlogPerWorker');
    const md = readFileSync(path.join(dir, 'report.md'), 'utf8');
    expect(md).toMatch(/^# Walk-forward evaluation: wild\.csv/);
    expect(md).toContain('predictive (tuned: ');
    expect(JSON.parse(readFileSync(path.join(dir, 'sweep.json'), 'utf8')).points).toHaveLength(4);
  }, 120_000);
});
