/**
 * The local pool: worker processes forked on this machine, one set per deployment. Until the
 * scaler decides counts (the "Warm pool and scaler" issue), it keeps max(min, 1) workers per
 * deployment. It reconciles on a tick: starts what is missing, restarts what crashed (with
 * back-off), and rolls a deployment to a new version by starting the new workers before
 * draining the old ones (SIGTERM; SIGKILL only after the drain timeout).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Clock } from '../clock.ts';
import type { Deployment, DeploymentStore } from '../deployments.ts';
import type { Logger } from '../log.ts';

export interface LocalPoolOptions {
  /** argv that starts a worker, e.g. [process.execPath, 'bin/warmpool.mjs', 'worker']. */
  command: string[];
  env: NodeJS.ProcessEnv;
  deployments: Pick<DeploymentStore, 'list'>;
  clock: Clock;
  log: Logger;
  tickMs?: number;
  drainTimeoutMs?: number;
  /** Where a worker's stdout/stderr go; default: inherited. */
  stdio?: 'inherit' | 'ignore';
  /** Jobs still queued for a version; an old version's workers retire only at 0. */
  queueDepth?: (model: string, version: string) => Promise<number>;
}

interface Child {
  model: string;
  version: string;
  process: ChildProcess;
  startedAt: number;
  exited: Promise<number | null>;
}

export interface LocalPool {
  start(): void;
  /** Children by model, for status output. */
  snapshot(): Array<{ model: string; version: string; pid: number | undefined }>;
  /** Reconcile now (tests and `deploy` call this instead of waiting for the tick). */
  reconcile(): Promise<void>;
  close(): Promise<void>;
}

export function createLocalPool(options: LocalPoolOptions): LocalPool {
  const { clock, log } = options;
  const tickMs = options.tickMs ?? 1000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 30_000;
  const children = new Set<Child>();
  const crashes = new Map<string, { count: number; notBefore: number }>();
  const stop = new AbortController();
  let loop: Promise<void> | undefined;
  let closing: Promise<void> | undefined;

  const launch = (d: Deployment): void => {
    const [cmd, ...args] = options.command;
    const proc = spawn(cmd as string, [...args, '--model', d.model, '--version', d.version], {
      env: options.env,
      stdio: ['ignore', options.stdio ?? 'inherit', options.stdio ?? 'inherit'],
    });
    const child: Child = {
      model: d.model,
      version: d.version,
      process: proc,
      startedAt: clock.now(),
      exited: new Promise((resolve) => proc.once('exit', (code) => resolve(code))),
    };
    children.add(child);
    log.info({ model: d.model, version: d.version, pid: proc.pid }, 'worker launched');
    void child.exited.then((code) => {
      children.delete(child);
      if (stop.signal.aborted || code === 0) return;
      const key = `${d.model}@${d.version}`;
      const prev = crashes.get(key)?.count ?? 0;
      // Exponential back-off so a model that cannot load does not fork-bomb the machine.
      crashes.set(key, { count: prev + 1, notBefore: clock.now() + Math.min(60_000, 500 * 2 ** prev) });
      log.warn({ model: d.model, version: d.version, code }, 'worker exited; will restart');
    });
  };

  const retire = async (child: Child): Promise<void> => {
    child.process.kill('SIGTERM');
    const timer = setTimeout(() => child.process.kill('SIGKILL'), drainTimeoutMs);
    await child.exited;
    clearTimeout(timer);
  };

  const reconcile = async (): Promise<void> => {
    if (stop.signal.aborted) return;
    const deployments = await options.deployments.list();
    const retiring: Child[] = [];
    for (const d of deployments) {
      const want = Math.max(1, d.min);
      const current = [...children].filter((c) => c.model === d.model && c.version === d.version);
      const backoff = crashes.get(`${d.model}@${d.version}`);
      if (!backoff || backoff.notBefore <= clock.now()) {
        for (let i = current.length; i < want; i++) launch(d);
      }
      for (const extra of current.slice(want)) retiring.push(extra);
      // An old version's workers go only once the new version has its workers and the old
      // version's queue is empty: jobs accepted for it are still served by it.
      if (current.length >= want) {
        for (const c of children) {
          if (c.model !== d.model || c.version === d.version) continue;
          const depth = (await options.queueDepth?.(c.model, c.version)) ?? 0;
          if (depth === 0) retiring.push(c);
        }
      }
    }
    for (const c of children) if (!deployments.some((d) => d.model === c.model)) retiring.push(c);
    await Promise.all(
      retiring.map((c) => {
        children.delete(c);
        return retire(c);
      }),
    );
  };

  return {
    start() {
      loop ??= (async () => {
        while (!stop.signal.aborted) {
          await reconcile().catch((err: unknown) => log.warn({ err }, 'pool reconcile failed'));
          await clock.sleep(tickMs, stop.signal).catch(() => undefined);
        }
      })();
    },
    snapshot: () => [...children].map((c) => ({ model: c.model, version: c.version, pid: c.process.pid })),
    reconcile,
    close() {
      closing ??= (async () => {
        stop.abort();
        await loop;
        await Promise.all([...children].map((c) => retire(c)));
        children.clear();
      })();
      return closing;
    },
  };
}
