/**
 * `npm run chaos [-- --short] [--only NAME[,NAME]] [--redis single|cluster] [--json FILE]`: the chaos suite. Each
 * scenario starts a stack of its own (scripts/chaos/stack.ts), injects its fault, and reports
 * counts; this prints one table per scenario and exits non-zero when any job is missing or any
 * invariant broke. `--short` runs every scenario small (what test/chaos.test.ts runs in CI).
 * docs/RELIABILITY.md describes the scenarios and holds the latest full run's tables.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { API_FUZZ_FULL, API_FUZZ_SHORT, apiFuzz } from './api-fuzz.ts';
import { HOSTILE_TENANT_FULL, HOSTILE_TENANT_SHORT, hostileTenant } from './hostile-tenant.ts';
import { REDIS_RESTART_FULL, REDIS_RESTART_SHORT, redisRestart } from './redis-restart.ts';
import { type ChaosContext, formatReport, type ScenarioReport } from './report.ts';
import { S3_OUTAGE_FULL, S3_OUTAGE_SHORT, s3Outage } from './s3-outage.ts';
import { CLUSTER_MASTERS, type RedisTopology } from './stack.ts';
import { WEBHOOK_DOWN_FULL, WEBHOOK_DOWN_SHORT, webhookDown } from './webhook-down.ts';
import { WORKER_KILL_FULL, WORKER_KILL_SHORT, workerKill } from './worker-kill.ts';

type Run = (ctx: ChaosContext, short: boolean) => Promise<ScenarioReport>;

/** In the order they run: the cheap, fast-failing ones first. */
export const SCENARIOS: Record<string, Run> = {
  'api-fuzz': (ctx, short) => apiFuzz(ctx, short ? API_FUZZ_SHORT : API_FUZZ_FULL),
  's3-outage': (ctx, short) => s3Outage(ctx, short ? S3_OUTAGE_SHORT : S3_OUTAGE_FULL),
  'redis-restart': (ctx, short) => redisRestart(ctx, short ? REDIS_RESTART_SHORT : REDIS_RESTART_FULL),
  'webhook-down': (ctx, short) => webhookDown(ctx, short ? WEBHOOK_DOWN_SHORT : WEBHOOK_DOWN_FULL),
  'worker-kill': (ctx, short) => workerKill(ctx, short ? WORKER_KILL_SHORT : WORKER_KILL_FULL),
  'hostile-tenant': (ctx, short) => hostileTenant(ctx, short ? HOSTILE_TENANT_SHORT : HOSTILE_TENANT_FULL),
};

export async function chaosMain(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      short: { type: 'boolean', default: false },
      only: { type: 'string' },
      json: { type: 'string' },
      redis: { type: 'string', default: 'single' },
    },
  });
  const redis = values.redis;
  if (redis !== 'single' && redis !== 'cluster') {
    process.stderr.write(`chaos: --redis must be single or cluster, not ${JSON.stringify(redis)}\n`);
    return 2;
  }
  const names = values.only ? values.only.split(',').map((n) => n.trim()) : Object.keys(SCENARIOS);
  const unknown = names.filter((n) => !(n in SCENARIOS));
  if (unknown.length > 0) {
    process.stderr.write(`chaos: unknown scenario ${unknown.join(', ')} (known: ${Object.keys(SCENARIOS).join(', ')})\n`);
    return 2;
  }
  // As bin/warmpool.mjs does: the AWS SDK's Node 22 notice is noise in the suite's output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  const log = (line: string) => process.stdout.write(`${new Date().toISOString().slice(11, 19)} ${line}\n`);
  const reports: ScenarioReport[] = [];
  const startedAt = Date.now();
  for (const name of names) {
    reports.push(await runOne(name, SCENARIOS[name] as Run, { short: values.short, redis }, log));
    process.stdout.write(`\n${formatReport(reports.at(-1) as ScenarioReport)}\n\n`);
  }
  const failed = reports.filter((r) => r.violations.length > 0);
  process.stdout.write(`${'='.repeat(60)}\n`);
  for (const r of reports) process.stdout.write(`${formatReport(r)}\n`);
  const minutes = ((Date.now() - startedAt) / 60_000).toFixed(1);
  const on = redis === 'cluster' ? `a ${CLUSTER_MASTERS}-master Redis Cluster` : 'one redis-server';
  process.stdout.write(`\nchaos: ${reports.length - failed.length}/${reports.length} scenarios passed on ${on} in ${minutes} min\n`);
  if (values.json) {
    const machine = { cpus: os.availableParallelism(), node: process.version, short: values.short, redis };
    writeFileSync(values.json, `${JSON.stringify({ machine, reports }, null, 2)}\n`);
  }
  return failed.length === 0 ? 0 : 1;
}

/** One scenario in a folder of its own; a scenario that throws is a failed scenario, not a crash. */
async function runOne(
  name: string,
  run: Run,
  { short, redis }: { short: boolean; redis: RedisTopology },
  log: (line: string) => void,
): Promise<ScenarioReport> {
  const dir = mkdtempSync(path.join(os.tmpdir(), `warmpool-chaos-${name}-`));
  log(`${name}: starting${short ? ' (short)' : ''}${redis === 'cluster' ? ' on a Redis Cluster' : ''}`);
  let report: ScenarioReport;
  try {
    report = await run({ dir, log, redis }, short);
  } catch (err) {
    const message = err instanceof Error ? (err.stack ?? err.message) : String(err);
    log(`${name}: threw ${message}`);
    report = { name, figures: {}, violations: [`the scenario threw: ${errorMessage(err)}`] };
  }
  // A failed scenario's folder (worker logs, Redis and S3 data) is kept for a post-mortem.
  if (report.violations.length > 0) log(`${name}: failed; its folder is kept: ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
  return report;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  process.exitCode = await chaosMain(process.argv.slice(2));
}
