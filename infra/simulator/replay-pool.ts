/**
 * A pool of sweep threads (sweep-thread.ts) answering single replays as they are asked for, so
 * searches that each need one replay after another (at-slo.ts's bisections) share the cores:
 * a replay takes an idle thread or waits for one. The threads hold the trace they were started
 * with; they are terminated when `use` settles, whichever way.
 */
import { Worker } from 'node:worker_threads';
import type { Replay } from './at-slo.ts';
import { runTask, SWEEP_THREAD } from './sweep.ts';
import type { Trace } from './trace.ts';

export async function withReplayThreads<T>(trace: Trace, threads: number, use: (replay: Replay) => Promise<T>): Promise<T> {
  const all = Array.from({ length: Math.max(1, threads) }, () => new Worker(SWEEP_THREAD, { workerData: { trace } }));
  const idle = [...all];
  const waiting: Array<(w: Worker) => void> = [];
  let id = 0;
  const acquire = (): Worker | Promise<Worker> => idle.pop() ?? new Promise((resolve) => waiting.push(resolve));
  const release = (w: Worker) => {
    const next = waiting.shift();
    if (next) next(w);
    else idle.push(w);
  };
  const replay: Replay = async (settings, policy) => {
    const worker = await acquire();
    try {
      const reply = await runTask(worker, { id: id++, settings, only: [policy] });
      return reply.policies[0] as NonNullable<(typeof reply.policies)[0]>;
    } finally {
      release(worker);
    }
  };
  try {
    return await use(replay);
  } finally {
    await Promise.all(all.map((w) => w.terminate()));
  }
}
