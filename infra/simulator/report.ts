/**
 * The comparison as files (issue 5 §4): report.json (without the per-interval series, which go
 * into the charts), report.md (a table a person reads, with the charts under it) and the charts.
 * When the baselines were also searched at the SLO target (at-slo.ts), report.json gives each
 * baseline its `atSlo` and report.md compares costs at equal attainment beside the as-is ratios.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatRate } from '../kernel/format-figures.ts';
import { type AtSlo, type AtSloReport, oracleMeetsTarget } from './at-slo.ts';
import { writeCharts } from './charts.ts';
import { type Comparison, type PolicyReport, serviceModel } from './compare.ts';

/** A comparison, with its baselines at the SLO target when they were searched. */
export type Report = Comparison & { atSlo?: AtSloReport };

export interface TraceInfo {
  file: string;
  rows: number;
  minutes: number;
  start: string;
  end: string;
}

export function reportJson(trace: TraceInfo, c: Report): object {
  const at = c.atSlo;
  return {
    trace,
    slo: { queueWaitMs: c.settings.sloMs },
    settings: c.settings,
    replayedMinutes: c.minutes,
    ...(at ? { atSlo: { target: at.target, maxRunsPerBaseline: at.maxRuns, oracleMeetsTarget: oracleMeetsTarget(at) } } : {}),
    policies: c.policies.map(({ series: _series, ...p }) => {
      const found = atSloOf(c, p.name);
      return found ? { ...p, atSlo: found } : p;
    }),
  };
}

const atSloOf = (c: Report, name: string): AtSlo | undefined => c.atSlo?.baselines[name as keyof AtSloReport['baselines']];

const KNOB_TEXT: Record<AtSlo['setting'], string> = {
  workers: 'fixed fleet (workers)',
  backlogPerWorker: 'per-replica target (waiting jobs)',
  headroom: 'headroom over the arrival rate',
};

/**
 * Costs at equal SLO attainment: each baseline as-is and at its cheapest setting meeting the
 * target, and the predictive policy's cost ÷ each; plus what a reader must know to trust the
 * ratios (did the oracle meet the target, did the predictive policy, which baseline cannot).
 */
export function atSloTable(c: Report): string {
  const at = c.atSlo;
  const predictive = c.policies.find((p) => p.name === 'predictive');
  if (!at) return '';
  const ratio = (cost: number | null) => (predictive && cost !== null && cost > 0 ? `${(predictive.cost / cost).toFixed(2)}×` : '—');
  const header =
    '| baseline | setting | as-is: value | as-is: SLO attainment | as-is: cost | predictive ÷ as-is | at SLO: value | at SLO: SLO attainment | at SLO: cost | predictive ÷ at SLO |';
  const rows = c.policies.flatMap((p) => {
    const a = atSloOf(c, p.name);
    if (!a) return [];
    const atValue = a.met ? knobValue(a, a.value as number) : `cannot meet (best ${pct(a.sloAttainment)})`;
    return [
      `| ${p.name} | ${KNOB_TEXT[a.setting]} | ${knobValue(a, a.asIs)} | ${pct(p.sloAttainment)} | ${int(p.cost)} | ${ratio(p.cost)} | ${atValue} | ${a.met ? pct(a.sloAttainment) : '—'} | ${a.cost === null ? '—' : int(a.cost)} | ${ratio(a.cost)} |`,
    ];
  });
  return [header, `|${'---|'.repeat(10)}`, ...rows, '', ...atSloNotes(c, at, predictive)].join('\n');
}

function atSloNotes(c: Report, at: AtSloReport, predictive: PolicyReport | undefined): string[] {
  const oracle = at.baselines.oracle;
  const notes = [
    `Each baseline's setting at the SLO is the cheapest whose replay reached ${pct(at.target)} of jobs within the ${c.settings.sloMs / 1000} s queue-wait SLO, found by bisection (at most ${at.maxRuns} full replays per baseline; the setting shown was replayed and met the target; report.json's missedAt is the nearest cheaper setting tried, which missed). Cost is worker-seconds, standby at its price.`,
  ];
  if (oracle) {
    notes.push(
      oracle.met && oracle.sloAttainment >= at.target
        ? `Verified: the oracle meets the target at headroom ${knobValue(oracle, oracle.value as number)} (${pct(oracle.sloAttainment)} ≥ ${pct(at.target)}).`
        : `The oracle does NOT meet the target: ${oracle.reason ?? 'no setting tried met it'}.`,
    );
  }
  for (const [name, a] of Object.entries(at.baselines)) {
    if (a && !a.met && a !== oracle) notes.push(`${a.reason}; it has no cost at the SLO.`);
    if (a?.met && a.missedAt === null && a.setting !== 'workers') {
      notes.push(
        `${name}: the cheapest ${a.setting} searched (${knobValue(a, a.value as number)}) met the target, so its cost at the SLO is bounded by the search's range, not by the target.`,
      );
    }
  }
  if (predictive) {
    notes.push(
      predictive.sloAttainment >= at.target
        ? `The predictive policy meets the target (${pct(predictive.sloAttainment)}): the at-SLO ratios compare equal attainment.`
        : `The predictive policy reaches ${pct(predictive.sloAttainment)}, below the target: its at-SLO ratios compare a policy that misses the target with baselines that meet it (they flatter the predictive policy).`,
    );
  }
  return notes.map((n) => `- ${n}`);
}

