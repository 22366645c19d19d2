/**
 * hostile-tenant's table and verdict (scripts/chaos/hostile-tenant.ts): the honest tenant's
 * latency without and with the attacker, what happened to its jobs, webhooks, bulk runs and
 * objects, then every attack's answers by status and code. Each broken invariant is a
 * violation that names the request and the answer, so a finding reads as one.
 */

import type { BulkOutcome, HonestPhase, ProbeResult } from './honest-tenant.ts';
import type { AttackTally } from './hostile-attacks.ts';
import { type JobCounts, jobViolations, percentile, round, type ScenarioReport } from './report.ts';

export interface Snapshot {
  /** Every object of the bucket: key → size and ETag. */
  objects: Map<string, string>;
  redisMb: number;
  heapMb: number;
  /** The shared model's deployment: its revision and its split. */
  revision: number;
  versions: string;
}

/** What the attacker could read afterwards, and what the attacks left behind. */
export interface ReadBack {
  /** Objects in the attacker's area holding honest rows. */
  victimRowsInAttackerArea: string[];
  /** Rows the arrival history recorded for the dynamic model. */
  dynamicArrivals: number;
  /** The distinct errors of the attacker's webhook attempts, as it reads them. */
  webhookErrors: string[];
  /** The attacker's canary jobs by how they ended. */
  canaryJobs: Record<string, number>;
}

export interface HostileRun {
  /** The honest load of each phase, in words. */
  load: string;
  /** Key prefixes: the honest attack-phase run's output, the attacker's own area. */
  areas: { honestRun: string; attacker: string };
  headersTimeoutMs: number;
  /** Event streams the attacker tries to open. */
  sseStreams: number;
  phases: { warm: HonestPhase; baseline: HonestPhase; attacked: HonestPhase };
  jobs: JobCounts;
  /** Created → finished, ms, of each honest job that succeeded. */
  times: Map<string, number>;
  settled: boolean;
  undelivered: number;
  /** The attacker's tally, or why there is none. */
  tally: AttackTally | string;
  /** The attacks sent before the honest run of the attack phase started. */
  early: AttackTally;
  before: Snapshot;
  after: Snapshot;
  memoryAtStart: number;
  workers: Array<{ what: string; alive: boolean }>;
  /** What the canary guard counted for the canary version, right after the attack. */
  canary: string;
  leaks: ReadBack;
}

/** Redis may grow this much more during the attack than during the same load without it. */
const REDIS_GROWTH_MB = 64;
/** A health answer slower than this during the attack: the API's event loop froze. */
const FROZEN_MS = 2_000;

export function hostileReport(r: HostileRun): ScenarioReport {
  const { baseline, attacked } = r.phases;
  const violations = [...jobViolations(r.jobs), ...honestViolations(r)];
  const tally = typeof r.tally === 'string' ? undefined : r.tally;
  if (!tally) violations.push(r.tally as string);
  violations.push(...attackViolations(r, tally));
  const jobMs = (p: HonestPhase) => p.outcome.accepted.flatMap((id) => r.times.get(id) ?? []);
  const submitMs = (p: HonestPhase) => p.outcome.latencyMs['202'] ?? [];
  const ratio = (f: (p: HonestPhase) => number[]) => round(percentile(f(attacked), 99) / percentile(f(baseline), 99), 2);
  const both = (f: (p: HonestPhase) => string) => `${f(baseline)} / ${f(attacked)}`;
  return {
    name: 'hostile-tenant',
    jobs: r.jobs,
    figures: {
      'honest load per phase': r.load,
      'honest submit ms p50/p95/p99, without attacker': spread(submitMs(baseline)),
      'honest submit ms p50/p95/p99, with attacker': spread(submitMs(attacked)),
      'honest job ms p50/p95/p99 (created → finished), without': spread(jobMs(baseline)),
      'honest job ms p50/p95/p99 (created → finished), with': spread(jobMs(attacked)),
      'honest job p99 ratio with / without (bar: 2×)': ratio(jobMs),
      'honest submit p99 ratio with / without': ratio(submitMs),
      'health ms p99 / max, without / with': both((p) => `${round(percentile(p.health.ms, 99))} / ${round(Math.max(...p.health.ms))}`),
      'honest sync infer on the dynamic model, without / with': both((p) => answers(p.dynamic.answers)),
      'honest event stream, without / with': both((p) => p.stream),
      'honest webhooks never delivered': r.undelivered,
      'honest bulk run, without / with': both((p) => bulkLine(p.bulk)),
      'before that run: its id squatted, its output written': Object.entries(r.early.answers)
        .map(([name, a]) => `${name.replace('bulk: ', '')}: ${answers(a)}`)
        .join('; '),
      'bucket objects changed outside the honest run and the attacker': outsideChanges(r).length,
      "objects in the attacker's area with honest rows": r.leaks.victimRowsInAttackerArea.length,
      'deployment before → after the attack': `rev ${r.before.revision} (${r.before.versions}) → rev ${r.after.revision} (${r.after.versions})`,
      "attacker's canary jobs": answers(r.leaks.canaryJobs) || '(none)',
      'canary guard, right after the attack': r.canary,
      'workers alive at the end': `${r.workers.filter((w) => w.alive).length}/${r.workers.length}`,
      'Redis used_memory MB: start → before attack → end': `${round(r.memoryAtStart)} → ${round(r.before.redisMb)} → ${round(r.after.redisMb)}`,
      'API heap MB after GC, before → after attack': `${round(r.before.heapMb)} → ${round(r.after.heapMb)}`,
      'arrivals recorded on the dynamic model / honest rows sent': `${r.leaks.dynamicArrivals} / ${probeCount(r)}`,
      'attacker requests sent': tally?.sent ?? 0,
      ...attackFigures(tally),
      "attacker's webhook attempt errors": r.leaks.webhookErrors.join(' | ') || '(none)',
      '5xx answers (honest / attacker)': `${honest5xx(r)} / ${tally ? attacker5xx(tally) : '?'}`,
      ...(tally && tally.samples.length > 0 ? { 'first problems': tally.samples.join(' | ') } : {}),
    },
    violations,
  };
}

