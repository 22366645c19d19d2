/**
 * vitest setupFiles entry: fails a test file that leaves running a Redis connection, a BullMQ
 * Worker/Queue/QueueEvents or a child process it started (see leak-check.ts for how each is seen).
 *
 * Why aroundAll and not afterAll: vitest runs a file's afterAll hooks, then the cleanups its
 * beforeAll hooks returned, then its file-scoped fixtures' teardowns. This file's hooks are
 * registered first on the file, so its aroundAll is the outermost one: the code after
 * `runSuite()` runs once all of that is done. An afterAll here would run before the cleanups.
 *
 * The baseline is taken when this module loads, before the test file's own imports run, since
 * many files create their Redis client at import time.
 *
 * It relies on `pool: 'forks'` (vitest.config.ts): one file at a time in a process. Files run
 * side by side in worker threads would share one process and see each other's clients and children.
 * Both the unit and the integration project run without isolation: one process takes its files
 * one after another, and vitest executes this file again before each, so each file still gets
 * its own baseline.
 */
import { aroundAll } from 'vitest';
import { parseClusterUrl } from '../../infra/kernel/redis-url.ts';
import { formatLeaks, settleLeaks, takeBaseline } from './leak-check.ts';
import { testServices } from './services.ts';

const baseline = takeBaseline(redisPorts(testServices().redisUrl));

aroundAll(async (runSuite) => {
  await runSuite();
  const leaks = await settleLeaks(baseline);
  if (leaks.length === 0) return;
  // Once reported, a leaked child is stopped: it would outlive this test process (vitest ends
  // the process, and the child, orphaned, runs on). Connections end with the process anyway.
  for (const { pid } of leaks) if (pid !== undefined) stopProcess(pid);
  throw new Error(formatLeaks(leaks));
});

function stopProcess(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // It exited meanwhile.
  }
}

function redisPorts(url: string): number[] {
  const cluster = parseClusterUrl(url);
  if (cluster) return cluster.nodes.map((node) => node.port);
  return [Number(new URL(url).port || 6379)];
}
