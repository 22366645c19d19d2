/**
 * The live scaler's tuner (contracts/pool.ts Tuner; issue 28 §1): retunes run on one sweep thread
 * (sweep-thread.ts), never on the controller's event loop, one at a time in the order asked. The
 * thread keeps each key's forecasts between retunes, so a retune every few minutes forecasts only
 * the minutes that are new since the last. Each retune stops replaying candidates once it has
 * used its request's CPU budget (portfolio.ts); a thread that dies is started again on the next
 * request, and the one in flight is rejected.
 */
import { Worker } from 'node:worker_threads';
import type { Tuner, TuningChoice, TuningRequest } from '../contracts/pool.ts';
import { SWEEP_THREAD, type ThreadReady, type TuneReply, type TuneTask } from './sweep.ts';
import type { Trace } from './trace.ts';

/** The trace a tuning thread is started with: none (each request brings its series). */
const NO_TRACE: Trace = { series: { startMs: 0, perMinute: [] }, missing: [], rows: 0 };

export function createTuner(): Tuner {
  let thread: { worker: Worker; ready: Promise<void> } | undefined;
  let queue: Promise<unknown> = Promise.resolve();
  let nextId = 0;
  let closed = false;

  const start = () => {
    const worker = new Worker(SWEEP_THREAD, { workerData: { trace: NO_TRACE } });
    worker.unref();
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: ThreadReady) => {
        if (m?.ready !== true) return;
        worker.off('message', onMessage);
        resolve();
      };
      worker.on('message', onMessage);
      worker.once('error', reject);
    });
    ready.catch(() => undefined);
    const current = { worker, ready };
    worker.once('exit', () => {
      if (thread === current) thread = undefined;
    });
    return current;
  };

  const run = async (key: string, request: TuningRequest): Promise<TuningChoice | undefined> => {
    if (closed) throw new Error('the tuner is closed');
    thread ??= start();
    const { worker, ready } = thread;
    await ready;
    const task: TuneTask = { id: nextId++, key, tune: request };
    const reply = await new Promise<TuneReply>((resolve, reject) => {
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
      };
      const onMessage = (m: TuneReply) => {
        if (m?.id !== task.id) return;
        cleanup();
        resolve(m);
      };
      const onError = (err: Error) => {
        cleanup();
        reject(err);
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new Error(`the tuning thread exited (code ${code})`));
      };
      worker.on('message', onMessage);
      worker.on('error', onError);
      worker.on('exit', onExit);
      worker.postMessage(task);
    });
    if (reply.error !== undefined) throw new Error(`retune failed: ${reply.error}`);
    return reply.choice ?? undefined;
  };

  return {
    retune(key, request) {
      const result = queue.then(() => run(key, request));
      queue = result.catch(() => undefined);
      return result;
    },
    async close() {
      if (closed) return;
      closed = true;
      await queue;
      const t = thread;
      thread = undefined;
      await t?.worker.terminate();
    },
  };
}
