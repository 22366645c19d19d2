/**
 * What hostile-tenant watches while a phase runs, sampled from outside the API's code: the API's
 * open file descriptors (/proc/self/fd: the API and the dispatcher run in the scenario's
 * process), its RSS, each worker's RSS and peak RSS (/proc/<pid>/status VmRSS, VmHWM: a Parquet
 * bomb inflated would show there), and Redis' used_memory (INFO, summed over a cluster's
 * masters). Each figure keeps its peak per phase, so the attack phase can be held to the phase
 * without the attacker.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { closeRedis, createRedis, masterNodes } from '../../infra/redis/client.ts';

const MiB = 1024 * 1024;
const SAMPLE_MS = 250;
/** Redis' INFO is a round trip: once a second is enough for a figure that moves with stored bytes. */
const REDIS_EVERY = 4;

export interface PhasePeaks {
  apiFds: number;
  apiRssMb: number;
  redisMb: number;
  /** Worker (by pid) → its highest VmRSS sampled in the phase, MB. */
  workerRssMb: Record<number, number>;
}

export interface Gauges {
  /** From now on, samples count for `phase`. */
  phase(name: string): void;
  /** Worker pid → VmHWM (its peak RSS since it started), MB, now. */
  workerPeaks(): Record<number, number>;
  peaks(): Record<string, PhasePeaks>;
  stop(): Promise<void>;
}

export function startGauges(redisUrl: string, workers: () => number[]): Gauges {
  const redis = createRedis(redisUrl);
  const byPhase: Record<string, PhasePeaks> = {};
  let current: PhasePeaks | undefined;
  let tick = 0;
  let busy = false;
  const sample = async () => {
    if (!current || busy) return;
    busy = true;
    const p = current;
    try {
      p.apiFds = Math.max(p.apiFds, readdirSync('/proc/self/fd').length);
      p.apiRssMb = Math.max(p.apiRssMb, process.memoryUsage().rss / MiB);
      for (const pid of workers()) {
        const rss = procStatus(pid)?.rss;
        if (rss !== undefined) p.workerRssMb[pid] = Math.max(p.workerRssMb[pid] ?? 0, rss);
      }
      if (tick++ % REDIS_EVERY === 0) p.redisMb = Math.max(p.redisMb, await usedMemoryMb(redis));
    } catch {
      // A worker that exited between the listing and the read, or Redis briefly away: the next sample.
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void sample(), SAMPLE_MS);
  return {
    phase(name) {
      byPhase[name] ??= { apiFds: 0, apiRssMb: 0, redisMb: 0, workerRssMb: {} };
      current = byPhase[name];
      void sample();
    },
    workerPeaks: () => Object.fromEntries(workers().flatMap((pid) => [[pid, procStatus(pid)?.peak ?? 0]])),
    peaks: () => byPhase,
    async stop() {
      clearInterval(timer);
      current = undefined;
      await closeRedis(redis);
    },
  };
}

/** A process's RSS and peak RSS, MB; undefined once it has exited. */
function procStatus(pid: number): { rss: number; peak: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const mb = (field: string) => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(status)?.[1] ?? 0) / 1024;
    return { rss: mb('VmRSS'), peak: mb('VmHWM') };
  } catch {
    return undefined;
  }
}

/** Redis' used_memory, summed over the masters of a cluster, MB. */
export async function usedMemoryMb(redis: ReturnType<typeof createRedis>): Promise<number> {
  let bytes = 0;
  for (const node of await masterNodes(redis)) bytes += Number(/used_memory:(\d+)/.exec(await node.info('memory'))?.[1] ?? 0);
  return bytes / MiB;
}
