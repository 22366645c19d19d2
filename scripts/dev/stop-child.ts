/**
 * Stopping a child process the way a supervisor would: a polite signal first (a warmpool process
 * drains on SIGTERM), SIGKILL if it has not exited after a grace period. Resolves once it has
 * exited; a child that already exited resolves at once.
 */
import type { ChildProcess } from 'node:child_process';

export interface StopChildOptions {
  /** The first signal; default SIGTERM. */
  signal?: NodeJS.Signals;
  /** How long to wait for it before SIGKILL; default 15 s. */
  graceMs?: number;
}

export function stopChild(child: ChildProcess, options: StopChildOptions = {}): Promise<void> {
  const { signal = 'SIGTERM', graceMs = 15_000 } = options;
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const force = setTimeout(() => child.kill('SIGKILL'), graceMs);
    force.unref();
    child.once('exit', () => {
      clearTimeout(force);
      resolve();
    });
    child.kill(signal);
  });
}
