/**
 * A sweep as files: sweep.json (every point and the baselines), sweep.md (the cost-vs-SLO table,
 * Pareto front marked, the cheapest policy that meets the SLO named — a grid point or a
 * deployable baseline, whichever costs less — with the oracle's floor beside it) and pareto.svg.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { TraceInfo } from './report.ts';
import { scatterChart } from './svg-chart.ts';
import { BOUND_BASELINES, type PolicySummary, type SweepResult } from './sweep.ts';

const pct = (x: number) => `${(x * 100).toFixed(3)} %`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');
const settingText = (setting: Record<string, number>) =>
  Object.entries(setting)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

/** The cheapest policy meeting the target, as `[what it is, its figures]`; undefined when none does. */
function cheapestOf(r: SweepResult): [string, PolicySummary] | undefined {
  const c = r.cheapest;
  if (c?.kind === 'point') {
    const point = r.points[c.index];
    return point && [`the predictive policy with ${settingText(point.setting)}`, point.result];
  }
  const baseline = c === undefined ? undefined : r.baselines[c.index];
  return baseline && [`the ${baseline.name} baseline`, baseline];
}

export function cheapestLine(r: SweepResult): string {
  const best = cheapestOf(r);
  const bounds = r.baselines
    .filter((b) => BOUND_BASELINES.includes(b.name))
    .map((b) => ` (The ${b.name}, which needs perfect foresight, costs ${int(b.cost)} at ${pct(b.sloAttainment)}: a floor, not a setting.)`)
    .join('');
  if (!best) return `No setting meets the SLO target (${pct(r.sloTarget)} of jobs within the queue-wait SLO), baselines included.${bounds}`;
  const [what, p] = best;
  return `Cheapest setting that meets the SLO target (${pct(r.sloTarget)}), grid and baselines compared: ${what} — cost ${int(p.cost)}, attainment ${pct(p.sloAttainment)}.${bounds}`;
}

export function sweepTable(r: SweepResult): string {
  const staticPeak = r.baselines.find((b) => b.name === 'static-peak');
  const ratio = (p: PolicySummary) => (staticPeak && staticPeak.cost > 0 ? `${(p.cost / staticPeak.cost).toFixed(2)}×` : 'n/a');
  const names = r.axes.map((a) => a.name);
  const header = `| ${['#', ...names, 'SLO attainment', 'wait p99 (s)', 'cost (worker-s)', 'vs static-peak', 'delayed by cold start', 'Pareto'].join(' | ')} |`;
  const rule = `|${'---|'.repeat(names.length + 7)}`;
  const row = (label: string[], p: PolicySummary, mark: string) =>
    `| ${[...label, pct(p.sloAttainment), (p.queueWaitMs.p99 / 1000).toFixed(2), int(p.cost), ratio(p), int(p.jobsDelayedByColdStart), mark].join(' | ')} |`;
  const points = r.points.map((pt, i) =>
    row(
      [String(i + 1), ...names.map((n) => String(pt.setting[n]))],
      pt.result,
      `${pt.pareto ? '★' : ''}${r.cheapest?.kind === 'point' && i === r.cheapest.index ? ' cheapest meeting SLO' : ''}`,
    ),
  );
  const baselines = r.baselines.map((b, i) =>
    row(
      [b.name, ...names.map(() => '')],
      b,
      `baseline${BOUND_BASELINES.includes(b.name) ? ' (a floor)' : ''}${r.cheapest?.kind === 'baseline' && i === r.cheapest.index ? ', cheapest meeting SLO' : ''}`,
    ),
  );
  return [header, rule, ...points, ...baselines].join('\n');
}

export function paretoChart(r: SweepResult, sloMs: number): string {
  // Points carry their row number in sweep.md: whole settings as labels overlap on a dense grid.
  const numbered = r.points.map((p, i) => ({ ...p, label: `#${i + 1}` }));
  const off = numbered.filter((p) => !p.pareto);
  const on = numbered.filter((p) => p.pareto);
  const point = (p: PolicySummary, text: string) => ({ x: p.cost, y: p.sloAttainment * 100, label: text });
  return scatterChart({
    title: `Sweep: cost vs SLO attainment (queue wait ≤ ${sloMs / 1000} s)`,
    x: { label: 'cost (worker-seconds, standby at its price)' },
    y: { label: 'jobs within the SLO (%)' },
    groups: [
      { name: 'setting (#row in sweep.md)', color: '#adb5bd', points: off.map((p) => point(p.result, p.label)) },
      { name: 'Pareto front', color: '#1c7ed6', line: true, points: on.map((p) => point(p.result, p.label)) },
      { name: 'baselines', color: '#c92a2a', marker: 'square', points: r.baselines.map((b) => point(b, b.name)) },
    ],
    rules: [{ y: r.sloTarget * 100, label: `target ${pct(r.sloTarget)}`, color: '#862e9c' }],
  });
}

export function writeSweep(dir: string, trace: TraceInfo, r: SweepResult, sloMs: number): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'sweep.json'), `${JSON.stringify({ trace, slo: { queueWaitMs: sloMs }, ...r }, null, 2)}\n`);
  const md = [
    `# Policy sweep: ${path.basename(trace.file)}`,
    '',
    `Grid: ${r.axes.map((a) => `${a.name} ∈ {${a.values.join(', ')}}`).join(', ')} — ${r.points.length} settings of the predictive policy, same arrivals, beside the baselines. ★ marks the Pareto front: no other setting and no deployable baseline (reactive, static-peak) is at least as cheap and as good, and better in one.`,
    '',
    cheapestLine(r),
    '',
    sweepTable(r),
    '',
    '![cost vs SLO attainment](pareto.svg)',
    '',
  ].join('\n');
  writeFileSync(path.join(dir, 'sweep.md'), md);
  writeFileSync(path.join(dir, 'pareto.svg'), paretoChart(r, sloMs));
}
