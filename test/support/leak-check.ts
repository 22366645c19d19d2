/**
 * Finds what a test file started and left running (STYLE.md rule 11: a test that leaks a
 * connection or a worker fails, as in graphile-worker): ioredis clients and Cluster clients not
 * ended, BullMQ Workers / Queues / QueueEvents not closed, sockets to the test Redis that no
 * tracked client owns, and child processes of this process still alive.
 *
 * How it sees them without touching production code:
 *  - ioredis: `connect()` on the Redis and Cluster prototypes is wrapped to record each client the
 *    first time it connects (a `lazyConnect` client that never connects holds nothing). A client
 *    is gone once its status is `end` (quit() or disconnect() completed).
 *  - BullMQ: every QueueBase subclass builds its backend from its constructor through the
 *    prototype method `createBackend` (Worker overrides it), so wrapping it records each instance;
 *    one is gone once `closed` is true (close() completed).
 *  - sockets: `process._getActiveHandles()`, the TCP sockets whose remote port is a test Redis
 *    port; it catches a connection made by some other client library.
 *  - child processes: /proc, the processes whose parent is this one (Linux only; elsewhere none).
 *
 * Both packages are external to vitest's module graph, so Node loads each once per test process
 * and the wrapping happens once; the registry lives on globalThis because vitest evaluates this
 * module afresh for every test file that process runs.
 *
 * Use: `takeBaseline()` before the file's own modules load (test/support/leak-check-setup.ts
 * does it from vitest's setupFiles), then `settleLeaks(baseline)` after everything the file
 * registered has run; it polls, since closes complete asynchronously.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { JobScheduler, QueueBase, Worker } from 'bullmq';
import { Cluster, Redis } from 'ioredis';

/** One thing a file left running, described so its author can find it. */
export interface Leak {
  kind: 'redis-client' | 'bullmq' | 'redis-socket' | 'child-process';
  description: string;
  /** For a child process: its pid, so the caller can stop it once reported. */
  pid?: number;
}

/** What was already running before the file: none of it is the file's leak. */
export interface LeakBaseline {
  /** Clients and BullMQ instances recorded from this sequence number on are the file's. */
  since: number;
  childPids: ReadonlySet<number>;
  sockets: ReadonlySet<unknown>;
  /** Ports of the test Redis: a socket to one of them is a Redis connection. */
  redisPorts: ReadonlySet<number>;
}

interface Tracked<T> {
  target: T;
  seq: number;
  /** Where it was created: the first frames outside node_modules, to point at the test line. */
  origin: string;
}

interface Registry {
  seq: number;
  clients: Tracked<Redis | Cluster>[];
  bullmq: Tracked<QueueBase>[];
  seen: WeakSet<object>;
}

const OWN_FILES = ['./leak-check.ts', './leak-check-setup.ts'].map((file) => fileURLToPath(new URL(file, import.meta.url)));
const REGISTRY_KEY = Symbol.for('warmpool.test.leak-check');
// Captured at load, before any test can install fake timers: the grace poll must really wait.
const realSetTimeout = globalThis.setTimeout;

function registry(): Registry {
  const holder = globalThis as { [REGISTRY_KEY]?: Registry };
  if (holder[REGISTRY_KEY] === undefined) {
    holder[REGISTRY_KEY] = { seq: 0, clients: [], bullmq: [], seen: new WeakSet() };
    wrapPrototypes(holder[REGISTRY_KEY]);
  }
  return holder[REGISTRY_KEY];
}

function wrapPrototypes(reg: Registry): void {
  const record = (list: Tracked<object>[], target: object) => {
    if (reg.seen.has(target)) return; // a reconnect calls connect() again
    reg.seen.add(target);
    list.push({ target, seq: reg.seq++, origin: callerFrames() });
  };
  wrap(Redis.prototype, 'connect', (client) => record(reg.clients, client));
  wrap(Cluster.prototype, 'connect', (client) => record(reg.clients, client));
  wrap(QueueBase.prototype, 'createBackend', (instance) => record(reg.bullmq, instance));
  wrap(Worker.prototype, 'createBackend', (instance) => record(reg.bullmq, instance));
}

/** Calls `onCall(this)` before each call of `proto[method]`. */
function wrap(proto: object, method: string, onCall: (self: object) => void): void {
  // `createBackend` is protected in BullMQ's types: the prototype is reached as a plain record.
  const target = proto as Record<string, unknown>;
  const original = target[method];
  if (typeof original !== 'function') throw new Error(`leak-check: ${method} is not a method here; has the library changed?`);
  target[method] = function (this: object, ...args: unknown[]) {
    onCall(this);
    return original.apply(this, args);
  };
}

function callerFrames(): string {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 40; // BullMQ creates its connections several calls below the test
  const stack = new Error().stack ?? '';
  Error.stackTraceLimit = limit;
  const frames = stack
    .split('\n')
    .slice(1)
    .map((line) => line.trim().replace(/^at /, ''));
  // Frames of the project's own files only: not the leak check's, a dependency's, Node's or `<anonymous>`.
  const ours = frames.filter((f) => f.includes('/') && !OWN_FILES.some((own) => f.includes(own)) && !/\/node_modules\/|node:/.test(f));
  const via = frames.some((f) => f.includes('/node_modules/bullmq/')) ? ' (through bullmq)' : '';
  return `${ours.slice(0, 3).join(' < ') || 'unknown'}${via}`;
}

/**
 * Records what is running now: call it before the file's modules load, since many files create
 * their Redis client at import time. Several baselines may be live at once (the leak-check test
 * takes its own inside a file the setup file watches).
 */
