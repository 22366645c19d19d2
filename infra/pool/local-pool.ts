/**
 * The local pool: worker processes forked on this machine, one set per deployment version. Until
 * the scaler decides counts (the "Warm pool and scaler" issue), every version with a traffic
 * share gets its share of min, rounded up, and at least one worker (`workersFor`): 100% of
 * min 2 → 2; a 90/10 canary of min 2 → 2 and 1. It reconciles on a tick: starts what is
 * missing, restarts what crashed (with back-off), and rolls a deployment to a new version by
 * starting the new workers before draining the old ones (SIGTERM; SIGKILL only after the drain
 * timeout). A version without traffic keeps (or regains) a worker while its queue holds jobs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Clock } from '../clock.ts';
import type { Deployment } from '../deployments.ts';
import type { Logger } from '../log.ts';

/** What the pool reads of a deployment. */
export type PoolDeployment = Pick<Deployment, 'model' | 'versions' | 'min'>;

export interface LocalPoolOptions {
  /** argv that starts a worker, e.g. [process.execPath, 'bin/warmpool.mjs', 'worker']. */
  command: string[];
  env: NodeJS.ProcessEnv;
  deployments: { list(): Promise<PoolDeployment[]> };
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
  /** Asked to stop: its exit is not a crash, whatever the code (a SIGTERM can beat the worker's handler). */
  retiring: boolean;
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

  const launch = (model: string, version: string): void => {
    const [cmd, ...args] = options.command;
    const proc = spawn(cmd as string, [...args, '--model', model, '--version', version], {
      env: options.env,
      stdio: ['ignore', options.stdio ?? 'inherit', options.stdio ?? 'inherit'],
    });
    const child: Child = {
      model,
      version,
      process: proc,
      startedAt: clock.now(),
      exited: new Promise((resolve) => proc.once('exit', (code) => resolve(code))),
      retiring: false,
    };
    children.add(child);
    log.info({ model, version, pid: proc.pid }, 'worker launched');
    void child.exited.then((code) => {
      children.delete(child);
      if (stop.signal.aborted || child.retiring || code === 0) return;
      const key = `${model}@${version}`;
      const prev = crashes.get(key)?.count ?? 0;
      // Exponential back-off so a model that cannot load does not fork-bomb the machine.
      crashes.set(key, { count: prev + 1, notBefore: clock.now() + Math.min(60_000, 500 * 2 ** prev) });
      log.warn({ model, version, code }, 'worker exited; will restart');
    });
  };

  const retire = async (child: Child): Promise<void> => {
    child.retiring = true;
    child.process.kill('SIGTERM');
    const timer = setTimeout(() => child.process.kill('SIGKILL'), drainTimeoutMs);
    await child.exited;
    clearTimeout(timer);
  };

  const running = (model: string, version: string) => [...children].filter((c) => c.model === model && c.version === version);

  /** Starts what a deployment lacks; returns the workers it no longer needs. */
  const reconcileDeployment = async (d: PoolDeployment): Promise<Child[]> => {
    const wanted = new Map(d.versions.filter((v) => v.weight > 0).map((v) => [v.version, workersFor(d.min, v.weight)]));
    const served = [...wanted].every(([version, want]) => running(d.model, version).length >= want);
    // Versions without traffic (listed at weight 0, or dropped from the deployment) keep serving
    // while their queue holds jobs: those jobs were accepted for that version. Once it is empty
    // their workers go, but only after every version with traffic has its workers.
    const drained = new Set([...children].filter((c) => c.model === d.model && !wanted.has(c.version)).map((c) => c.version));
    for (const v of d.versions) if (v.weight === 0) drained.add(v.version);
    for (const version of drained) {
      const depth = (await options.queueDepth?.(d.model, version)) ?? 0;
      if (depth > 0) wanted.set(version, Math.max(1, running(d.model, version).length));
      else if (served) wanted.set(version, 0);
    }
    const retiring: Child[] = [];
    for (const [version, want] of wanted) {
      const current = running(d.model, version);
      const backoff = crashes.get(`${d.model}@${version}`);
      if (!backoff || backoff.notBefore <= clock.now()) {
        for (let i = current.length; i < want; i++) launch(d.model, version);
      }
      retiring.push(...current.slice(want));
    }
    return retiring;
  };

  const reconcile = async (): Promise<void> => {
    if (stop.signal.aborted) return;
    const deployments = await options.deployments.list();
    const retiring: Child[] = [];
    for (const d of deployments) retiring.push(...(await reconcileDeployment(d)));
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

/** Workers a version with `weight` % of the traffic gets before the scaler decides: its share of min, at least 1. */
export function workersFor(min: number, weight: number): number {
  return Math.max(1, Math.ceil((min * weight) / 100));
}
