/**
 * The system's `redis-server`, found, installed when missing and permitted, and run as a child
 * process for `warmpool dev` and the test suite. We run the real server rather than an
 * in-process imitation because BullMQ relies on Lua scripts and blocking commands that
 * imitations get subtly wrong.
 *
 * The child is never daemonized: it lives and dies with the handle returned here, and a
 * process 'exit' hook stops it if the parent ends without calling close() (SIGKILL, or SIGTERM
 * when it persists: Redis then writes its append-only file out before it exits).
 *
 * `detached` puts it in a process group of its own, so the terminal's Ctrl-C (SIGINT to the
 * whole foreground group) does not reach it: `warmpool dev` stops it itself, after everything
 * that uses it has drained, instead of watching its workers drain into a Redis already gone.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { constants as fsConstants } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import net from 'node:net';
import path from 'node:path';
import { ConfigError } from '../../infra/kernel/errors.ts';
import { freePort } from './free-port.ts';

const SYSTEM_DIRS = ['/usr/bin', '/usr/sbin', '/usr/local/bin'];
const STARTUP_TIMEOUT_MS = 15_000;
const KILL_AFTER_MS = 5_000;
const OUTPUT_TAIL_CHARS = 4_000;

export interface RedisServerHandle {
  /** `redis://host:port` */
  url: string;
  port: number;
  pid: number;
  /** Stops the server and waits for the process to exit. Safe to call twice. */
  close(): Promise<void>;
}

export interface StartRedisOptions {
  binary: string;
  /** Working directory of the server (it writes nothing there with persistence off). */
  dir: string;
  /**
   * Persistence: an append-only file in `dir`, replayed on the next start in the same `dir`
   * (the chaos suite restarts Redis on it; `warmpool dev` keeps its state across restarts in it).
   * Off by default: tests want a clean slate.
   */
  appendonly?: boolean;
  /** When the AOF is fsynced (with `appendonly`); default everysec. See docs/RELIABILITY.md. */
  appendfsync?: 'always' | 'everysec' | 'no';
  /** 0 or undefined: pick a free port. */
  port?: number;
  host?: string;
  /** More server arguments, e.g. `['--cluster-enabled', 'yes']` (scripts/dev/redis-cluster.ts). */
  extraArgs?: string[];
  /** Its own process group: a Ctrl-C in the parent's terminal does not stop it (see the header). */
  detached?: boolean;
}

export interface EnsureRedisOptions {
  /** 'auto': install with apt-get when missing and running as root. */
  install: 'auto' | 'never';
  log?: (line: string) => void;
  /** Where to look for redis-server and apt-get; default defaultSearchDirs(). */
  searchDirs?: string[];
}

/** PATH, then the system folders a root-less PATH (cron, CI) often lacks. */
export function defaultSearchDirs(): string[] {
  const pathDirs = (process.env.PATH ?? '').split(path.delimiter).filter((d) => d !== '');
  return [...pathDirs, ...SYSTEM_DIRS];
}

/** An executable named `name` in one of `dirs`, or null. */
export async function findExecutable(name: string, dirs = defaultSearchDirs()): Promise<string | null> {
  for (const dir of dirs) {
    const candidate = path.join(dir, name);
    try {
      await access(candidate, fsConstants.X_OK);
      return candidate;
    } catch {
      // not here; keep looking
    }
  }
  return null;
}

export function findRedisServer(dirs = defaultSearchDirs()): Promise<string | null> {
  return findExecutable('redis-server', dirs);
}

/** The path of `redis-server`, installing it first when missing and allowed. */
export async function ensureRedisServer(options: EnsureRedisOptions): Promise<string> {
  const dirs = options.searchDirs ?? defaultSearchDirs();
  const found = await findRedisServer(dirs);
  if (found !== null) return found;
  const aptGet = await findExecutable('apt-get', dirs);
  const isRoot = process.getuid?.() === 0;
  if (options.install !== 'auto' || !isRoot || aptGet === null) {
    const why =
      options.install !== 'auto'
        ? 'automatic install is off'
        : aptGet === null
          ? 'apt-get is not available to install it'
          : 'installing it needs root';
    throw new ConfigError('REDIS_SERVER_MISSING', missingRedisMessage(why));
  }
  const log = options.log ?? (() => {});
  log('redis-server not found: installing it with apt-get (about a minute)…');
  // Wait for the dpkg lock instead of failing when another apt run (unattended upgrades, a
  // second test run) holds it.
  const lock = ['-o', 'DPkg::Lock::Timeout=300'];
  await runQuiet(aptGet, [...lock, 'update', '-qq']);
  await runQuiet(aptGet, [...lock, 'install', '-y', '-qq', 'redis-server']);
  const installed = await findRedisServer(dirs);
  if (installed === null) {
    throw new ConfigError('REDIS_SERVER_MISSING', `apt-get installed redis-server but it is not in any of: ${dirs.join(', ')}`);
  }
  log(`redis-server installed at ${installed}`);
  return installed;
}

function missingRedisMessage(why: string): string {
  return [
    `redis-server was not found on PATH (${why}).`,
    'Install it with one of:',
    '  sudo apt-get install redis-server   (Debian/Ubuntu)',
    '  brew install redis                  (macOS)',
    'or point warmpool at an existing Redis with REDIS_URL=redis://host:6379.',
  ].join('\n');
}

