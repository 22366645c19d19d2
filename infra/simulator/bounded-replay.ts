/**
 * Replays with a CPU-time budget, for a process that must keep answering while one runs (the
 * API's dashboard): compare() runs on a sweep thread (sweep-thread.ts), never on the caller's
 * event loop, and the thread is terminated once it has used `cpuBudgetMs` of CPU time, or at
 * once when `signal` aborts (the client went away).
 *
 * A run of many bounded calls (a matrix, a bank) shares their threads (`createReplayThreads`): a
 * call that ends within its budget gives its thread back for the next, so a thread's start — the
 * bundle compiled again, two thirds of a quick matrix's CPU — is paid once per thread, not twice a
 * cell; a thread stopped at its budget or by an abort is terminated, never reused.
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
  /** Threads to take one from and give it back to (createReplayThreads); a thread of its own when absent. */
  threads?: ReplayThreads;
}

/** A sweep thread and its first message, the ready one naming its OS thread. */
export interface ReplayThread {
  worker: Worker;
  ready: Promise<ThreadReady>;
}

/** Sweep threads kept between bounded calls; `close()` terminates them (idempotent). */
export interface ReplayThreads {
  /** An idle thread, or a new one; undefined once closed. */
  take(): ReplayThread | undefined;
  /** A thread whose call ended within its budget, kept for the next call (terminated once closed). */
  giveBack(thread: ReplayThread): void;
  close(): Promise<void>;
}

/** `use` with threads kept between its calls, closed when it settles. */
export async function withKeptThreads<T>(use: (threads: ReplayThreads) => Promise<T>): Promise<T> {
  const threads = createReplayThreads();
  try {
    return await use(threads);
  } finally {
    await threads.close();
  }
}

/**
 * Threads kept between calls. With `idleMs`, for a process that runs a call now and then (the
 * API's dashboard) and has no run to close them at the end of: a thread idle that long is
 * terminated, and an idle one never holds the process open.
 */
export function createReplayThreads(o: { idleMs?: number } = {}): ReplayThreads {
  type Kept = ReplayThread & { expiry?: NodeJS.Timeout };
  const idle: Kept[] = [];
  let closed = false;
  return {
    take() {
      if (closed) return undefined;
      const kept = idle.pop();
      if (!kept) return startThread(null);
      clearTimeout(kept.expiry);
      kept.worker.ref();
      return { worker: kept.worker, ready: kept.ready };
    },
    giveBack(thread) {
      if (closed) {
        void thread.worker.terminate();
        return;
      }
      const kept: Kept = { ...thread };
      if (o.idleMs !== undefined) {
        thread.worker.unref();
        kept.expiry = setTimeout(() => {
          idle.splice(idle.indexOf(kept), 1);
          void thread.worker.terminate();
        }, o.idleMs);
        kept.expiry.unref();
      }
      idle.push(kept);
    },
    async close() {
      closed = true;
      const all = idle.splice(0);
      for (const kept of all) clearTimeout(kept.expiry);
      await Promise.all(all.map((kept) => kept.worker.terminate()));
    },
  };
}

/** A sweep thread holding `trace`; one kept between calls holds none, each task brings its own (SweepTask.trace). */
function startThread(trace: Trace | null): ReplayThread {
  const worker = new Worker(SWEEP_THREAD, { workerData: { trace } });
  // While no call listens (a kept thread, idle): an error of the thread then must not be an
  // uncaught one. It shows when the thread is next taken (its 'exit' stops that call).
  worker.on('error', () => undefined);
  return { worker, ready: readyOf(worker) };
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

/**
 * A thread metered against the budget for the length of `body`: taken from `o.threads` and given
 * back when `body` ends within it, else one of its own, terminated after.
 */
async function onBoundedThread<T>(trace: Trace, o: BoundedReplayOptions, body: (run: RunOnThread) => Promise<T>): Promise<T> {
  o.signal?.throwIfAborted();
  const shared = o.threads?.take();
  const thread = shared ?? startThread(trace);
  const { worker } = thread;
  let stop: (err: Error) => void = () => undefined;
  let reusable = false;
  // Settles only by rejecting: the budget is spent, the caller aborted, or the thread died.
  const stopped = new Promise<never>((_, reject) => {
    stop = reject;
  });
  stopped.catch(() => undefined);
  const onAbort = () => stop(o.signal?.reason instanceof Error ? o.signal.reason : new Error('replay aborted'));
  o.signal?.addEventListener('abort', onAbort, { once: true });
  const onError = (err: Error) => stop(err);
  const onExit = (code: number) => stop(new Error(`replay thread exited (code ${code})`));
  worker.once('error', onError);
  worker.once('exit', onExit);
  let meter: NodeJS.Timeout | undefined;
  try {
    const ready = await Promise.race([thread.ready, stopped]);
    // From now: a thread kept from an earlier call has spent CPU time that is not this call's.
    const used = cpuMeter(ready.osThreadId);
    meter = setInterval(() => {
      const ms = used();
      if (ms > o.cpuBudgetMs)
        stop(new ReplayBudgetError(`the replay used ${Math.round(ms)} ms of CPU time; its budget is ${o.cpuBudgetMs} ms`));
    }, o.pollMs ?? 50);
    // A shared thread holds no trace of its own: each task brings it.
    const run: RunOnThread = (task) => Promise.race([runTask(worker, shared ? { ...task, trace } : task), stopped]);
    const result = await Promise.race([body(run), stopped]);
    reusable = shared !== undefined;
    return result;
  } finally {
    clearInterval(meter);
    o.signal?.removeEventListener('abort', onAbort);
    worker.off('exit', onExit);
    worker.off('error', onError);
    if (reusable && o.threads) o.threads.giveBack(thread);
    else await worker.terminate();
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
