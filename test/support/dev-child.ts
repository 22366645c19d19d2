/**
 * A real `warmpool dev` as a user runs it, for the dev stack's tests (test/dev-*.test.ts): a
 * child process of bin/warmpool.mjs in a folder of its own, starting its own redis-server and
 * S3 server there (no REDIS_URL, no S3_ENDPOINT), on ports of its own. It is spawned in a process
 * group of its own (detached), as a shell runs a foreground job, so a test can send the whole
 * group a terminal's Ctrl-C, and find by group what is left of it afterwards.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isRunning } from '../../scripts/dev/dev-lock.ts';
import { freePort } from '../../scripts/dev/free-port.ts';
import { testServices } from './services.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

/** The variables that would point a dev stack at services other than its own. */
const NOT_INHERITED = [
  'REDIS_URL',
  'S3_ENDPOINT',
  'S3_BUCKET',
  'S3_PREFIX',
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'QUEUE_PREFIX',
  'API_KEYS',
  'ADMIN_TENANTS',
  'BULK_LOCATIONS',
  'MODEL_CACHE_DIR',
  'PORT',
  'GRPC_PORT',
  'METRICS_PORT',
];

export interface DevChild {
  /** Its pid, which is also its process group's id. */
  pid: number;
  /** Everything it (and its workers, which share its stdout and stderr) printed so far. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Resolves with the first match of `pattern` in the output; rejects if it exits first or after `timeoutMs`. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  process: ChildProcess;
}

/** A folder for a dev stack, removed with the test run's temporary folder. */
export function devFolder(label: string): string {
  return mkdtempSync(path.join(testServices().tmpDir, `${label}-`));
}

/** The environment of a user's shell: nothing pointing elsewhere, a free API port, quick worker warm-up. */
export async function devEnv(overrides: Record<string, string> = {}): Promise<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of NOT_INHERITED) delete env[name];
  return { ...env, PORT: String(await freePort()), LOG_LEVEL: 'warn', WARMUP_ITERATIONS: '1', ...overrides };
}

export function spawnDev(cwd: string, env: NodeJS.ProcessEnv, args: string[] = []): DevChild {
  const child = spawn(process.execPath, [BIN, 'dev', ...args], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const listeners = new Set<() => void>();
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
    for (const listener of listeners) listener();
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  const waitFor = (pattern: RegExp, timeoutMs = 120_000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(output);
        if (match) done(() => resolve(match));
      };
      const done = (then: () => void) => {
        clearTimeout(timer);
        listeners.delete(check);
        then();
      };
      const timer = setTimeout(() => done(() => reject(new Error(`no ${pattern} in ${timeoutMs} ms:\n${output}`))), timeoutMs);
      listeners.add(check);
      void exited.then(({ code }) => done(() => reject(new Error(`warmpool dev exited (${code}) before ${pattern}:\n${output}`))));
      check();
    });
  return { pid: child.pid as number, output: () => output, exited, waitFor, process: child };
}

/** `.warmpool/dev.lock` as the running stack wrote it. */
export function readLock(cwd: string): { pid: number; url?: string; redis?: { pid: number; url: string } } {
  return JSON.parse(readFileSync(path.join(cwd, '.warmpool', 'dev.lock'), 'utf8'));
}

/** The processes of group `pgid` still running (zombies, already dead, are not), with their command lines. */
export function processesInGroup(pgid: number): Array<{ pid: number; command: string }> {
  const found: Array<{ pid: number; command: string }> = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses: read after the last ')'.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(pgrp) !== pgid || state === 'Z') continue;
      found.push({ pid: Number(entry), command: readFileSync(`/proc/${entry}/cmdline`, 'utf8').replaceAll('\0', ' ').trim() });
    } catch {
      // gone while we looked
    }
  }
  return found;
}

/** What of a stopped dev stack is still running: its group's processes, and its redis-server (a group of its own). */
export function leftovers(dev: DevChild, redisPid: number | undefined): string[] {
  const group = processesInGroup(dev.pid).map((p) => `${p.pid} ${p.command}`);
  const redis = redisPid !== undefined && isRunning(redisPid, /redis-server/) ? [`${redisPid} redis-server`] : [];
  return [...group, ...redis];
}

/** Stops what a failed test left: SIGKILL to the group and to its Redis. */
export function killDev(dev: DevChild | undefined, redisPid?: number): void {
  for (const target of [dev ? -dev.pid : undefined, redisPid]) {
    if (target === undefined) continue;
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
