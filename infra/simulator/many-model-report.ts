/**
 * The shared-pool comparison's report (issue 31 §5): report.json — `policies[]` with today's
 * fields plus `modelLoads`, `hitRatio` and `evictions`, each policy's run at its SLO-target
 * setting beside it — and one markdown table of the four policies at the SLO target, with the
 * Must-show checks said in words.
 */
import type { PoolAtSlo, PoolComparison, PoolPolicyName } from './many-model-compare.ts';
import { POOL_POLICY_NAMES } from './many-model-compare.ts';
import { writeReportFiles } from './report-files.ts';

export interface PoolWorldInfo {
  /** The trace file, or how the world was generated. */
  source: string;
  models: number;
  minutes: number;
  requests: number;
}

export function poolReportJson(info: PoolWorldInfo, c: PoolComparison, settings: object): object {
  const strip = <T extends { series: unknown }>({ series: _series, ...p }: T) => p;
  return {
    world: info,
    settings,
    replayedMinutes: c.minutes,
    sloTarget: c.target,
    plannerTerms: c.terms,
    checks: c.checks,
    policies: c.policies.map((p) => {
      const at = c.atSlo[p.name as PoolPolicyName];
      return at ? { ...strip(p), atSlo: { ...at, report: strip(at.report) } } : strip(p);
    }),
  };
}

/** The four policies at the SLO target: the setting found, attainment, cost, and the ratios the Must-show reads. */
export function poolTable(c: PoolComparison): string {
  const shared = c.atSlo.shared.report;
  const rows = POOL_POLICY_NAMES.map((name) => row(name, c.atSlo[name], shared.cost));
  const header = [
    '| policy | setting at the SLO target | SLO attainment | cost (worker-s) | shared ÷ it | mean workers | model loads | hit ratio | evictions | worker cold starts |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  return [...header, ...rows].join('\n');
}

function row(name: PoolPolicyName, at: PoolAtSlo, sharedCost: number): string {
  const r = at.report;
  const minutes = r.series.active.length * r.series.intervalMin;
  const workers = minutes > 0 ? r.workerSeconds.total / (minutes * 60) : 0;
  const setting = at.value === null ? at.setting : `${at.setting === 'per-model settings' ? '' : `${at.setting} `}${at.value}`;
  const missed = at.met ? '' : ' (missed the target)';
  const ratio = r.cost > 0 ? `${(sharedCost / r.cost).toFixed(2)}×` : '—';
  return `| ${name} | ${setting}${missed} | ${pct(r.sloAttainment)} | ${Math.round(r.cost)} | ${ratio} | ${workers.toFixed(2)} | ${r.modelLoads} | ${r.hitRatio.toFixed(3)} | ${r.evictions} | ${r.coldStarts} |`;
}

/** The Must-show checks and the planner's pooled standby, in words. */
export function poolChecks(c: PoolComparison): string {
  const yes = (b: boolean) => (b ? 'yes' : 'NO');
  const t = c.terms;
  return [
    `shared meets the ${pct(c.target)} target: ${yes(c.checks.sharedMeets)}; costs ≤ 0.5× per-model at the SLO: ${yes(c.checks.halfPerModel)}; ≤ keep-alive at the SLO: ${yes(c.checks.belowKeepAlive)}; fewer model loads than keep-alive: ${yes(c.checks.fewerLoads)}`,
    `planner terms, mean over ${t.ticks} ticks: pooled burst standby ${t.pooledBurstStandby.toFixed(2)} vs ${t.perModelStandbySum.toFixed(2)} summed per model; compute ${t.computeActive.toFixed(2)} workers, memory ${t.memoryActive.toFixed(2)}`,
  ].join('\n');
}

export function writePoolReport(dir: string, info: PoolWorldInfo, c: PoolComparison, settings: object): void {
  const md = `# Shared pool: ${info.source}\n\n${info.models} models, ${info.requests} requests over ${info.minutes} minutes; replayed minutes ${c.minutes.from}–${c.minutes.to}.\n\n${poolTable(c)}\n\n${poolChecks(c)}\n`;
  writeReportFiles(dir, 'report', poolReportJson(info, c, settings), md);
}

const pct = (x: number) => `${(x * 100).toFixed(2)} %`;
