/**
 * The real InferenceEngine: ONNX Runtime in a worker thread (ort-thread.ts), driven by
 * request/response messages with ids. Input buffers are transferred to the thread, not copied
 * (the caller's arrays are detached by `run`), and output buffers are transferred back.
 *
 * States: running → closed (close()) or running → dead (the thread crashed or exited). In both
 * end states every pending call rejects and every later call rejects at once with the reason.
 * The thread is unref'd while no call is pending, so an idle engine never keeps a process alive.
 *
 * close() asks the thread to end itself after the forward pass it is in, rather than calling
 * Worker.terminate() at once: terminating a thread while ORT is inside `run` aborts the whole
 * process. terminate() is kept for a thread that does not end within CLOSE_GRACE_MS.
 *
 * One thread can also host several sessions (createThreadHost, for a shared pool's worker that
 * holds several models): each `openSession()` is an InferenceEngine of its own, whose close()
 * releases that session's memory and leaves the thread running. Their passes share the thread, so
 * they run one at a time in arrival order; the thread dying loses every session on it.
 */
import { Worker } from 'node:worker_threads';
import { coerceError } from '../../infra/kernel/errors.ts';
import { type EngineLoadOptions, EngineRejectedError, type EngineTensor, type InferenceEngine } from './engine.ts';
import type { OrtLogLevel, ThreadData, ThreadEngineInfo, ThreadRequest, ThreadResponse } from './ort-thread.ts';
import { forTransfer } from './tensor-codec.ts';

export type { OrtLogLevel, ThreadEngineInfo };

export interface ThreadEngineOptions {
  /**
   * ONNX Runtime's log severity in the thread. Default 'fatal': a failing forward pass (e.g. an
   * index out of range in a job's data) is expected, comes back as a rejected promise with
   * ORT's message, and should not also be printed to stderr.
   */
  logLevel?: OrtLogLevel;
}

export interface ThreadEngine extends InferenceEngine {
  load(modelPath: string, options: EngineLoadOptions): Promise<ThreadEngineInfo>;
}

/** An inference thread holding any number of sessions. */
export interface ThreadHost {
  /** A new session on this thread (nothing loaded until its load()); its close() releases only it. */
  openSession(): ThreadEngine;
  /** Resolves once the thread has ONNX Runtime loaded and answers; rejects if it died. */
  ready(): Promise<void>;
  /** Rejects when the thread dies or is closed: every session on it is gone. */
  readonly lost: Promise<never>;
  /** Ends the thread (after the pass it is in) and every session on it. Idempotent. */
  close(): Promise<void>;
}

interface Pending {
  resolve: (response: ThreadResponse & { ok: true }) => void;
  reject: (err: Error) => void;
}

/** Spawned on a plain .mjs file: it registers tsx in the thread before loading ort-thread.ts. */
const BOOTSTRAP = new URL('./thread-bootstrap.mjs', import.meta.url);

/** Longer than any sane forward pass: forcing the thread down mid-run kills the process. */
const CLOSE_GRACE_MS = 120_000;

export function createThreadEngine(options: ThreadEngineOptions = {}): ThreadEngine {
  return new WorkerThreadEngine(options.logLevel ?? 'fatal');
}

export function createThreadHost(options: ThreadEngineOptions = {}): ThreadHost {
  const thread = new WorkerThreadEngine(options.logLevel ?? 'fatal');
  // Session 0 is the thread's own (createThreadEngine's); a host's sessions start at 1.
  let next = 1;
  return {
    openSession: () => thread.session(next++),
    ready: () => thread.ready(),
    lost: thread.lost,
    close: () => thread.close(),
  };
}

class WorkerThreadEngine implements ThreadEngine {
  private readonly worker: Worker;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  /** Set once the engine is closed or its thread died; later calls reject with it. */
  private ended?: Error;
  private closing?: Promise<void>;
  private exited = false;
  private readonly exit: Promise<void>;
  private markLost: (err: Error) => void = () => {};
  readonly lost = new Promise<never>((_, reject) => {
    this.markLost = reject;
  });

