import { describe, expect, it } from 'vitest';
import { SIMULATE_DEFAULTS } from '../kernel/config.ts';
import { compare, defaultSettings } from './compare.ts';
import { cheapestMeeting, paretoFront, parseSweep, runSweep, sweepFront, sweepGrid } from './sweep.ts';
import type { Trace } from './trace.ts';

describe('sweep grid', () => {
  it('parses NAME=V1,V2 specs over the policy fields and headroom', () => {
    expect(parseSweep(['standby=0,1,2', 'headroom=0.1,0.2'])).toEqual([
      { name: 'standby', values: [0, 1, 2] },
      { name: 'headroom', values: [0.1, 0.2] },
    ]);
    expect(sweepGrid(parseSweep(['standby=0,1', 'targetUtilization=0.7,0.9']))).toEqual([
      { standby: 0, targetUtilization: 0.7 },
      { standby: 0, targetUtilization: 0.9 },
      { standby: 1, targetUtilization: 0.7 },
      { standby: 1, targetUtilization: 0.9 },
    ]);
  });

  it('names an unknown setting, a bad value, a repeated name, an empty list', () => {
    const cases: Array<[string[], RegExp]> = [
      [['standbys=1'], /unknown setting "standbys" \(known: min, max, standby, .*headroom\)/],
      [['standby=1,x'], /"standby" must be an integer ≥ 0, got "x"/],
      [['standby=1.5'], /"standby" must be an integer/],
      [['headroom=1'], /"headroom" must be a number ≥ 0 and < 1/],
      [['targetUtilization=0'], /"targetUtilization" must be a number > 0 and ≤ 1/],
      [['standby=1', 'standby=2'], /"standby" is given twice/],
      [['standby='], /cannot read "standby="/],
      [[], /needs at least one/],
    ];
    for (const [specs, message] of cases) expect(() => parseSweep(specs), specs.join(' ')).toThrow(message);
  });

  it('marks the Pareto front and finds the cheapest point meeting the target', () => {
    const points = [
      { cost: 10, sloAttainment: 0.95 },
      { cost: 12, sloAttainment: 0.99 },
      { cost: 13, sloAttainment: 0.98 }, // dominated by the second
      { cost: 20, sloAttainment: 1 },
      { cost: 12, sloAttainment: 0.99 }, // a tie is not dominated
    ];
    expect(paretoFront(points)).toEqual([true, true, false, true, true]);
    expect(cheapestMeeting(points, 0.99)).toBe(1);
    expect(cheapestMeeting(points, 1)).toBe(3);
    expect(cheapestMeeting(points, 1.01)).toBeUndefined();
  });

  it('leaves off the front a setting a deployable baseline beats on cost and attainment, but not one only the oracle beats', () => {
    const points = [
      { cost: 10, sloAttainment: 0.99 },
      { cost: 12, sloAttainment: 0.995 }, // reactive is cheaper and better
      { cost: 20, sloAttainment: 1 },
      { cost: 31, sloAttainment: 1 }, // static-peak is cheaper and as good
    ];
    const baselines = [
      { name: 'reactive', cost: 11, sloAttainment: 0.996 },
      { name: 'static-peak', cost: 30, sloAttainment: 1 },
      // Perfect foresight beats every setting: a floor, not a rival.
      { name: 'oracle', cost: 5, sloAttainment: 1 },
    ];
    expect(sweepFront(points, baselines)).toEqual([true, false, true, false]);
    expect(paretoFront(points)).toEqual([true, true, true, false]);
  });
});

describe('runSweep', () => {
  // Three hours: quiet, a ramp to 6× and back; 1 job/s per worker.
  const perMinute = Array.from({ length: 180 }, (_, m) => 30 + 150 * Math.max(0, Math.sin((Math.PI * (m - 40)) / 100)));
  const trace: Trace = { series: { startMs: Date.UTC(2024, 0, 1), perMinute }, missing: perMinute.map(() => false), rows: 180 };
  const settings = defaultSettings(SIMULATE_DEFAULTS, { workerRps: 1, maxBatch: 4, sloMs: 20_000, coldStartMs: 60_000, seed: 3 });

  it('runs the grid on worker threads, equal to the same runs in this thread', async () => {
    const axes = parseSweep(['standby=0,2', 'headroom=0.1,0.3']);
    const r = await runSweep(trace, settings, axes, { sloTarget: 0.99, threads: 2 });
    expect(r.points).toHaveLength(4);
    expect(r.baselines.map((b) => b.name)).toEqual(['reactive', 'static-peak', 'oracle']);
    // The thread's figures are the simulator's: same settings in-process give the same numbers.
    const inline = compare(trace, { ...settings, policy: { ...settings.policy, standby: 2, targetUtilization: 0.7 } }, ['predictive']);
    const { series: _series, ...expected } = inline.policies[0] as (typeof inline.policies)[number];
    expect(r.points[3]?.setting).toEqual({ standby: 2, headroom: 0.3 });
    expect(r.points[3]?.result).toEqual(expected);
    // Holding more warm workers costs more, point for point.
    expect(r.points[2]?.result.cost).toBeGreaterThan(r.points[0]?.result.cost ?? Infinity);
    expect(r.points.some((p) => p.pareto)).toBe(true);
    // The cheapest meeting the target is chosen among the points and the deployable baselines alike.
    const chosen = r.cheapest?.kind === 'point' ? r.points[r.cheapest.index]?.result : r.cheapest && r.baselines[r.cheapest.index];
    if (r.cheapest !== undefined) expect(chosen?.sloAttainment).toBeGreaterThanOrEqual(0.99);
    const meeting = [...r.points.map((p) => p.result), ...r.baselines.filter((b) => b.name !== 'oracle')].filter(
      (p) => p.sloAttainment >= 0.99,
    );
    expect(chosen?.cost).toBe(meeting.length === 0 ? undefined : Math.min(...meeting.map((p) => p.cost)));
  }, 60_000);
});
