/**
 * What a `warmpool dev` that died without stopping (SIGKILL, a crash) may have left running,
 * found from its stale lock (dev-lock.ts): its redis-server, which runs in a process group of
 * its own, and the workers it started, which keep serving from that Redis and would join the
 * next stack unmanaged. The next stack stops them before it starts: the workers first, with
 * SIGTERM (they drain into a Redis that is still there), then the server, with SIGTERM (it writes
 * its append-only file out), since two servers must never append to one file.
 */
import os from 'node:os';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { createRedis } from '../../infra/redis/client.ts';
import { type DevLockInfo, isRunning } from './dev-lock.ts';

/** A worker's drain limit (DRAIN_LIMIT_MS) and a margin; a server's shutdown takes far less. */
const WORKER_EXIT_WAIT_MS = 35_000;
const SERVER_EXIT_WAIT_MS = 10_000;
const WORKER = /warmpool.*\bworker\b/;
const REDIS_SERVER = /redis-server/;

/** Stops what `stale`'s stack left running; says what it stopped. */
export async function stopLeftovers(stale: DevLockInfo, say: (line: string) => void): Promise<void> {
  const redis = stale.redis;
  if (!redis || !isRunning(redis.pid, REDIS_SERVER)) return;
  const workers = await leftoverWorkers(redis.url, stale.queuePrefix);
  for (const pid of workers) signal(pid, 'SIGTERM');
  await Promise.all(workers.map((pid) => stopped(pid, WORKER, WORKER_EXIT_WAIT_MS)));
  signal(redis.pid, 'SIGTERM');
  await stopped(redis.pid, REDIS_SERVER, SERVER_EXIT_WAIT_MS);
  const what =
    workers.length > 0
      ? `its redis-server (pid ${redis.pid}) and ${workers.length} worker(s) (pid ${workers.join(', ')})`
      : `its redis-server (pid ${redis.pid})`;
  say(`stopped what the previous warmpool dev (pid ${stale.pid}) left running: ${what}`);
}

/** This machine's live worker processes that heartbeat into the dead stack's Redis. */
async function leftoverWorkers(url: string, prefix: string | undefined): Promise<number[]> {
  if (!prefix) return [];
  const client = createRedis(url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 }, () => undefined);
  try {
    const beats = await listHeartbeats(client, prefix);
    const host = os.hostname();
    return [...new Set(beats.filter((b) => b.host === host && isRunning(b.pid, WORKER)).map((b) => b.pid))];
  } catch {
    return []; // the server does not answer: nothing can be learned from it
  } finally {
    // Not closeRedis: QUIT would wait, queued, on a server that does not answer.
    client.disconnect();
  }
}

/** Resolves once `pid` has gone; SIGKILL after `waitMs`. It is not our child: poll. */
async function stopped(pid: number, name: RegExp, waitMs: number): Promise<void> {
  const deadline = Date.now() + waitMs;
  while (isRunning(pid, name)) {
    if (Date.now() > deadline) {
      signal(pid, 'SIGKILL');
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** kill(2) that tolerates a process that has just gone. */
function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
