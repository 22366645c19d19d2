import { describe, expect, it } from 'vitest';
import { SIMULATE_DEFAULTS } from '../kernel/config.ts';
import { realiseCounts } from './arrivals.ts';
import type { AtSlo, AtSloReport } from './at-slo.ts';
import { serviceModel } from './compare.ts';
import { cellSettings, judge, type MatrixTrace, matrixTable, matrixWorlds, runMatrix, traceWorld } from './matrix.ts';
import type { PolicySummary } from './sweep.ts';
import type { Trace } from './trace.ts';

const START = Date.UTC(2024, 0, 1);
const trace = (perMinute: number[]): Trace => ({ series: { startMs: START, perMinute }, missing: perMinute.map(() => false), rows: 1 });
const options = { scaler: SIMULATE_DEFAULTS, given: { seed: 2 }, coldStartCv: 0 };

describe('the grid of worlds', () => {
  it('is every cold start × SLO × kind of job', () => {
    const worlds = matrixWorlds();
    expect(worlds).toHaveLength(18);
    expect(new Set(worlds.map((w) => `${w.coldStartS}/${w.sloS}/${w.jobs}`)).size).toBe(18);
    expect(new Set(worlds.map((w) => w.coldStartS))).toEqual(new Set([30, 90, 300]));
    expect(new Set(worlds.map((w) => w.sloS))).toEqual(new Set([5, 30, 120]));
  });

  it("gives each cell its world's SLO, cold start and service, the policy told the same", () => {
    const t: MatrixTrace = { name: 't.csv', trace: trace([1]), scale: 0.5, pattern: { kind: 'gamma', cv: 2 } };
    const long = cellSettings(t, { coldStartS: 300, sloS: 5, jobs: 'long-unbatched' }, options);
    expect(serviceModel(long).serviceMs(1)).toBeCloseTo(20_000);
    expect(long.maxBatch).toBe(1);
    expect([long.sloMs, long.coldStartMs, long.policy.sloQueueWaitMs, long.policy.coldStartMs]).toEqual([5_000, 300_000, 5_000, 300_000]);
    expect([long.scale, long.pattern, long.seed]).toEqual([0.5, { kind: 'gamma', cv: 2 }, 2]);
    const short = cellSettings(t, { coldStartS: 30, sloS: 120, jobs: 'short-batched' }, options);
    expect([short.workerRps, short.maxBatch, short.sloMs, short.coldStartMs]).toEqual([100, 32, 120_000, 30_000]);
  });

  it("replays the shared traces at their documented amplitude and ServeGen's burstiness", () => {
    expect(traceWorld('servegen_language_m-small_10min.csv')).toEqual({ scale: 0.002, pattern: { kind: 'gamma', cv: 2 } });
    expect(traceWorld('nasa_http_1995_per_minute.csv').scale).toBe(1);
    expect(traceWorld('mine.csv')).toEqual({ scale: 1, pattern: { kind: 'poisson' } });
  });
});

describe('judge', () => {
  const run = (name: string, cost: number, sloAttainment: number, coldStarts: number, delayed: number) =>
    ({ name, cost, sloAttainment, coldStarts, jobsDelayedByColdStart: delayed }) as PolicySummary;
  const at = (cost: number | null): AtSlo =>
    ({ met: cost !== null, cost, sloAttainment: 0.995, reason: cost === null ? 'reactive cannot meet the target' : undefined }) as AtSlo;
  const atSlo = (reactive: number | null, oracle: number): AtSloReport => ({
    target: 0.99,
    maxRuns: 12,
    baselines: { reactive: at(reactive), oracle: at(oracle) },
  });
  const cell = (predictive: PolicySummary, reactiveAtSlo: number | null) =>
    judge({
      trace: 't.csv',
      coldStartS: 90,
      sloS: 30,
      jobs: 'long-unbatched',
      evaluated: { from: 1440, to: 2880, days: 2 },
      predictive,
      baselines: [run('reactive', 120, 0.99, 40, 50)],
      atSlo: atSlo(reactiveAtSlo, 80),
      errors: [],
      sloTarget: 0.99,
    });

  it('meets every target: ratios at the SLO, cold starts a day and delayed jobs against reactive as-is', () => {
    const c = cell(run('predictive', 100, 0.995, 30, 10), 100);
    expect([c.costVsReactiveAtSlo, c.costVsOracleAtSlo]).toEqual([1, 1.25]);
    expect(c.coldStartsPerDay).toEqual({ predictive: 15, reactive: 20 });
    expect(c.delayedByColdStart).toEqual({ predictive: 10, reactive: 50 });
    expect(c.misses).toEqual([]);
  });

  it('names each target missed, with its figures', () => {
    const c = cell(run('predictive', 110, 0.98, 41, 50), 100);
    expect(c.misses).toEqual([
      'SLO 98.00 % < 99.00 %',
      'cost 1.10× reactive at SLO > 1.00×',
      'cost 1.38× oracle at SLO > 1.30×',
      "delayed by cold start 50 ≥ reactive's 50",
      "cold starts 20.5/day > reactive's 20/day",
    ]);
    expect(
      matrixTable({
        sloTarget: 0.99,
        targets: { costVsReactiveAtSlo: 1, costVsOracleAtSlo: 1.3 },
        trainFraction: 0.5,
        quick: false,
        traces: [],
        cells: [c],
      }),
    ).toContain(
      '| t | 90 s | 30 s | long-unbatched | 98.00 % | 1.10× | 1.38× | 20.5 / 20 | 50 / 50 | SLO 98.00 % < 99.00 %; cost 1.10× reactive at SLO',
    );
  });

  it('shows a rare cold start a day to three digits, not as 0.0 against 0.0', () => {
    const c = judge({
      trace: 't.csv',
      coldStartS: 90,
      sloS: 30,
      jobs: 'short-batched',
      evaluated: { from: 0, to: 27 * 1440, days: 27 },
      predictive: run('predictive', 100, 1, 1, 0),
      baselines: [run('reactive', 100, 1, 0, 0)],
      atSlo: atSlo(100, 100),
      errors: [],
      sloTarget: 0.99,
    });
    expect(c.misses).toEqual(["cold starts 0.037/day > reactive's 0/day"]);
  });

  it('gives no cost ratio against a baseline that cannot meet the target, and no miss for it', () => {
    const c = cell(run('predictive', 500, 0.995, 30, 10), null);
    expect(c.costVsReactiveAtSlo).toBeNull();
    expect(c.misses).toEqual(['cost 6.25× oracle at SLO > 1.30×']);
  });
});