  constructor(logLevel: OrtLogLevel) {
    this.lost.catch(() => undefined);
    this.worker = new Worker(BOOTSTRAP, { workerData: { logLevel } satisfies ThreadData });
    this.worker.unref();
    this.worker.on('message', (response: ThreadResponse) => this.settle(response));
    this.worker.on('error', (err) => this.end(new Error(`inference thread crashed: ${err.message}`, { cause: err })));
    this.exit = new Promise((resolve) =>
      this.worker.once('exit', (code) => {
        this.exited = true;
        this.end(new Error(`inference thread exited (code ${code})`));
        resolve();
      }),
    );
    this.worker.on('messageerror', (err) =>
      this.end(new Error(`inference thread sent an unreadable message: ${err.message}`, { cause: err })),
    );
  }

  async load(modelPath: string, options: EngineLoadOptions, session?: number): Promise<ThreadEngineInfo> {
    const response = await this.call({
      op: 'load',
      ...(session === undefined ? {} : { session }),
      modelPath,
      options: { executionProviders: [...options.executionProviders], intraOpThreads: options.intraOpThreads },
    });
    if (!('info' in response)) throw new Error('inference thread answered load without info');
    return response.info;
  }

  async run(inputs: Record<string, EngineTensor>, outputNames?: string[], session?: number): Promise<Record<string, EngineTensor>> {
    const { tensors, transfer } = forTransfer(inputs);
    const request = { op: 'run' as const, ...(session === undefined ? {} : { session }), inputs: tensors };
    const response = await this.call({ ...request, ...(outputNames ? { outputNames: [...outputNames] } : {}) }, transfer);
    if (!('outputs' in response)) throw new Error('inference thread answered run without outputs');
    return response.outputs;
  }

  async ready(): Promise<void> {
    await this.call({ op: 'ready' });
  }

  /** A view of session `key` on this thread: close() releases it (a no-op once the thread is gone). */
  session(key: number): ThreadEngine {
    let released: Promise<void> | undefined;
    return {
      load: (modelPath, options) => this.load(modelPath, options, key),
      run: (inputs, outputNames) => this.run(inputs, outputNames, key),
      close: () => {
        released ??= this.ended
          ? Promise.resolve()
          : this.call({ op: 'release', session: key }).then(
              () => undefined,
              () => undefined,
            );
        return released;
      },
    };
  }

  /** Idempotent. Rejects calls still pending: a draining caller waits for its runs first. */
  close(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.end(new Error('inference engine is closed'));
    if (this.exited) return;
    // Held until the thread is gone: a process exiting under a thread inside ORT's run aborts.
    this.worker.ref();
    const force = setTimeout(() => void this.worker.terminate(), CLOSE_GRACE_MS);
    force.unref();
    try {
      this.worker.postMessage({ id: 0, op: 'close' } satisfies ThreadRequest);
      await this.exit;
    } finally {
      clearTimeout(force);
    }
  }

  private call(request: DistributiveOmit<ThreadRequest, 'id'>, transfer: ArrayBuffer[] = []): Promise<ThreadResponse & { ok: true }> {
    if (this.ended) return Promise.reject(this.ended);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // Keep the process alive only while an answer is owed.
      if (this.pending.size === 1) this.worker.ref();
      try {
        this.worker.postMessage({ ...request, id } as ThreadRequest, transfer);
      } catch (err) {
        this.forget(id);
        reject(coerceError(err));
      }
    });
  }

  private settle(response: ThreadResponse): void {
    const waiter = this.pending.get(response.id);
    if (!waiter) return;
    this.forget(response.id);
    if (response.ok) waiter.resolve(response);
    else waiter.reject(new EngineRejectedError(response.message));
  }

  private forget(id: number): void {
    this.pending.delete(id);
    if (this.pending.size === 0) this.worker.unref();
  }

  private end(reason: Error): void {
    this.ended ??= reason;
    this.markLost(this.ended);
    for (const [id, waiter] of [...this.pending]) {
      this.forget(id);
      waiter.reject(this.ended);
    }
  }
}

type DistributiveOmit<T, K extends keyof T> = T extends unknown ? Omit<T, K> : never;
