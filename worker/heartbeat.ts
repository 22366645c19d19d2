/**
 * The worker's heartbeat (DESIGN §6): its state, model, version, throughput, batch profile and
 * memory, written to Redis with a TTL so a worker that dies silently disappears from the pool
 * view by itself. The same tick publishes the worker's metrics snapshot for the API's /metrics.
 */
import os from 'node:os';
import type { HeartbeatPayload } from '../infra/fleet/worker-states.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { RedisClient } from '../infra/redis/client.ts';

export type { HeartbeatPayload };

/** What the worker fills in of each beat: all but what the heartbeat itself adds. */
export type HeartbeatSample = Omit<HeartbeatPayload, 'pid' | 'host' | 'updatedAt' | 'memory'>;

export interface HeartbeatOptions {
  redis: Pick<RedisClient, 'set'>;
  key: string;
  intervalMs: number;
  ttlMs: number;
  clock: Clock;
  /** Fields that change: state, throughput, in-flight jobs, profile. */
  sample: () => HeartbeatSample;
  /** Extra work on each beat (metrics snapshot); failures are reported, never thrown. */
  onBeat?: () => Promise<void>;
  onError?: (err: unknown) => void;
}

export interface Heartbeat {
  /** Writes a beat now (e.g. right after a state change). */
  beat(): Promise<void>;
  /** Stops the timer; a final beat records the last state, which then expires with its TTL. */
  close(): Promise<void>;
}

export function startHeartbeat(options: HeartbeatOptions): Heartbeat {
  const { redis, key, intervalMs, ttlMs, clock } = options;
  const stop = new AbortController();
  let closed = false;

  const beat = async (): Promise<void> => {
    const payload: HeartbeatPayload = {
      ...options.sample(),
      pid: process.pid,
      host: os.hostname(),
      updatedAt: clock.now(),
      memory: { rssBytes: process.memoryUsage.rss(), heapUsedBytes: process.memoryUsage().heapUsed },
    };
    try {
      await redis.set(key, JSON.stringify(payload), 'PX', ttlMs);
      await options.onBeat?.();
    } catch (err) {
      options.onError?.(err);
    }
  };

  const loop = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      await beat();
      await clock.sleep(intervalMs, stop.signal).catch(() => undefined);
    }
  };
  const running = loop();

  return {
    beat,
    async close() {
      if (closed) return;
      closed = true;
      stop.abort();
      await running;
      await beat();
    },
  };
}
