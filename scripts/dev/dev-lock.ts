/**
 * One `warmpool dev` per folder. `.warmpool/dev.lock` names the stack that runs here: its pid
 * from its first moment (before it takes a port or writes dev.env), then, once it is up, its URL
 * and dashboard, and from the start of its redis-server that server's pid and URL. A second
 * `warmpool dev` that finds the lock's process alive refuses, naming it; a lock whose process is
 * gone (the stack was killed or crashed) is stale and is taken over (see leftovers.ts for what a
 * dead stack may have left running).
 *
 * The file is created whole and atomically (written aside, then hard-linked into place, which
 * fails when the name exists), so of two stacks started at once exactly one holds it.
 * Liveness is kill(pid, 0) and, where /proc exists, a command line that still names the program
 * (pids are reused). The holder removes the file when it stops, and on process exit.
 */
import { linkSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

export const DEV_LOCK_FILE = 'dev.lock';

export interface DevLockInfo {
  pid: number;
  startedAt: string;
  /** Set once the stack is up. */
  url?: string;
  dashboardUrl?: string;
  /** The stack's own redis-server (not set when REDIS_URL pointed elsewhere). */
  redis?: { pid: number; url: string };
  queuePrefix?: string;
}

export interface DevLock {
  readonly info: DevLockInfo;
  /** Adds what the stack learned (its URLs, its Redis) to the file. */
  update(more: Partial<Omit<DevLockInfo, 'pid' | 'startedAt'>>): void;
  /** Removes the file if it is still ours; safe to call twice. */
  release(): void;
}

export type AcquireResult = { lock: DevLock; stale?: DevLockInfo } | { running: DevLockInfo };

/** Takes `<dir>/dev.lock` for this process, or says which live stack holds it. */
export function acquireDevLock(dir: string): AcquireResult {
  const file = path.join(dir, DEV_LOCK_FILE);
  const info: DevLockInfo = { pid: process.pid, startedAt: new Date().toISOString() };
  let stale: DevLockInfo | undefined;
  // Twice at most: a stale lock is removed once, then created; losing that race is a refusal.
  for (let attempt = 0; attempt < 2; attempt++) {
    if (tryCreate(file, info)) return { lock: holder(file, info), ...(stale ? { stale } : {}) };
    const current = readLock(file);
    if (current && current.pid !== process.pid && isRunning(current.pid, /warmpool/)) return { running: current };
    stale = current ?? stale;
    removeIfUnchanged(file, current);
  }
  const winner = readLock(file);
  if (winner) return { running: winner };
  throw new Error(`could not take ${file}: it keeps changing (another warmpool dev is starting here)`);
}

/** The stack running in `dir`, if its lock names a live process. */
export function readRunningDev(dir: string): DevLockInfo | undefined {
  const current = readLock(path.join(dir, DEV_LOCK_FILE));
  return current && isRunning(current.pid, /warmpool/) ? current : undefined;
}

/**
 * Whether `pid` is a live process whose command line matches `name` (where /proc says; a zombie
 * has an empty one). EPERM means it lives under another user.
 */
export function isRunning(pid: number, name: RegExp): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const cmdline = commandLine(pid);
  return cmdline === undefined || name.test(cmdline);
}

function commandLine(pid: number): string | undefined {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return undefined; // no /proc (macOS), or the process is gone
  }
}

/** Creates the lock whole: written to a temporary file, then linked (link fails if the name exists). */
function tryCreate(file: string, info: DevLockInfo): boolean {
  const temp = `${file}.${process.pid}.tmp`;
  writeFileSync(temp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
  try {
    linkSync(temp, file);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  } finally {
    rmSync(temp, { force: true });
  }
}

/** The lock's content; undefined when missing or not a lock. */
function readLock(file: string): DevLockInfo | undefined {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<DevLockInfo>;
    return typeof parsed.pid === 'number' ? (parsed as DevLockInfo) : undefined;
  } catch {
    return undefined;
  }
}

/** Removes a stale lock unless it changed since it was read (another stack took it over meanwhile). */
function removeIfUnchanged(file: string, seen: DevLockInfo | undefined): void {
  const now = readLock(file);
  if (now?.pid !== seen?.pid || now?.startedAt !== seen?.startedAt) return;
  rmSync(file, { force: true });
}

function holder(file: string, info: DevLockInfo): DevLock {
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.removeListener('exit', release);
    if (readLock(file)?.pid === info.pid) rmSync(file, { force: true });
  };
  process.once('exit', release);
  return {
    info,
    update(more) {
      if (released) return;
      Object.assign(info, more);
      // Whole or not at all: a reader never sees half a file.
      const temp = `${file}.${process.pid}.tmp`;
      writeFileSync(temp, `${JSON.stringify(info)}\n`, { mode: 0o600 });
      renameSync(temp, file);
    },
    release,
  };
}