function honestViolations(r: HostileRun): string[] {
  const v: string[] = [];
  const { baseline, attacked, warm } = r.phases;
  if (!r.settled) v.push("the honest tenant's queue never settled");
  if (r.jobs.failed > 0) v.push(`${r.jobs.failed} honest job(s) failed: ${JSON.stringify(r.jobs.failedByReason)}`);
  if (r.undelivered > 0) v.push(`${r.undelivered} honest webhook(s) never delivered`);
  for (const [name, p] of Object.entries({ warm, baseline, attacked })) {
    if (Object.keys(p.outcome.rejected).length > 0)
      v.push(`${name}: honest submissions not accepted: ${JSON.stringify(p.outcome.rejected)}`);
    const dynamic = Object.keys(p.dynamic.answers).filter((k) => !k.startsWith('200'));
    if (dynamic.length > 0) v.push(`${name}: honest sync inference on the dynamic model answered ${answers(p.dynamic.answers)}`);
    const health = Object.keys(p.health.answers).filter((k) => !k.startsWith('200'));
    if (health.length > 0) v.push(`${name}: health answered ${answers(p.health.answers)}`);
    if (name !== 'warm' && p.stream !== '200, succeeded event') v.push(`${name}: the honest event stream: ${p.stream}`);
    if (name !== 'warm' && !bulkClean(p.bulk)) v.push(`${name}: the honest bulk run: ${bulkLine(p.bulk)}`);
  }
  const frozen = Math.max(...attacked.health.ms);
  if (frozen > FROZEN_MS) v.push(`the API froze during the attack: a health check took ${round(frozen)} ms`);
  return v;
}

function attackViolations(r: HostileRun, tally: AttackTally | undefined): string[] {
  const v: string[] = [];
  for (const t of [r.early, ...(tally ? [tally] : [])]) v.push(...Object.entries(t.problems).map(([p, n]) => `${n}× ${p}`));
  const outside = outsideChanges(r);
  if (outside.length > 0)
    v.push(
      `${outside.length} object(s) changed outside the honest run's output and the attacker's area: ${outside.slice(0, 5).join(', ')}`,
    );
  if (r.leaks.victimRowsInAttackerArea.length > 0)
    v.push(`honest rows in the attacker's area: ${r.leaks.victimRowsInAttackerArea.slice(0, 5).join(', ')}`);
  if (r.after.revision !== r.before.revision) {
    v.push(
      `the shared deployment changed during the attack: rev ${r.before.revision} (${r.before.versions}) → rev ${r.after.revision} (${r.after.versions})`,
    );
  }
  for (const w of r.workers.filter((w) => !w.alive)) v.push(`the ${w.what} worker died`);
  const growth = r.after.redisMb - r.before.redisMb - Math.max(0, r.before.redisMb - r.memoryAtStart);
  if (growth > REDIS_GROWTH_MB) v.push(`Redis grew ${round(growth)} MB more during the attack than during the same load without it`);
  if (r.leaks.dynamicArrivals > probeCount(r)) {
    v.push(`the arrival history holds ${r.leaks.dynamicArrivals} rows for the dynamic model; the API accepted ${probeCount(r)} there`);
  }
  const oracle = r.leaks.webhookErrors.filter((e) => /\d+\.\d+\.\d+\.\d+|\[[0-9a-f:]+\]|:\d{2,5}\b|\bE[A-Z]{4,}/.test(e));
  if (oracle.length > 0)
    v.push(`webhook attempt errors name addresses or socket errors (a port-scan oracle): ${oracle.slice(0, 3).join(' | ')}`);
  if (!tally) return v;
  // A 429 rate_limited says nothing about the bucket: it answers before the request is looked at.
  const unknown = keys(tally.answers['bulk: an unknown bucket'], RATE_LIMITED);
  const forbidden = keys(tally.answers['bulk: a bucket not granted'], RATE_LIMITED);
  if (unknown !== forbidden) v.push(`an unknown bucket answers ${unknown}, a bucket not granted ${forbidden}: a bucket-existence oracle`);
  // Held longer than twice the headers timeout and a margin: the timeout did not end it.
  const maxMs = 2 * r.headersTimeoutMs + 2_000;
  const held = [...tally.slowloris.closedAfterMs, ...tally.slowloris.openAtStopMs].filter((ms) => ms > maxMs);
  if (held.length > 0) v.push(`${held.length} slowloris socket(s) held longer than ${maxMs} ms (HEADERS_TIMEOUT_MS ${r.headersTimeoutMs})`);
  if (tally.streams.openAtStop >= r.sseStreams) v.push(`the attacker held all ${tally.streams.openAtStop} event streams it opened: no cap`);
  // With the API's rate limits on, each attack must still have reached past them once, or its own
  // refusal went untested.
  for (const [attack, answers] of Object.entries(tally.answers)) {
    if (keys(answers, RATE_LIMITED) === '') v.push(`${attack}: only ever answered ${RATE_LIMITED}, so its own refusal was never seen`);
  }
  return v;
}