export function takeBaseline(redisPorts: Iterable<number> = []): LeakBaseline {
  const reg = registry();
  // What has ended matters to no baseline; what leaked stays, so its socket is not reported twice.
  reg.clients = reg.clients.filter(({ target }) => !isEnded(target));
  reg.bullmq = reg.bullmq.filter(({ target }) => !isClosed(target));
  return {
    since: reg.seq,
    childPids: new Set(childProcesses().keys()),
    sockets: new Set(activeSockets()),
    redisPorts: new Set(redisPorts),
  };
}

/**
 * A client is gone once its status is `end`, or once its owner called disconnect() and it holds
 * neither a socket nor a reconnect timer: disconnect() while `reconnecting` cancels the retry
 * timer but leaves the status at `reconnecting` for good (the same ioredis quirk BullMQ works
 * around in resetBlockedConnection); a Cluster without a node left stays `disconnecting`.
 */
function isEnded(client: Redis | Cluster): boolean {
  if (client.status === 'end') return true;
  // Private fields of ioredis, read only here.
  const state = client as unknown as { manuallyClosing?: boolean; reconnectTimeout?: unknown; stream?: Socket };
  const socketOpen = state.stream !== undefined && !state.stream.destroyed;
  return state.manuallyClosing === true && !state.reconnectTimeout && !socketOpen;
}

function isClosed(instance: QueueBase): boolean {
  // `closed` is protected in BullMQ's types; it turns true once close() has completed.
  return (instance as unknown as { closed: boolean }).closed;
}

/** What is still running now that was not in the baseline. */
export function findLeaks(baseline: LeakBaseline): Leak[] {
  const reg = registry();
  const leaks: Leak[] = [];
  for (const { target, seq, origin } of reg.bullmq) {
    // A Queue builds its JobScheduler on the Queue's own backend and never closes it: the
    // Queue's close() ends what it holds.
    if (seq < baseline.since || isClosed(target) || target instanceof JobScheduler) continue;
    const prefix = (target.opts as { prefix?: string }).prefix ?? 'bull';
    leaks.push({
      kind: 'bullmq',
      description: `bullmq ${target.constructor.name} "${target.name}" (prefix ${prefix}) not closed; created at ${origin}`,
    });
  }
  for (const { target, seq, origin } of reg.clients) {
    if (seq < baseline.since || isEnded(target)) continue;
    leaks.push({
      kind: 'redis-client',
      description: `${describeClient(target)} status ${target.status}, not quit/disconnected; created at ${origin}`,
    });
  }
  // ioredis keeps its socket in `stream`; a socket no tracked client owns came from elsewhere.
  const owned = new Set(reg.clients.map(({ target }) => (target as { stream?: unknown }).stream));
  for (const socket of activeSockets()) {
    if (baseline.sockets.has(socket) || owned.has(socket) || !baseline.redisPorts.has(socket.remotePort ?? -1)) continue;
    leaks.push({
      kind: 'redis-socket',
      description: `socket to Redis port ${socket.remotePort} (local port ${socket.localPort}) left open`,
    });
  }
  for (const [pid, command] of childProcesses()) {
    if (baseline.childPids.has(pid)) continue;
    leaks.push({ kind: 'child-process', description: `child process ${pid} still running: ${command}`, pid });
  }
  return leaks;
}

function describeClient(client: Redis | Cluster): string {
  if (client instanceof Cluster) return 'ioredis Cluster client';
  const { host, port, path, connectionName } = client.options;
  const where = path ?? `${host}:${port}`;
  return `ioredis client to ${where}${connectionName ? ` named ${connectionName}` : ''}`;
}

/**
 * findLeaks, polled until nothing is left or `graceMs` has passed: quit(), close() and a killed
 * child's exit all complete a little after the test's own await. The count of polls bounds the
 * wait rather than a clock, which a test may have faked.
 */
export async function settleLeaks(baseline: LeakBaseline, { graceMs = 5000, intervalMs = 50 } = {}): Promise<Leak[]> {
  let leaks = findLeaks(baseline);
  for (let polls = Math.ceil(graceMs / intervalMs); leaks.length > 0 && polls > 0; polls--) {
    await new Promise((resolve) => realSetTimeout(resolve, intervalMs));
    leaks = findLeaks(baseline);
  }
  return leaks;
}

/** One message naming every leak, grouped by kind. */
export function formatLeaks(leaks: readonly Leak[]): string {
  const counts = new Map<Leak['kind'], number>();
  for (const leak of leaks) counts.set(leak.kind, (counts.get(leak.kind) ?? 0) + 1);
  const summary = [...counts].map(([kind, n]) => `${n} ${kind}`).join(', ');
  return `this test file left running what it started (${summary}): close it in an afterAll/afterEach\n${leaks.map((l) => `  - ${l.description}`).join('\n')}`;
}

function activeSockets(): Socket[] {
  // Undocumented but stable since Node 0.x; the documented getActiveResourcesInfo() names types only.
  const handles = (process as unknown as { _getActiveHandles(): unknown[] })._getActiveHandles();
  return handles.filter((h): h is Socket => h instanceof Socket);
}

/** This process's living children (pid → command line), from /proc; empty where there is no /proc. */
export function childProcesses(): Map<number, string> {
  const children = new Map<number, string>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return children;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // "pid (comm) state ppid …": comm may hold spaces and parentheses, so parse after the last ')'.
      const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      // A zombie has exited; Node reaps it on its own.
      if (Number(ppid) !== process.pid || state === 'Z') continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean).join(' ');
      children.set(Number(entry), command);
    } catch {
      // The process exited between readdir and read: not running, so not a leak.
    }
  }
  return children;
}
