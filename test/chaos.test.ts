/**
 * The chaos suite, small (`npm run chaos` runs it full size; docs/RELIABILITY.md): each
 * scenario starts its own redis-server, S3-protocol server, API and worker processes — never
 * the suite's shared ones, since it stops and restarts them — injects its fault and reports
 * counts. A scenario's `violations` list every invariant that broke (a missing job, a 5xx, a
 * hang, a worker that died or never recovered); here they must be empty. Timings are reported
 * by the scenarios, never asserted. The worker-kill and redis-restart scenarios run again on a
 * local 3-master Redis Cluster in chaos-cluster.test.ts (`npm run chaos:cluster` runs all of
 * them there).
 */
import { describe, expect, it } from 'vitest';
import { API_FUZZ_SHORT, apiFuzz } from '../scripts/chaos/api-fuzz.ts';
import { HOSTILE_TENANT_SHORT, hostileTenant } from '../scripts/chaos/hostile-tenant.ts';
import { REDIS_RESTART_SHORT, redisRestart } from '../scripts/chaos/redis-restart.ts';
import { S3_OUTAGE_SHORT, s3Outage } from '../scripts/chaos/s3-outage.ts';
import { WEBHOOK_DOWN_SHORT, webhookDown } from '../scripts/chaos/webhook-down.ts';
import { WORKER_KILL_SHORT, workerKill } from '../scripts/chaos/worker-kill.ts';
import { chaosContexts, expectClean } from './support/chaos-context.ts';

const context = chaosContexts();

describe('chaos (short)', () => {
  it('worker-kill: SIGKILLed workers lose no accepted job; counts reconcile', async () => {
    // A kill every second, as on the cluster below: 600 jobs drain in under 3 s on a quiet machine, before a 3 s first kill.
    const report = await workerKill(context('kill'), { ...WORKER_KILL_SHORT, jobs: 600, killEveryMs: 1_000 });
    expectClean(report);
    expect(report.figures['workers SIGKILLed']).toBeGreaterThan(0);
    expect(report.jobs?.accepted).toBe(600);
    expect((report.jobs?.succeeded ?? 0) + (report.jobs?.failed ?? 0)).toBe(600);
  }, 180_000);

  it('redis-restart: 202 jobs survive SIGTERM and SIGKILL of an AOF Redis; 503 while down; all reconnect', async () => {
    const report = await redisRestart(context('redis'), REDIS_RESTART_SHORT);
    expectClean(report);
    for (const signal of ['SIGTERM', 'SIGKILL']) expect(report.figures[`${signal}: 503 unavailable answers`]).toBeGreaterThan(0);
    expect(report.jobs?.missing).toBe(0);
    expect(report.figures['webhooks not delivered']).toBe(0);
  }, 180_000);

  it('s3-outage: a worker backs off in downloading, recovers when S3 returns, then serves', async () => {
    const report = await s3Outage(context('s3'), S3_OUTAGE_SHORT);
    expectClean(report);
    expect(report.figures['states during outage']).toBe('downloading');
    expect(report.jobs?.succeeded).toBe(report.jobs?.accepted);
  }, 180_000);

  it('webhook-down: jobs complete beside a down or slow receiver; every webhook arrives later', async () => {
    const report = await webhookDown(context('hooks'), { ...WEBHOOK_DOWN_SHORT, jobs: 100 });
    expectClean(report);
    expect(report.figures['webhooks never delivered']).toBe(0);
  }, 180_000);

  it('api-fuzz: generated hostile requests get no 5xx, only JSON 4xx errors; the server lives', async () => {
    const report = await apiFuzz(context('fuzz'), { ...API_FUZZ_SHORT, requests: 1_000, warmup: 200 });
    expectClean(report);
    expect(report.figures['requests sent']).toBeGreaterThanOrEqual(1_000);
    expect(report.figures['5xx answers']).toBe(0);
  }, 180_000);

  it('hostile-tenant: beside an attacker, the honest tenant loses nothing and nothing of it is read or written; no 5xx', async () => {
    const report = await hostileTenant(context('hostile'), HOSTILE_TENANT_SHORT);
    expectClean(report);
    expect(report.jobs?.accepted).toBeGreaterThan(0);
    expect(report.jobs?.succeeded).toBe(report.jobs?.accepted);
    expect(report.figures['honest webhooks never delivered']).toBe(0);
    expect(report.figures['5xx answers (honest / attacker)']).toBe('0 / 0');
    expect(report.figures['bucket objects changed outside the honest run and the attacker']).toBe(0);
  }, 180_000);
});