const pct = (x: number) => `${(x * 100).toFixed(3)} %`;
const int = (x: number) => Math.round(x).toLocaleString('en-US');

function knobValue(a: AtSlo, v: number): string {
  return a.setting === 'workers' ? String(v) : String(Number(v.toPrecision(3)));
}

export function reportTable(c: Comparison): string {
  const header =
    '| policy | SLO attainment | wait p50 / p95 / p99 / max (s) | worker-s total | active | standby | starting | cost | cold starts | delayed by cold start | scale events |';
  const rule = `|${'---|'.repeat(11)}`;
  const s = (ms: number) => (ms / 1000).toFixed(ms < 10_000 ? 2 : 0);
  const n = (x: number) => Math.round(x).toLocaleString('en-US');
  const rows = c.policies.map((p) => {
    const w = p.queueWaitMs;
    const ws = p.workerSeconds;
    return `| ${p.name} | ${(p.sloAttainment * 100).toFixed(3)} % | ${s(w.p50)} / ${s(w.p95)} / ${s(w.p99)} / ${s(w.max)} | ${n(ws.total)} | ${n(ws.active)} | ${n(ws.standby)} | ${n(ws.starting)} | ${n(p.cost)} | ${p.coldStarts} | ${n(p.jobsDelayedByColdStart)} | ${p.scaleEvents} |`;
  });
  return [header, rule, ...rows].join('\n');
}

export function reportMarkdown(trace: TraceInfo, c: Report, charts: Array<{ policy: string; files: string[] }> = []): string {
  const st = c.settings;
  const staticPeak = c.policies.find((p) => p.name === 'static-peak');
  const ratios = staticPeak ? c.policies.map((p) => `${p.name} ${(p.cost / staticPeak.cost).toFixed(2)}×`).join(', ') : '';
  return [
    `# Policy simulation: ${path.basename(trace.file)}`,
    '',
    `Trace: ${trace.rows} rows, ${trace.minutes} minutes, ${trace.start} → ${trace.end}; replayed minutes ${c.minutes.from}–${c.minutes.to}.`,
    `Settings: scale ${st.scale}, SLO ${st.sloMs} ms queue wait, cold start ${st.coldStartMs / 1000} s on average (${coldPhases(c)}), ${workerText(c)}, tick ${st.tickMs / 1000} s, arrivals ${st.pattern.kind}${st.pattern.kind === 'gamma' ? ` CV ${st.pattern.cv}` : ''}, seed ${st.seed}, standby price ${st.standbyPrice}.`,
    `Predictive policy: ${JSON.stringify(st.policy)}`,
    '',
    reportTable(c),
    '',
    `Cost relative to static-peak (as-is): ${ratios}.`,
    '',
    ...(c.atSlo ? ['## Cost at equal SLO attainment', '', atSloTable(c), ''] : []),
    ...charts.flatMap((c) => [`## ${c.policy}`, '', ...c.files.map((f) => `![${c.policy} ${f}](${f})`), '']),
  ].join('\n');
}

function coldPhases(c: Comparison): string {
  return Object.entries(c.settings.coldStart)
    .map(([phase, t]) => `${phase} ${(t.meanMs / 1000).toFixed(1)} s${t.cv > 0 ? ` CV ${t.cv}` : ''}`)
    .join(', ');
}

function workerText(c: Comparison): string {
  const st = c.settings;
  const rate = formatRate(serviceModel(st).workerRate);
  return st.batchProfile
    ? `measured batch profile (${st.batchProfile.map((p) => `${p.batch}: ${p.ms.toFixed(1)} ms`).join(', ')}), ${rate} rows/s at batch ${st.maxBatch}`
    : `${rate} rows/s per worker at batch ${st.maxBatch}`;
}

export function writeReport(dir: string, trace: TraceInfo, c: Report): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'report.json'), `${JSON.stringify(reportJson(trace, c), null, 2)}\n`);
  writeFileSync(path.join(dir, 'report.md'), reportMarkdown(trace, c, writeCharts(dir, c)));
}