/** Runs a command to completion; on failure the error carries the tail of its output. */
function runQuiet(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
    const output = collectOutput(child);
    child.once('error', (err) => reject(new ConfigError('INSTALL_FAILED', `${command} failed to start`, { cause: err })));
    child.once('exit', (code, signal) => {
      if (code === 0) return resolve();
      const status = signal ?? `exit code ${code}`;
      reject(new ConfigError('INSTALL_FAILED', `${command} ${args.join(' ')} failed (${status}):\n${output()}`));
    });
  });
}

/** Keeps the last few KiB of a child's stdout and stderr, for error messages. */
function collectOutput(child: ChildProcess): () => string {
  let tail = '';
  const append = (chunk: Buffer) => {
    tail = (tail + chunk.toString('utf8')).slice(-OUTPUT_TAIL_CHARS);
  };
  child.stdout?.on('data', append);
  child.stderr?.on('data', append);
  return () => tail.trim();
}

/** Starts a redis-server (throwaway and non-persistent unless `appendonly`) and resolves once it answers. */
export async function startRedisServer(options: StartRedisOptions): Promise<RedisServerHandle> {
  const host = options.host ?? '127.0.0.1';
  const pickPort = options.port === undefined || options.port === 0;
  await mkdir(options.dir, { recursive: true });
  // A picked port can be taken between probing and binding: try a few.
  for (let attempt = 1; ; attempt++) {
    const port = pickPort ? await freePort(host) : (options.port as number);
    try {
      return await startOn(options, host, port);
    } catch (err) {
      const inUse = err instanceof Error && /address already in use/i.test(err.message);
      if (!pickPort || !inUse || attempt >= 3) throw err;
    }
  }
}

async function startOn(options: StartRedisOptions, host: string, port: number): Promise<RedisServerHandle> {
  const args = [
    '--port',
    String(port),
    '--bind',
    host,
    '--save',
    '',
    '--appendonly',
    options.appendonly ? 'yes' : 'no',
    ...(options.appendonly ? ['--appendfsync', options.appendfsync ?? 'everysec'] : []),
    '--dir',
    options.dir,
    '--protected-mode',
    'no',
    '--daemonize',
    'no',
    ...(options.extraArgs ?? []),
  ];
  const child = spawn(options.binary, args, { stdio: ['ignore', 'pipe', 'pipe'], detached: options.detached ?? false });
  const output = collectOutput(child);
  const exited = exitPromise(child);
  const killOnParentExit = () => child.kill(options.appendonly ? 'SIGTERM' : 'SIGKILL');
  process.once('exit', killOnParentExit);
  try {
    await waitUntilReady(child.pid, host, port, exited, output);
  } catch (err) {
    process.removeListener('exit', killOnParentExit);
    // Not SHUTDOWN: whatever answers on this port may not be our child.
    child.kill('SIGKILL');
    await exited;
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    url: `redis://${host}:${port}`,
    port,
    pid: child.pid as number, // set: the server answered with this pid
    close: () => {
      closing ??= stopChild(child, exited, host, port).finally(() => {
        process.removeListener('exit', killOnParentExit);
      });
      return closing;
    },
  };
}

type ExitInfo = { code: number | null; signal: NodeJS.Signals | null; error?: Error };

function exitPromise(child: ChildProcess): Promise<ExitInfo> {
  return new Promise((resolve) => {
    child.once('error', (error) => resolve({ code: null, signal: null, error }));
    child.once('exit', (code, signal) => resolve({ code, signal }));
  });
}

/** Polls until our child answers; rejects with the server's output if it exits or never answers. */
async function waitUntilReady(
  pid: number | undefined,
  host: string,
  port: number,
  exited: Promise<ExitInfo>,
  output: () => string,
): Promise<void> {
  let done = false;
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  const died = exited.then((info) => {
    if (done) return;
    const status = info.error?.message ?? info.signal ?? `exit code ${info.code}`;
    throw new Error(`redis-server exited during start-up (${status}):\n${output()}`);
  });
  const ready = (async () => {
    while (!done) {
      // Ask for the pid, not just PING: another server already on this port would answer too.
      const reply = await redisCommand(host, port, 'INFO server').catch(() => '');
      if (reply.includes(`process_id:${pid}\r\n`)) return;
      if (Date.now() > deadline) throw new Error(`redis-server did not answer on ${host}:${port}:\n${output()}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  try {
    await Promise.race([ready, died]);
  } finally {
    done = true;
  }
}

/**
 * Sends one inline command over a fresh socket and resolves with the raw reply (a status line,
 * or a whole bulk string). A raw socket keeps start-up free of client retry logic.
 */
function redisCommand(host: string, port: number, command: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let reply = '';
    socket.setTimeout(2_000, () => socket.destroy(new Error('redis command timed out')));
    socket.once('connect', () => socket.write(`${command}\r\n`));
    socket.on('data', (chunk) => {
      reply += chunk.toString('utf8');
      if (isCompleteReply(reply)) socket.end();
    });
    socket.once('error', reject);
    socket.once('close', () => resolve(reply));
  });
}

function isCompleteReply(reply: string): boolean {
  const lineEnd = reply.indexOf('\r\n');
  if (lineEnd < 0) return false;
  if (!reply.startsWith('$')) return true;
  const length = Number(reply.slice(1, lineEnd));
  return length < 0 || Buffer.byteLength(reply) >= lineEnd + 2 + length + 2;
}

/** SHUTDOWN NOSAVE, else SIGTERM; SIGKILL if it is still alive after KILL_AFTER_MS. */
async function stopChild(child: ChildProcess, exited: Promise<ExitInfo>, host: string, port: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  await redisCommand(host, port, 'SHUTDOWN NOSAVE').catch(() => child.kill('SIGTERM'));
  const timer = setTimeout(() => child.kill('SIGKILL'), KILL_AFTER_MS);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}
