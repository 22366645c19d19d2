/**
 * What hostile-tenant watches while a phase runs, sampled from outside the API's code: the API's
 * open file descriptors (/proc/self/fd: the API and the dispatcher run in the scenario's
 * process), its RSS, each worker's RSS and peak RSS (/proc/<pid>/status VmRSS, VmHWM: a Parquet
 * bomb inflated would show there), and Redis' used_memory (INFO, summed over a cluster's
 * masters). Each figure keeps its peak per phase, so the attack phase can be held to the phase
 * without the attacker. At each new descriptor peak it also says what the descriptors were
 * (`fdKinds`): sockets by the named port they serve or reach (/proc/self/net/tcp{,6}), the rest
 * as files and pipes, so a bound that fails names its holder.
 */
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { closeRedis, createRedis, masterNodes } from '../../infra/redis/client.ts';

const MiB = 1024 * 1024;
const SAMPLE_MS = 250;
/** Redis' INFO is a round trip: once a second is enough for a figure that moves with stored bytes. */
const REDIS_EVERY = 4;

export interface PhasePeaks {
  apiFds: number;
  /** What the descriptors were at the `apiFds` peak: `<name> served` / `<name> client` sockets, other sockets, files and pipes. */
  fdKinds: Record<string, number>;
  apiRssMb: number;
  redisMb: number;
  /** Worker (by pid) → its highest VmRSS sampled in the phase, MB. */
  workerRssMb: Record<number, number>;
  /** CPU seconds each part used over the phase (/proc/<pid>/stat utime + stime): `scenario` (the API, dispatcher, S3 server, load), `redis`, `workers`, `others` (the attacker). */
  cpuS: Record<string, number>;
  /** Wall seconds the phase was sampled over. */
  wallS: number;
}

export interface Gauges {
  /** From now on, samples count for `phase`. */
  phase(name: string): void;
  /** Worker pid → VmHWM (its peak RSS since it started), MB, now. */
  workerPeaks(): Record<number, number>;
  peaks(): Record<string, PhasePeaks>;
  stop(): Promise<void>;
}

export interface GaugeOptions {
  /** The named ports (api, s3, redis, receivers…) a socket is classed by, read at each breakdown. */
  ports: () => Record<string, number>;
  /** Files this process holds that are not the API's (the in-process S3 server's objects): left out of `apiFds`. */
  notApi: (file: string) => boolean;
  /** Other processes whose CPU is counted, by part (the attacker). */
  others?: () => number[];
}

export function startGauges(redisUrl: string, workers: () => number[], options: GaugeOptions): Gauges {
  const redis = createRedis(redisUrl);
  const byPhase: Record<string, PhasePeaks> = {};
  let current: PhasePeaks | undefined;
  let tick = 0;
  let busy = false;
  let lastKinds = 0;
  let redisPid: number | undefined;
  // CPU ticks each pid had at the last sample: the phase is charged what it used since.
  const lastTicks = new Map<number, number>();
  let lastAt = performance.now();
  const chargeCpu = (p: PhasePeaks) => {
    const now = performance.now();
    p.wallS += (now - lastAt) / 1000;
    lastAt = now;
    const parts: Array<[string, number[]]> = [
      ['scenario', [process.pid]],
      ['redis', redisPid === undefined ? [] : [redisPid]],
      ['workers', workers()],
      ['others', options.others?.() ?? []],
    ];
    for (const [part, pids] of parts) {
      for (const pid of pids) {
        const ticks = cpuTicks(pid);
        if (ticks === undefined) continue;
        const before = lastTicks.get(pid);
        lastTicks.set(pid, ticks);
        if (before !== undefined) p.cpuS[part] = (p.cpuS[part] ?? 0) + (ticks - before) / CLOCK_TICKS;
      }
    }
  };
  const sample = async () => {
    if (!current || busy) return;
    busy = true;
    const p = current;
    try {
      chargeCpu(p);
      redisPid ??= Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1]) || undefined;
      // The S3 server of the stack runs in this process too: its own object files are not the API's.
      const fds = apiDescriptors(options.notApi);
      if (fds.length > p.apiFds) {
        p.apiFds = fds.length;
        // Only at a peak well above the last classed one: the breakdown reads the TCP tables.
        if (fds.length > lastKinds * 1.05) {
          p.fdKinds = fdKinds(fds, options.ports());
          lastKinds = fds.length;
        }
      }
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
      if (current) chargeCpu(current);
      byPhase[name] ??= { apiFds: 0, fdKinds: {}, apiRssMb: 0, redisMb: 0, workerRssMb: {}, cpuS: {}, wallS: 0 };
      current = byPhase[name];
      lastKinds = 0;
      void sample();
    },
    workerPeaks: () => Object.fromEntries(workers().flatMap((pid) => [[pid, procStatus(pid)?.peak ?? 0]])),
    peaks: () => byPhase,
    async stop() {
      clearInterval(timer);
      if (current) chargeCpu(current);
      current = undefined;
      await closeRedis(redis);
    },
  };
}

/** This process's descriptors and what each links to, less those `notApi` names. */
export function apiDescriptors(notApi: (file: string) => boolean): Array<{ fd: string; link: string }> {
  const held: Array<{ fd: string; link: string }> = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const link = readlinkSync(`/proc/self/fd/${fd}`);
      if (!notApi(link)) held.push({ fd, link });
    } catch {
      // closed since the listing
    }
  }
  return held;
}

/** Descriptors by kind: TCP sockets by the named port they listen on or reach, then the rest. */
export function fdKinds(fds: Array<{ link: string }>, ports: Record<string, number>): Record<string, number> {
  const byPort = new Map(Object.entries(ports).map(([name, port]) => [port, name]));
  const sockets = tcpSockets();
  const kinds: Record<string, number> = {};
  const add = (kind: string) => (kinds[kind] = (kinds[kind] ?? 0) + 1);
  for (const { link } of fds) {
    const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
    if (inode === undefined) {
      // Files by their folder's last two names (`s3/chaos-bucket`, `node_modules/…`): who opened them.
      add(link.startsWith('pipe:') || link.startsWith('anon_inode:') ? 'pipes, event fds' : `files in …/${folderOf(link)}`);
      continue;
    }
    const s = sockets.get(inode);
    if (!s) add('other sockets (unix, udp)');
    else if (byPort.has(s.local)) add(`${byPort.get(s.local)} served${s.listening ? ' (listener)' : ''}`);
    else if (byPort.has(s.remote)) add(`${byPort.get(s.remote)} client`);
    else add('other tcp');
  }
  return kinds;
}

function folderOf(file: string): string {
  return file.split('/').slice(-3, -1).join('/');
}

/** inode → local port, remote port and whether it listens, for this network namespace's TCP sockets. */
function tcpSockets(): Map<string, { local: number; remote: number; listening: boolean }> {
  const sockets = new Map<string, { local: number; remote: number; listening: boolean }>();
  for (const file of ['/proc/self/net/tcp', '/proc/self/net/tcp6']) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10) continue;
      const port = (addr: string | undefined) => Number.parseInt(addr?.split(':')[1] ?? '0', 16);
      sockets.set(f[9] as string, { local: port(f[1]), remote: port(f[2]), listening: f[3] === '0A' });
    }
  }
  return sockets;
}

/** USER_HZ: what /proc/<pid>/stat counts CPU time in (100 on Linux builds for every common architecture). */
const CLOCK_TICKS = 100;

/** utime + stime of a process, in clock ticks; undefined once it has exited. */
function cpuTicks(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the command (which may hold spaces) start past its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
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