describe('runMatrix', () => {
  const base = { ...options, trainFraction: 0.5, sloTarget: 0.99, threads: 2, cellCpuBudgetMs: 120_000 };

  it('scores the part after the split only, with the default policy, and quick cuts each trace to its first day', async () => {
    const perMinute = Array.from({ length: 3000 }, (_, m) => 2 + (m % 60 < 30 ? 3 : 0));
    const t: MatrixTrace = { name: 'steps.csv', trace: trace(perMinute), scale: 1, pattern: { kind: 'poisson' } };
    const worlds = [
      { coldStartS: 30, sloS: 30, jobs: 'long-unbatched' as const },
      { coldStartS: 300, sloS: 120, jobs: 'short-batched' as const },
    ];
    const r = await runMatrix([t], { ...base, quick: true, worlds });
    expect(r.traces).toEqual([{ name: 'steps.csv', scale: 1, pattern: { kind: 'poisson' }, minutes: 1440 }]);
    const jobs = realiseCounts(perMinute.slice(0, 1440), t.trace.missing, 1, 2)
      .slice(720)
      .reduce((a, b) => a + b, 0);
    expect(r.cells.map((c) => [c.coldStartS, c.jobs])).toEqual([
      [30, 'long-unbatched'],
      [300, 'short-batched'],
    ]);
    for (const c of r.cells) {
      expect(c.errors).toEqual([]);
      expect(c.evaluated).toEqual({ from: 720, to: 1440, days: 0.5 });
      expect(c.predictive?.name).toBe('predictive');
      expect(c.predictive?.jobs).toBe(jobs);
      expect(c.baselines.map((b) => [b.name, b.jobs])).toEqual([
        ['static-peak', jobs],
        ['reactive', jobs],
        ['oracle', jobs],
      ]);
      const oracle = c.atSlo?.baselines.oracle;
      expect(oracle?.met).toBe(true);
      expect(c.costVsOracleAtSlo).toBeCloseTo((c.predictive?.cost ?? 0) / (oracle?.cost ?? 1), 9);
    }
  }, 120_000);

  it('reports a call stopped by its CPU budget in its cell instead of a figure', async () => {
    // Two million jobs in the scored half: no replay of them ends before the first budget reading.
    const t: MatrixTrace = { name: 'dense.csv', trace: trace(new Array(1440).fill(3000)), scale: 1, pattern: { kind: 'uniform' } };
    const r = await runMatrix([t], { ...base, cellCpuBudgetMs: 1, worlds: [{ coldStartS: 30, sloS: 5, jobs: 'short-batched' }] });
    const [c] = r.cells;
    expect(c?.predictive).toBeNull();
    expect(c?.errors.join('\n')).toMatch(/the default policy: the replay used \d+ ms of CPU time; its budget is 1 ms/);
    expect(c?.errors.join('\n')).toMatch(/the baselines: the replay used/);
    expect(c?.misses).toEqual(['no figures (see errors)']);
  }, 120_000);

  it('refuses a policy file: the matrix judges the default policy', async () => {
    await expect(runMatrix([], { ...base, given: { policy: { min: 1 } as never } })).rejects.toThrow(/default policy only/);
  });
});
