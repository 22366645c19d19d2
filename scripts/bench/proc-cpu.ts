/**
 * CPU time per process, from /proc/<pid>/stat (utime + stime, in clock ticks), for the rows that
 * divide a run's CPU by the requests it completed. A process is counted with its live
 * descendants (a role that re-executes itself, or forks, is still one role). Where /proc is
 * missing (not Linux, or Redis on another host) the figures are NaN, and the rows say n/a.
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { RedisClient } from '../../infra/redis/client.ts';

export interface ProcStat {
  pid: number;
  ppid: number;
  /** utime + stime, in clock ticks. */
  ticks: number;
}

/**
 * One /proc/<pid>/stat line. The command name (field 2) is in parentheses and may hold spaces
 * and parentheses itself, so fields are counted from the last ')': state is field 3, ppid 4,
 * utime 14, stime 15.
 */
export function parseProcStat(line: string): ProcStat {
  const close = line.lastIndexOf(')');
  if (close < 0) throw new Error(`not a /proc/<pid>/stat line: ${line.slice(0, 80)}`);
  const pid = Number(line.slice(0, line.indexOf('(')).trim());
  const fields = line.slice(close + 2).split(' ');
  const field = (n: number) => Number(fields[n - 3]);
  return { pid, ppid: field(4), ticks: field(14) + field(15) };
}

let ticksPerS: number | undefined;

/** `getconf CLK_TCK`, or 100 (Linux's USER_HZ nearly everywhere) when it cannot be asked. */
export function clockTicksPerS(): number {
  if (ticksPerS === undefined) {
    try {
      ticksPerS = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerS = 100;
    }
  }
  return ticksPerS;
}

function readStats(): ProcStat[] {
  const stats: ProcStat[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      stats.push(parseProcStat(readFileSync(`/proc/${name}/stat`, 'utf8')));
    } catch {
      // Exited between the listing and the read.
    }
  }
  return stats;
}

/** Ticks of `root` and its live descendants, in `stats`; NaN when root is not among them. */
export function treeTicks(stats: readonly ProcStat[], root: number): number {
  if (!stats.some((s) => s.pid === root)) return NaN;
  const children = new Map<number, ProcStat[]>();
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s]);
  let ticks = 0;
  const todo = [root];
  for (let pid = todo.pop(); pid !== undefined; pid = todo.pop()) {
    ticks += stats.find((s) => s.pid === pid)?.ticks ?? 0;
    for (const child of children.get(pid) ?? []) todo.push(child.pid);
  }
  return ticks;
}

/** CPU ms of each named process tree so far (NaN for one that cannot be read). */
export function cpuMsOf(pids: Readonly<Record<string, number | undefined>>): Record<string, number> {
  let stats: ProcStat[] = [];
  try {
    stats = readStats();
  } catch {
    // No /proc here.
  }
  const perTick = 1000 / clockTicksPerS();
  return Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid === undefined ? NaN : treeTicks(stats, pid) * perTick]));
}

/** A CPU meter over named processes: `stop()` gives the ms each spent since `startCpuMeter`. */
export function startCpuMeter(pids: Readonly<Record<string, number | undefined>>): { stop(): Record<string, number> } {
  const before = cpuMsOf(pids);
  return {
    stop() {
      const after = cpuMsOf(pids);
      return Object.fromEntries(Object.keys(pids).map((name) => [name, (after[name] ?? NaN) - (before[name] ?? NaN)]));
    },
  };
}

/** The redis-server's pid (INFO server's process_id); undefined for a cluster or a server this host does not run. */
export async function redisServerPid(redis: Pick<RedisClient, 'info'>): Promise<number | undefined> {
  const info = await redis.info('server');
  const pid = Number(/^process_id:(\d+)/m.exec(info)?.[1]);
  if (!Number.isInteger(pid)) return undefined;
  try {
    // A server on another host may share its pid with some process of this one.
    return readFileSync(`/proc/${pid}/comm`, 'utf8').startsWith('redis-server') ? pid : undefined;
  } catch {
    return undefined;
  }
}