/** Keys added, removed or rewritten, other than the honest attack run's parts and manifest and the attacker's own area. */
function outsideChanges({ before, after, areas }: HostileRun): string[] {
  const honestRun = (key: string) =>
    key.startsWith(areas.honestRun) && /^(part-\d+\.jsonl|_manifest\.json)$/.test(key.slice(areas.honestRun.length));
  const changed = new Set<string>();
  for (const [key, v] of after.objects) if (before.objects.get(key) !== v) changed.add(key);
  for (const key of before.objects.keys()) if (!after.objects.has(key)) changed.add(key);
  return [...changed].filter((key) => !honestRun(key) && !key.startsWith(areas.attacker));
}

function attackFigures(tally: AttackTally | undefined): Record<string, string> {
  if (!tally) return {};
  const figures: Record<string, string> = {};
  for (const [name, a] of Object.entries(tally.answers)) {
    const slowest = tally.slowestMs[name];
    figures[`attack: ${name}`] = `${answers(a)}${slowest !== undefined && slowest > 1_000 ? ` (slowest ${round(slowest / 1000)} s)` : ''}`;
  }
  const { closedAfterMs: closed, openAtStopMs: open } = tally.slowloris;
  figures['attack: slowloris sockets'] =
    `${closed.length} closed by the server after ${round(percentile(closed, 50))} ms p50 / ${round(Math.max(0, ...closed))} max; ${open.length} open at the stop`;
  const { openAtStop, endedByServer, firstEnd } = tally.streams;
  figures['attack: event streams open at the stop / ended by the server'] =
    `${openAtStop} / ${endedByServer}${firstEnd ? ` (the first ended with: ${firstEnd})` : ''}`;
  return figures;
}

function spread(ms: number[]): string {
  return [50, 95, 99].map((p) => round(percentile(ms, p))).join(' / ');
}

function answers(byKey: Record<string, number> | undefined): string {
  return Object.entries(byKey ?? {})
    .sort(([, a], [, b]) => b - a)
    .map(([key, n]) => `${key} ×${n}`)
    .join(', ');
}

const RATE_LIMITED = '429 rate_limited';

/** The answers' keys, sorted, less `except`. */
function keys(byKey: Record<string, number> | undefined, except?: string): string {
  return Object.keys(byKey ?? {})
    .filter((k) => k !== except)
    .sort()
    .join(', ');
}

/** Succeeded, and every input id in its output exactly once. */
function bulkClean(b: BulkOutcome | undefined): boolean {
  return b !== undefined && b.status === 'succeeded' && b.missing + b.duplicates + b.extra === 0;
}

function bulkLine(b: BulkOutcome | undefined): string {
  if (!b) return '(none)';
  const ids = `${b.missing} missing, ${b.duplicates} twice, ${b.extra} foreign`;
  return `${b.answer} → ${b.status}${b.error ? ` (${b.error})` : ''}, ${b.rowsDone} rows, ids ${ids}, ${round(b.ms / 1000)} s`;
}

function probeCount(r: HostileRun): number {
  return Object.values(r.phases).reduce((n, p) => n + total(p.dynamic), 0);
}

function total(p: ProbeResult): number {
  return Object.values(p.answers).reduce((a, b) => a + b, 0);
}

function honest5xx(r: HostileRun): number {
  let n = 0;
  for (const p of Object.values(r.phases)) {
    for (const byKey of [p.outcome.rejected, p.health.answers, p.dynamic.answers]) {
      for (const [key, c] of Object.entries(byKey)) if (/^5\d\d/.test(key)) n += c;
    }
  }
  return n;
}

function attacker5xx(t: AttackTally): number {
  let n = 0;
  for (const byKey of Object.values(t.answers)) for (const [key, c] of Object.entries(byKey)) if (/^5\d\d/.test(key)) n += c;
  return n;
}
