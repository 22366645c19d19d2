/**
 * The comparison as files (issue 5 §4): report.json (without the per-interval series, which go
 * into the charts), report.md (a table a person reads, with the charts under it) and the charts.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { formatRate } from '../kernel/format-rate.ts';
import { writeCharts } from './charts.ts';
import { type Comparison, serviceModel } from './compare.ts';

export interface TraceInfo {
  file: string;
  rows: number;
  minutes: number;
  start: string;
  end: string;
}

export function reportJson(trace: TraceInfo, c: Comparison): object {
  return {
    trace,
    slo: { queueWaitMs: c.settings.sloMs },
    settings: c.settings,
    replayedMinutes: c.minutes,
    policies: c.policies.map(({ series: _series, ...p }) => p),
  };
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

export function reportMarkdown(trace: TraceInfo, c: Comparison, charts: Array<{ policy: string; files: string[] }> = []): string {
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
    `Cost relative to static-peak: ${ratios}.`,
    '',
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

export function writeReport(dir: string, trace: TraceInfo, c: Comparison): void {
  mkdirSync(dir, { recursive: true });
  writeFileSync(path.join(dir, 'report.json'), `${JSON.stringify(reportJson(trace, c), null, 2)}\n`);
  writeFileSync(path.join(dir, 'report.md'), reportMarkdown(trace, c, writeCharts(dir, c)));
}
