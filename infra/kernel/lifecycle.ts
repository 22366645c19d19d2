/**
 * Process lifecycle helpers: the one place signals are handled, a close() that runs every
 * cleanup even when some fail, and memoisation that makes close() idempotent.
 *
 * Shutdown, as a state machine (one per onShutdownSignals subscription):
 *
 *   running --first signal--> draining --drain resolves--> drained
 *   draining --SIGINT again | forceAfterMs | drain rejects--> forced (force(), then exit)
 *   draining --an echo of the first signal, or SIGTERM--> draining (ignored)
 *   drained --another signal--> exit 0 (the drain is done; what still runs, e.g. a start-up's
 *                                 download, is not worth waiting for, nor a "forced" alarm)
 *
 * `drain` should stop taking work, finish or hand back what is held, and close resources; the
 * process then ends on its own (or the caller exits). `force` is the last, synchronous chance
 * to log or kill children; the process exits right after it with 128 + the signal's number,
 * the shell convention, so supervisors see "killed by signal".
 *
 * The drain is bounded (forceAfterMs; DRAIN_LIMIT_MS's default unless the caller says): a drain that waits
 * on something that never answers (a Redis that is gone: its commands wait to be resent) must
 * not turn SIGTERM into a no-op that only SIGKILL ends.
 *
 * Echoes: one Ctrl-C often reaches a process twice. The terminal sends SIGINT to the whole
 * foreground process group, and `npm start` forwards it to its child as well; a supervisor in
 * that group (`warmpool dev`, `warmpool scaler`) then sends its workers SIGTERM, which they have
 * already begun. So while draining, a signal other than the first, or the first again within
 * ECHO_WINDOW_MS, is the same request and is ignored; SIGINT again later is a person pressing
 * Ctrl-C again, and forces. SIGTERM again never forces: it is what supervisors send, and more than
 * one may send it (the scaler's pool and `warmpool dev` both stop a dev worker; under load the
 * second came more than ECHO_WINDOW_MS after the first and cut a worker's drain short). The drain
 * bound, and SIGKILL, are what end a drain that will not end.
 */
import { constants } from 'node:os';
import { type Clock, systemClock } from './clock.ts';

/** Why a shutdown was forced: the signal came again, the drain outlasted its limit, or it failed. */
export type ForceReason = 'signal' | 'timeout' | 'drain-failed';

export interface ShutdownHandlers {
  drain: (signal: string) => Promise<void>;
  force: (signal: string, reason: ForceReason) => void;
}

/**
 * How long a drain may take before it is forced, unless the caller says otherwise: DRAIN_LIMIT_MS's
 * default (config.ts reads it from here), which the worker, the scaler and `warmpool dev` take
 * from their config.
 */
export const DRAIN_LIMIT_MS = 30_000;

/** Time a supervisor gives its children to be seen exiting after their own drain limit. */
const SUPERVISOR_MARGIN_MS = 10_000;

/**
 * The limit for a process whose drain waits on its children's (the scaler's local pool, `warmpool
 * dev`): theirs (`drainLimitMs`, the workers' DRAIN_LIMIT_MS), and time to see them exit.
 */
export function supervisorDrainLimitMs(drainLimitMs: number): number {
  return drainLimitMs + SUPERVISOR_MARGIN_MS;
}

/** A repeat of the first signal this soon after it is an echo of the same delivery (see the header). */
export const ECHO_WINDOW_MS = 500;

export interface ShutdownOptions {
  /** Default SIGINT and SIGTERM. */
  signals?: NodeJS.Signals[];
  /** Force this long after the first signal if drain has not finished; default DRAIN_LIMIT_MS, 0 = never. */
  forceAfterMs?: number;
  processLike?: Pick<NodeJS.Process, 'on' | 'off' | 'exit'>;
  clock?: Clock;
}

/** Installs the handlers; returns a function that removes them and cancels any force timer. */
export function onShutdownSignals(handlers: ShutdownHandlers, options: ShutdownOptions = {}): () => void {
  const proc = options.processLike ?? process;
  const signals = options.signals ?? ['SIGINT', 'SIGTERM'];
  const clock = options.clock ?? systemClock;
  const timer = new AbortController();
  let state: 'running' | 'draining' | 'drained' | 'forced' = 'running';
  let first: { signal: string; at: number } | undefined;

  const force = (signal: string, reason: ForceReason) => {
    if (state === 'forced') return;
    state = 'forced';
    timer.abort();
    try {
      handlers.force(signal, reason);
    } catch {
      // The process exits on the next line either way; nothing is left to tell.
    }
    proc.exit(exitCodeFor(signal));
  };

  const startDrain = (signal: string) => {
    state = 'draining';
    first = { signal, at: clock.now() };
    const forceAfterMs = options.forceAfterMs ?? DRAIN_LIMIT_MS;
    if (forceAfterMs > 0) {
      clock.sleep(forceAfterMs, timer.signal).then(
        () => force(signal, 'timeout'),
        () => {}, // aborted: drain finished or we unsubscribed
      );
    }
    // Promise.resolve().then: a drain that throws synchronously counts as one that rejects.
    Promise.resolve()
      .then(() => handlers.drain(signal))
      .then(
        () => {
          if (state !== 'draining') return;
          state = 'drained';
          timer.abort();
        },
        () => force(signal, 'drain-failed'),
      );
  };

  const isEcho = (signal: string): boolean =>
    state === 'draining' &&
    first !== undefined &&
    (signal !== first.signal || signal === 'SIGTERM' || clock.now() - first.at < ECHO_WINDOW_MS);

  const onSignal = (signal: NodeJS.Signals) => {
    if (state === 'running') startDrain(signal);
    else if (state === 'drained') proc.exit(0);
    else if (!isEcho(signal)) force(signal, 'signal');
  };

  for (const signal of signals) proc.on(signal, onSignal);
  return () => {
    timer.abort();
    for (const signal of signals) proc.off(signal, onSignal);
  };
}

/** 128 + the signal number (SIGINT → 130, SIGTERM → 143); 1 for names the OS does not know. */
export function exitCodeFor(signal: string): number {
  const n = (constants.signals as Record<string, number | undefined>)[signal];
  return n === undefined ? 1 : 128 + n;
}

export type Closer = [name: string, close: () => Promise<void> | void];

/**
 * Runs every closer in order, each after the previous settles, even when some fail; then
 * throws one AggregateError naming those that failed (their errors in `.errors`).
 */
export async function closeAll(closers: Closer[]): Promise<void> {
  const failed: string[] = [];
  const errors: unknown[] = [];
  for (const [name, close] of closers) {
    try {
      await close();
    } catch (err) {
      failed.push(name);
      errors.push(err);
    }
  }
  if (failed.length > 0) throw new AggregateError(errors, `failed to close: ${failed.join(', ')}`);
}

/**
 * Memoises an async function: the first call starts it, every call returns that same promise
 * (settled or not). For idempotent close(): the second close() waits on the first.
 */
export function once<T>(fn: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | undefined;
  return () => {
    if (!result) {
      // Started synchronously, so the first call's side effects happen before it returns; a
      // synchronous throw becomes a rejection, memoised like any other.
      try {
        result = fn();
      } catch (err) {
        result = Promise.reject(err);
      }
    }
    return result;
  };
}
