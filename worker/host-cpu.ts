/**
 * Whether a measurement ran beside other work: the CPU the rest of the host used while it ran,
 * in cores (the host's busy share of its CPUs from /proc/stat, less this process's own CPU time).
 * Warm-up compares thread counts by timing them one after the other, so another process that
 * takes a core during one of them decides the comparison, and the choice is kept beside the model
 * for every later start (worker/warmup.ts).
 *
 * Only Linux's /proc/stat is read; elsewhere, or when it cannot be read, the meter cannot tell
 * (undefined) and warm-up judges nothing. In a container the figure is the whole host's: a
 * neighbour's load is contention for the cores too.
 */
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';

export interface HostCpuMeter {
  /** Opens a window; calling what it returns gives the cores the rest of the host used meanwhile, on average. */
  window(): () => number | undefined;
  /** The cores the rest of the host uses over the next `ms`. */
  sample(ms: number): Promise<number | undefined>;
}

/** One reading: the host's busy and total jiffies over its CPUs, this process's CPU ms, and when. */
export interface HostCpuReading {
  busy: number;
  total: number;
  cpus: number;
  selfMs: number;
  atMs: number;
}

/** The cores others used between two readings (never below 0: the two clocks are read apart). */
export function othersCores(a: HostCpuReading, b: HostCpuReading): number | undefined {
  const total = b.total - a.total;
  const wall = b.atMs - a.atMs;
  if (total <= 0 || wall <= 0) return undefined;
  const host = ((b.busy - a.busy) / total) * b.cpus;
  const self = (b.selfMs - a.selfMs) / wall;
  return Math.max(0, host - self);
}

/** The `cpu` line of /proc/stat as busy and total jiffies, and the count of `cpuN` lines. */
export function parseProcStat(text: string): Pick<HostCpuReading, 'busy' | 'total' | 'cpus'> | undefined {
  const lines = text.split('\n');
  const all = lines.find((l) => l.startsWith('cpu '));
  if (!all) return undefined;
  // user nice system idle iowait irq softirq steal (guest time is inside user already)
  const f = all.trim().split(/\s+/).slice(1, 9).map(Number);
  if (f.length < 4 || f.some((v) => !Number.isFinite(v))) return undefined;
  const idle = (f[3] ?? 0) + (f[4] ?? 0);
  const total = f.reduce((s, v) => s + v, 0);
  const cpus = lines.filter((l) => /^cpu\d+ /.test(l)).length;
  return cpus > 0 ? { busy: total - idle, total, cpus } : undefined;
}

/** The meter on /proc/stat and process.cpuUsage(); `undefined` answers where /proc/stat does not read. */
export function procStatMeter(file = '/proc/stat'): HostCpuMeter {
  const read = (): HostCpuReading | undefined => {
    let stat: ReturnType<typeof parseProcStat>;
    try {
      stat = parseProcStat(readFileSync(file, 'utf8'));
    } catch {
      return undefined;
    }
    if (!stat) return undefined;
    const { user, system } = process.cpuUsage();
    return { ...stat, selfMs: (user + system) / 1000, atMs: performance.now() };
  };
  const window = () => {
    const start = read();
    return () => {
      const end = read();
      return start && end ? othersCores(start, end) : undefined;
    };
  };
  return {
    window,
    async sample(ms) {
      const end = window();
      await sleep(ms);
      return end();
    },
  };
}

/**
 * Whether a thread count was measured short of its cores: the rest of the host left it fewer than
 * `threads − ½` of the `cores` (0, ONNX Runtime's default, counts as every core). Half a core is
 * half of one of its threads' work: the order of what a comparison of thread counts measures, so
 * less than that does not move it and more can decide it.
 */
export function measuredShort(threads: number, othersCores: number, cores: number): boolean {
  const wanted = threads > 0 ? Math.min(threads, cores) : cores;
  return cores - othersCores < wanted - 0.5;
}
