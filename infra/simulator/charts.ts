/**
 * The comparison as charts (issue 5 §4), three per policy, SVG files a browser opens from disk:
 * - `<policy>-arrivals.svg`: arrivals per minute, the rate the scaler planned for (its forecast),
 *   and the capacity its active workers had (active × full-batch rate);
 * - `<policy>-workers.svg`: workers by state over time, stacked (active, standby, starting,
 *   draining): the area is what the bill counts;
 * - `<policy>-queue-wait.svg`: queue-wait p95 and p99 per interval, with the SLO line.
 * Points are per interval of the recorded series (recorder.ts chartInterval).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Comparison, PolicyReport } from './compare.ts';
import { serviceModel } from './compare.ts';
import { lineChart } from './svg-chart.ts';
import { MINUTE_MS } from './world.ts';

export const STATE_COLORS = { active: '#2b8a3e', standby: '#f08c00', starting: '#1c7ed6', draining: '#868e96' } as const;

export interface PolicyCharts {
  arrivals: string;
  workers: string;
  queueWait: string;
}

export function policyCharts(c: Comparison, p: PolicyReport): PolicyCharts {
  const s = p.series;
  const stepMs = s.intervalMin * MINUTE_MS;
  const x = s.arrivals.map((_, k) => c.startMs + c.minutes.from * MINUTE_MS + k * stepMs);
  const per = s.intervalMin === 1 ? 'per minute' : `mean per ${s.intervalMin}-minute interval`;
  const ratePerMin = serviceModel(c.settings).workerRate * 60;
  const title = (what: string) => `${p.name}: ${what}`;
  const arrivals = lineChart({
    title: title('arrivals vs forecast'),
    x: { values: x, time: true, label: `time (UTC), ${per}` },
    y: { label: 'jobs per minute' },
    lines: [
      { name: 'arrivals', values: s.arrivals, color: '#343a40' },
      { name: 'planned for (forecast)', values: s.plannedPerMin, color: '#e8590c', dashed: true },
      { name: 'active capacity', values: s.active.map((a) => a * ratePerMin), color: '#2b8a3e' },
    ],
  });
  const workers = lineChart({
    title: title('workers by state'),
    x: { values: x, time: true, label: `time (UTC), ${per}` },
    y: { label: 'workers' },
    stacked: (['active', 'standby', 'starting', 'draining'] as const).map((k) => ({ name: k, values: s[k], color: STATE_COLORS[k] })),
  });
  const sloS = c.settings.sloMs / 1000;
  const worst = Math.max(0, ...s.queueWaitP99Ms.map((v) => (v ?? 0) / 1000));
  const cap = 4 * sloS;
  const queueWait = lineChart({
    title: title('queue wait'),
    x: { values: x, time: true, label: `time (UTC), percentiles of the jobs taken in each ${s.intervalMin}-minute interval` },
    y: {
      label: worst > cap ? `queue wait (s), clipped at ${cap} s` : 'queue wait (s)',
      min: 0,
      max: Math.max(1.5 * sloS, Math.min(cap, worst * 1.05)),
    },
    lines: [
      { name: 'p95', values: s.queueWaitP95Ms.map((v) => (v === null ? null : v / 1000)), color: '#1c7ed6' },
      { name: 'p99', values: s.queueWaitP99Ms.map((v) => (v === null ? null : v / 1000)), color: '#c92a2a' },
    ],
    rules: [{ y: sloS, label: `SLO ${sloS} s`, color: '#862e9c' }],
  });
  return { arrivals, workers, queueWait };
}

/** Writes every policy's three charts into `dir`; returns the file names, policy by policy. */
export function writeCharts(dir: string, c: Comparison): Array<{ policy: string; files: string[] }> {
  return c.policies.map((p) => {
    const charts = policyCharts(c, p);
    const files = [
      [`${p.name}-arrivals.svg`, charts.arrivals],
      [`${p.name}-workers.svg`, charts.workers],
      [`${p.name}-queue-wait.svg`, charts.queueWait],
    ] as const;
    for (const [name, text] of files) writeFileSync(path.join(dir, name), text);
    return { policy: p.name, files: files.map(([name]) => name) };
  });
}
