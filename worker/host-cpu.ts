/**
 * Whether a measurement ran beside other work: the CPU the rest of the host used while it ran,
 * in cores (the host's busy share of its CPUs from /proc/stat, less this process's own CPU time).
 * Warm-up compares thread counts by timing them one after the other, so another process that
 * takes a core during one of them decides the comparison, and the choice is kept beside the model
 * for every later start (worker/warmup.ts).
 *
 * Only Linux's /proc/stat is read; elsewhere, or when it cannot be read, the meter cannot tell
 * (undefined) and warm-up judges nothing. Only the CPUs this process may run on count (its
 * `Cpus_allowed_list` in /proc/self/status, a container's cpuset): a neighbour busy on cores
 * this worker cannot use takes nothing from it, one busy on its own cores does.
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

/**
 * Busy and total jiffies from /proc/stat over the `cpuN` lines of `allowed` (every CPU when
 * absent), and how many CPUs that is.
 */
export function parseProcStat(text: string, allowed?: ReadonlySet<number>): Pick<HostCpuReading, 'busy' | 'total' | 'cpus'> | undefined {
  let busy = 0;
  let total = 0;
  let cpus = 0;
  for (const line of text.split('\n')) {
    const m = /^cpu(\d+) (.*)$/.exec(line);
    if (!m || (allowed && !allowed.has(Number(m[1])))) continue;
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    const f = (m[2] ?? '').trim().split(/\s+/).slice(0, 8).map(Number);
    if (f.length < 4 || f.some((v) => !Number.isFinite(v))) return undefined;
    const sum = f.reduce((a, v) => a + v, 0);
    busy += sum - (f[3] ?? 0) - (f[4] ?? 0);
    total += sum;
    cpus++;
  }
  return cpus > 0 ? { busy, total, cpus } : undefined;
}

/** `0-3,8,10-11` (a Cpus_allowed_list) as CPU numbers; undefined for anything else. */
export function parseCpuList(text: string): Set<number> | undefined {
  const out = new Set<number>();
  for (const part of text.trim().split(',')) {
    const m = /^(\d+)(?:-(\d+))?$/.exec(part);
    if (!m) return undefined;
    const from = Number(m[1]);
    const to = Number(m[2] ?? m[1]);
    if (to < from || to - from > 65_536) return undefined;
    for (let c = from; c <= to; c++) out.add(c);
  }
  return out.size > 0 ? out : undefined;
}

/** The CPUs this process may run on, from /proc/self/status; undefined where it does not say. */
function allowedCpus(statusFile: string): Set<number> | undefined {
  try {
    const line = readFileSync(statusFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Cpus_allowed_list:'));
    return line ? parseCpuList(line.slice('Cpus_allowed_list:'.length)) : undefined;
  } catch {
    return undefined;
  }
}

/** The meter on /proc/stat and process.cpuUsage(); `undefined` answers where /proc/stat does not read. */
export function procStatMeter(file = '/proc/stat', statusFile = '/proc/self/status'): HostCpuMeter {
  const allowed = allowedCpus(statusFile);
  const read = (): HostCpuReading | undefined => {
    let stat: ReturnType<typeof parseProcStat>;
    try {
      stat = parseProcStat(readFileSync(file, 'utf8'), allowed);
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
