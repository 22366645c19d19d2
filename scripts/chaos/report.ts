/**
 * What a scenario returns and how the suite prints it. A scenario reports counts, not
 * verdicts on timing: `violations` lists every invariant that broke (a missing job, a 5xx, a
 * worker that never recovered), and the suite fails when any scenario has one.
 */
import type { RedisTopology } from './stack.ts';

/**
 * The fate of the jobs a scenario submitted, counted in requests (a job is a request: the id a
 * 202 answered with), however many of them shared a queue entry.
 */
export interface JobCounts {
  /** 202 answers. */
  accepted: number;
  succeeded: number;
  failed: number;
  /** Failed jobs by error code: every failure must carry one. */
  failedByReason: Record<string, number>;
  /** Accepted, but not found or not terminal at the end: must be 0. */
  missing: number;
  /** The same id answered twice: must be 0. */
  duplicates: number;
  /** Succeeded without an output row. */
  badOutputs: number;
  /** Requests BullMQ's queue entries carried that no client got a 202 for (a request cut off mid-way); allowed. */
  extraInQueue: number;
  /** Finished BullMQ jobs (queue entries) that carried the requests: fewer than the requests where they coalesced. */
  queueEntries: number;
  /** The first few missing requests and where each stands in Redis (missing.ts). */
  missingFirst?: string;
}

export interface ScenarioReport {
  name: string;
  jobs?: JobCounts;
  /** Scenario-specific figures (latency percentiles, ratios, request counts). */
  figures: Record<string, number | string>;
  violations: string[];
}

/** What every scenario gets: a fresh folder of its own and a progress log. */
export interface ChaosContext {
  dir: string;
  log: (line: string) => void;
  /** Which Redis the scenario's stack starts; one redis-server unless asked. */
  redis?: RedisTopology;
}

/** A scenario, sized by `S` (each exports a full and a short size). */
export type Scenario<S> = (ctx: ChaosContext, sizes: S) => Promise<ScenarioReport>;

export function countReasons(codes: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const c of codes) out[c] = (out[c] ?? 0) + 1;
  return out;
}

/** The invariants every job-carrying scenario shares. */
export function jobViolations(jobs: JobCounts): string[] {
  const v: string[] = [];
  if (jobs.missing > 0) v.push(`${jobs.missing} accepted job(s) missing`);
  if (jobs.duplicates > 0) v.push(`${jobs.duplicates} duplicate id(s)`);
  if (jobs.badOutputs > 0) v.push(`${jobs.badOutputs} succeeded job(s) without outputs`);
  if (jobs.accepted !== jobs.succeeded + jobs.failed + jobs.missing) {
    v.push(`accepted ${jobs.accepted} ≠ succeeded ${jobs.succeeded} + failed ${jobs.failed} + missing ${jobs.missing}`);
  }
  if (jobs.failedByReason.no_reason) v.push(`${jobs.failedByReason.no_reason} failed job(s) without a reason`);
  return v;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const at = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[at] as number;
}

export function round(n: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** One table per scenario: its job counts, then its figures, then its verdict. */
export function formatReport(report: ScenarioReport): string {
  const rows: Array<[string, string]> = [];
  if (report.jobs) {
    const j = report.jobs;
    rows.push(['accepted', String(j.accepted)], ['succeeded', String(j.succeeded)], ['failed', String(j.failed)]);
    for (const [code, n] of Object.entries(j.failedByReason)) rows.push([`  failed: ${code}`, String(n)]);
    rows.push(['missing', String(j.missing)]);
    if (j.missingFirst) rows.push(['  missing, first few', j.missingFirst]);
    rows.push(['duplicates', String(j.duplicates)], ['extra in queue (no 202)', String(j.extraInQueue)]);
    rows.push(['queue entries (finished)', String(j.queueEntries)]);
  }
  for (const [k, v] of Object.entries(report.figures)) rows.push([k, String(v)]);
  rows.push(['verdict', report.violations.length === 0 ? 'PASS' : `FAIL: ${report.violations.join('; ')}`]);
  const width = Math.max(...rows.map(([k]) => k.length));
  return [`== ${report.name}`, ...rows.map(([k, v]) => `  ${k.padEnd(width)}  ${v}`)].join('\n');
}
