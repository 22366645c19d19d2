import { describe, expect, it } from 'vitest';
import type { AtSlo, AtSloReport } from './at-slo.ts';
import { type BankResult, bankMarkdown, bankSummary, judgeWorld } from './bank.ts';
import type { WorldScore } from './matrix.ts';
import type { PolicySummary } from './sweep.ts';
import type { BankWorld } from './world-bank.ts';

const world: BankWorld = {
  name: 'w000-diurnal',
  family: 'diurnal',
  params: { mean: 1 },
  trace: { series: { startMs: 0, perMinute: [] }, missing: [], rows: 0 },
  pattern: { kind: 'poisson' },
  coldStartS: 60,
  sloS: 30,
  workerRps: 10,
  maxBatch: 8,
  jobOverheadMs: 0,
  days: 4,
};
const run = (name: string, cost: number, sloAttainment: number, coldStarts: number) =>
  ({ name, cost, sloAttainment, coldStarts, jobsDelayedByColdStart: 0 }) as PolicySummary;
const at = (cost: number | null, sloAttainment = 0.995): AtSlo => ({ met: cost !== null, cost, sloAttainment }) as AtSlo;
const report = (b: AtSloReport['baselines']): AtSloReport => ({ target: 0.99, maxRuns: 12, baselines: b });
const score = (predictive: PolicySummary, baselines: AtSloReport['baselines']): WorldScore => ({
  evaluated: { from: 2880, to: 5760, days: 2 },
  predictive,
  baselines: [run('reactive', 120, 0.99, 40)],
  atSlo: report(baselines),
  errors: [],
});

describe('a bank world judged', () => {
  it('against the cheaper of reactive and static-peak at the SLO, and the oracle', () => {
    const c = judgeWorld(
      world,
      score(run('predictive', 90, 0.995, 30), { reactive: at(100), 'static-peak': at(95), oracle: at(75) }),
      0.99,
    );
    expect(c.simple).toEqual({ name: 'static-peak', cost: 95 });
    expect(c.costVsSimpleAtSlo).toBeCloseTo(90 / 95, 9);
    expect(c.costVsOracleAtSlo).toBeCloseTo(1.2, 9);
    expect(c.misses).toEqual([]);
  });

  it('names each target it misses', () => {
    const c = judgeWorld(
      world,
      score(run('predictive', 100, 0.98, 50), { reactive: at(90), 'static-peak': at(null), oracle: at(70) }),
      0.99,
    );
    expect(c.simple?.name).toBe('reactive');
    expect(c.misses).toEqual([
      'SLO 98.00 % < 99.00 %',
      'cost 1.11× reactive at SLO > 1.00×',
      'cost 1.43× oracle at SLO > 1.30×',
      "cold starts 50 > reactive's 40",
    ]);
  });

  it("where even the oracle cannot meet the target, the bar is the oracle's attainment less half a point", () => {
    const oracleShort = { oracle: at(null, 0.97) };
    expect(judgeWorld(world, score(run('predictive', 100, 0.966, 10), oracleShort), 0.99).misses).toEqual([]);
    expect(judgeWorld(world, score(run('predictive', 100, 0.96, 10), oracleShort), 0.99).misses).toEqual([
      "SLO 96.00 % < 96.50 % (the oracle's, less 0.5 point)",
    ]);
  });

  it('a world without figures is a miss, and the summary counts by family', () => {
    const none = judgeWorld(world, { ...score(run('predictive', 1, 1, 0), {}), predictive: null }, 0.99);
    expect(none.misses).toEqual(['no figures (see errors)']);
    const met = judgeWorld({ ...world, name: 'w001-mmpp', family: 'mmpp' }, score(run('predictive', 1, 1, 0), {}), 0.99);
    const r: BankResult = {
      seed: 3,
      sloTarget: 0.99,
      targets: { costVsSimpleAtSlo: 1, costVsOracleAtSlo: 1.3, oracleSlack: 0.005 },
      trainFraction: 0.5,
      cells: [none, met],
    };
    expect(bankSummary(r)).toEqual([
      { family: 'diurnal', worlds: 1, met: 0 },
      { family: 'mmpp', worlds: 1, met: 1 },
      { family: 'all', worlds: 2, met: 1 },
    ]);
    expect(bankMarkdown(r)).toContain('| w001-mmpp | 60 s | 30.0 s | 8 × 10.0/s | 100.00 % |');
  });
});
