/**
 * Replays with a CPU-time budget, for a process that must keep answering while one runs (the
 * API's dashboard): compare() runs on a sweep thread (sweep-thread.ts), never on the caller's
 * event loop, and the thread is terminated once it has used `cpuBudgetMs` of CPU time, or at
 * once when `signal` aborts (the client went away).
 *
 * CPU time, not wall time: on a loaded host a thread waits for a core, and a wall-clock limit
 * would fail replays that did little work. It is the thread's own, read from
 * /proc/self/task/<tid>/stat (Linux), the tid named by the thread when it is ready; loading the
 * thread's code is not counted. Where the OS does not say (no /proc), wall time since the thread
 * was ready stands in: a single thread never uses more CPU time than the time that passed.
 */
import { readFileSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { AT_SLO_BASELINES, type AtSloReport } from './at-slo.ts';
import type { PolicyName, PolicyReport, SimulationSettings } from './compare.ts';
import { type PolicySummary, runTask, SWEEP_THREAD, type SweepTask, type ThreadReady } from './sweep.ts';
import type { Trace } from './trace.ts';

/** The replay used its whole CPU-time budget and was stopped. */
export class ReplayBudgetError extends Error {}

export interface BoundedReplayOptions {
  cpuBudgetMs: number;
  /** Aborting it stops the replay (the promise rejects with the signal's reason). */
  signal?: AbortSignal;
  /** How often the thread's CPU time is read; default 50 ms. */
  pollMs?: number;
}

export interface ReplayTask {
  settings: SimulationSettings;
  only: PolicyName[];
}

/** Runs the tasks one after the other on one thread; each task's reports, series included. */
export function replayBounded(trace: Trace, tasks: readonly ReplayTask[], o: BoundedReplayOptions): Promise<PolicyReport[][]> {
  return onBoundedThread(trace, o, async (run) => {
    const reports: PolicyReport[][] = [];
    for (const [id, task] of tasks.entries()) {
      const reply = await run({ id, ...task, series: true });
      reports.push(reply.policies.map((p, i) => ({ ...p, series: reply.series?.[i] as PolicyReport['series'] })));
    }
    return reports;
  });
}

/**
 * The baselines as-is and searched at the SLO target (at-slo.ts), on one thread under the same
 * kind of budget: up to MAX_RUNS replays per baseline, so a caller gives it a budget of its own.
 */
export function searchAtSloBounded(
  trace: Trace,
  settings: SimulationSettings,
  target: number,
  o: BoundedReplayOptions,
): Promise<{ asIs: PolicySummary[]; atSlo: AtSloReport }> {
  return onBoundedThread(trace, o, async (run) => {
    const reply = await run({ id: 0, settings, only: [...AT_SLO_BASELINES], atSloTarget: target });
    if (!reply.atSlo) throw new Error('the replay thread answered without the baselines at the SLO target');
    return { asIs: reply.policies, atSlo: reply.atSlo };
  });
}

type RunOnThread = (task: SweepTask) => ReturnType<typeof runTask>;

/** A sweep thread metered against the budget for the length of `body`, then terminated. */
async function onBoundedThread<T>(trace: Trace, o: BoundedReplayOptions, body: (run: RunOnThread) => Promise<T>): Promise<T> {
  o.signal?.throwIfAborted();
  const worker = new Worker(SWEEP_THREAD, { workerData: { trace } });
  let stop: (err: Error) => void = () => undefined;
  // Settles only by rejecting: the budget is spent, the caller aborted, or the thread died.
  const stopped = new Promise<never>((_, reject) => {
    stop = reject;
  });
  stopped.catch(() => undefined);
  const onAbort = () => stop(o.signal?.reason instanceof Error ? o.signal.reason : new Error('replay aborted'));
  o.signal?.addEventListener('abort', onAbort, { once: true });
  worker.once('error', (err) => stop(err));
  worker.once('exit', (code) => stop(new Error(`replay thread exited (code ${code})`)));
  let meter: NodeJS.Timeout | undefined;
  try {
    const ready = await Promise.race([readyOf(worker), stopped]);
    const used = cpuMeter(ready.osThreadId);
    meter = setInterval(() => {
      const ms = used();
      if (ms > o.cpuBudgetMs)
        stop(new ReplayBudgetError(`the replay used ${Math.round(ms)} ms of CPU time; its budget is ${o.cpuBudgetMs} ms`));
    }, o.pollMs ?? 50);
    return await Promise.race([body((task) => Promise.race([runTask(worker, task), stopped])), stopped]);
  } finally {
    clearInterval(meter);
    o.signal?.removeEventListener('abort', onAbort);
    worker.removeAllListeners('exit');
    await worker.terminate();
    worker.removeAllListeners('error');
  }
}

function readyOf(worker: Worker): Promise<ThreadReady> {
  return new Promise((resolve) => {
    const onMessage = (message: ThreadReady) => {
      if (message?.ready !== true) return;
      worker.off('message', onMessage);
      resolve(message);
    };
    worker.on('message', onMessage);
  });
}

/** CPU time the thread used since now, in ms: its own where the OS says, else wall time. */
function cpuMeter(osThreadId: number | null): () => number {
  const read = osThreadId === null ? null : () => threadCpuMs(osThreadId);
  const start = read?.() ?? null;
  if (read === null || start === null) {
    const at = performance.now();
    return () => performance.now() - at;
  }
  // Unreadable once the thread is gone: its exit, not the budget, says what happened.
  return () => (read() ?? start) - start;
}

/**
 * User + system CPU time of one of this process's threads, in ms; null when unreadable. The
 * fields after the command name (which may hold spaces, hence the last ')') are utime and stime
 * at 12 and 13, in clock ticks, which Linux reports at USER_HZ = 100 on every architecture.
 */
export function threadCpuMs(osThreadId: number): number | null {
  try {
    const stat = readFileSync(`/proc/self/task/${osThreadId}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return Number.isFinite(ticks) ? ticks * 10 : null;
  } catch {
    return null;
  }
}
