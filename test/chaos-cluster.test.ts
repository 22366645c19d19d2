/**
 * The short chaos suite's worker-kill and redis-restart scenarios on a local 3-master Redis
 * Cluster (chaos.test.ts runs every scenario on one Redis; `npm run chaos:cluster` runs all of
 * them on a cluster, full size). A file of its own so that vitest runs it beside the other.
 */
import { describe, expect, it } from 'vitest';
import { type FaultName, REDIS_RESTART_SHORT, redisRestart } from '../scripts/chaos/redis-restart.ts';
import { WORKER_KILL_SHORT, workerKill } from '../scripts/chaos/worker-kill.ts';
import { chaosContexts, expectClean } from './support/chaos-context.ts';
import { sized } from './support/test-scale.ts';

const context = chaosContexts();

describe('chaos on a local 3-master Redis Cluster (short)', () => {
  it('worker-kill: SIGKILLed workers lose no accepted job; counts reconcile', async () => {
    // A kill every second: at a quiet machine's pace the run lasts a few seconds, and one kill
    // every 3 s (the default) could miss it entirely.
    const jobs = sized(400, 800);
    const report = await workerKill(context('kill-cluster', 'cluster'), { ...WORKER_KILL_SHORT, jobs, killEveryMs: 1_000 });
    expectClean(report);
    expect(report.figures['workers SIGKILLed']).toBeGreaterThan(0);
    expect(report.jobs?.accepted).toBe(jobs);
    expect((report.jobs?.succeeded ?? 0) + (report.jobs?.failed ?? 0)).toBe(jobs);
  }, 180_000);

  it('redis-restart: jobs survive the queue shard SIGKILLed (and, full size, every node stopped); 503 while down', async () => {
    // Every node stopped by SIGTERM and SIGKILL is the single-node run's fault too; the shard
    // that holds the queue going alone is the cluster's own. `npm run test:full` runs all three.
    const faults = sized<FaultName[]>(['SIGKILL queue shard'], ['SIGTERM', 'SIGKILL', 'SIGKILL queue shard']);
    const report = await redisRestart(context('redis-cluster', 'cluster'), { ...REDIS_RESTART_SHORT, faults });
    expectClean(report);
    for (const fault of faults) {
      expect(report.figures[`${fault}: 503 unavailable answers`]).toBeGreaterThan(0);
    }
    expect(report.jobs?.missing).toBe(0);
    expect(report.figures['webhooks not delivered']).toBe(0);
  }, 240_000);
});
