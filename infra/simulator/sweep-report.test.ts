/**
 * The sweep's "cheapest setting meeting the SLO" on a hand-made sweep: every policy that meets
 * the target is compared, baselines included, and the oracle is named as a floor, never chosen.
 */
import { describe, expect, it } from 'vitest';
import type { PolicySummary, SweepResult } from './sweep.ts';
import { cheapestPolicy } from './sweep.ts';
import { cheapestLine, sweepTable } from './sweep-report.ts';

/** A policy's figures; only cost and attainment matter to the choice. */
function summary(name: string, cost: number, sloAttainment: number): PolicySummary {
  return {
    name,
    cost,
    sloAttainment,
    jobs: 1000,
    workerSeconds: { active: cost, standby: 0, starting: 0, total: cost },
    queueWaitMs: { p50: 10, p95: 20, p99: 30, max: 40 },
    coldStarts: 0,
    jobsDelayedByColdStart: 0,
  } as PolicySummary;
}

function sweep(points: Array<[number, number]>, baselines: Array<[string, number, number]>, sloTarget = 0.99): SweepResult {
  const grid = points.map(([cost, attainment], i) => ({
    setting: { standby: i },
    result: summary('predictive', cost, attainment),
    pareto: true,
  }));
  const base = baselines.map(([name, cost, attainment]) => summary(name, cost, attainment));
  return {
    axes: [{ name: 'standby', values: grid.map((_, i) => i) }],
    sloTarget,
    points: grid,
    baselines: base,
    cheapest: cheapestPolicy(
      grid.map((p) => p.result),
      base,
      sloTarget,
    ),
  };
}

describe('the cheapest policy meeting the SLO', () => {
  it('names a baseline that meets the SLO for less than every point of the grid', () => {
    const r = sweep(
      [
        [100, 0.995],
        [80, 0.991],
        [60, 0.95], // cheapest of all, misses the target
      ],
      [
        ['reactive', 70, 0.993],
        ['static-peak', 300, 1],
        ['oracle', 40, 1],
      ],
    );
    expect(r.cheapest).toEqual({ kind: 'baseline', index: 0 });
    const line = cheapestLine(r);
    expect(line).toContain('the reactive baseline — cost 70, attainment 99.300 %');
    expect(line).toContain('The oracle, which needs perfect foresight, costs 40');
    const table = sweepTable(r).split('\n');
    expect(table.find((l) => l.startsWith('| reactive '))).toContain('baseline, cheapest meeting SLO');
    expect(table.find((l) => l.startsWith('| oracle '))).toContain('baseline (a floor)');
    expect(table.filter((l) => l.includes('cheapest meeting SLO'))).toHaveLength(1);
  });

  it('names the grid point when it is the cheapest that meets the SLO, and a point wins a tie with a baseline', () => {
    const r = sweep(
      [
        [90, 0.992],
        [70, 0.99],
      ],
      [
        ['reactive', 70, 0.99],
        ['static-peak', 200, 1],
        ['oracle', 10, 1],
      ],
    );
    expect(r.cheapest).toEqual({ kind: 'point', index: 1 });
    expect(cheapestLine(r)).toContain('the predictive policy with standby=1 — cost 70');
    expect(sweepTable(r).split('\n')[3]).toContain('cheapest meeting SLO');
  });

  it('on equal cost takes the better attainment', () => {
    expect(cheapestPolicy([summary('predictive', 50, 0.99)], [summary('reactive', 50, 0.999)], 0.99)).toEqual({
      kind: 'baseline',
      index: 0,
    });
  });

  it('never chooses the oracle, and says when nothing meets the SLO', () => {
    const r = sweep(
      [[50, 0.9]],
      [
        ['reactive', 40, 0.8],
        ['static-peak', 300, 0.98],
        ['oracle', 10, 1],
      ],
    );
    expect(r.cheapest).toBeUndefined();
    expect(cheapestLine(r)).toMatch(/^No setting meets the SLO target \(99\.000 % .*baselines included\. \(The oracle/);
  });
});
