/**
 * The dev stack's narrator: prints each worker's state changes from the heartbeats (the same
 * view the pool API has), and tells start-up when a model's worker is warmed. Only workers
 * started since `since`: a previous run's last heartbeats (kept in Redis across restarts, until
 * their TTL) are not this stack's.
 */
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import type { RedisClient } from '../../infra/redis/client.ts';

const POLL_MS = 250;

export interface WorkerWatcher {
  /** A worker of `model` is active, or warmed in standby (the scaler activates it on demand); false after `timeoutMs` or once `signal` aborts. */
  warmed(model: string, timeoutMs: number, signal: AbortSignal): Promise<boolean>;
  close(): Promise<void>;
}

export function watchWorkers(redis: RedisClient, prefix: string, since: number, say: (line: string) => void): WorkerWatcher {
  const seen = new Map<string, WorkerState>();
  const stop = new AbortController();
  const beats = async () => (await listHeartbeats(redis, prefix)).filter((hb) => hb.startedAt >= since);
  const poll = async () => {
    for (const hb of await beats()) {
      if (seen.get(hb.id) === hb.state) continue;
      seen.set(hb.id, hb.state);
      const profile =
        hb.state === 'active' && hb.batchProfile ? ` (batch ${hb.batchProfile.chosenBatch}, ${hb.batchProfile.threads} threads)` : '';
      say(`worker   ${hb.model}@${hb.version} pid ${hb.pid}: ${hb.state}${profile}${hb.error ? ` — ${hb.error}` : ''}`);
    }
  };
  const loop = (async () => {
    while (!stop.signal.aborted) {
      await poll().catch(() => undefined);
      await systemClock.sleep(POLL_MS, stop.signal).catch(() => undefined);
    }
  })();
  return {
    async warmed(model, timeoutMs, signal) {
      const deadline = Date.now() + timeoutMs;
      const done = AbortSignal.any([signal, stop.signal]);
      while (Date.now() < deadline && !done.aborted) {
        const live = await beats().catch(() => []);
        if (live.some((hb) => hb.model === model && (hb.state === 'active' || hb.state === 'standby'))) return true;
        await systemClock.sleep(POLL_MS, done).catch(() => undefined);
      }
      return false;
    },
    async close() {
      stop.abort();
      await loop;
    },
  };
}
