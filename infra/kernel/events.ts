/**
 * A tiny typed event emitter. Events feed logs, metrics and tests; a listener that throws (or
 * returns a promise that rejects) never reaches the code that emitted, because that code is the
 * worker's hot path (graphile-worker's `safeEmit`). Failures go to `onListenerError` when given,
 * and are dropped otherwise.
 *
 *   type WorkerEvents = { 'worker:state': [from: string, to: string] };
 *   const events = new TypedEmitter<WorkerEvents>({ onListenerError: (err, e) => log.warn(...) });
 *   const off = events.on('worker:state', (from, to) => ...);
 *   events.emit('worker:state', 'standby', 'active');
 */

/** Map of event name → argument tuple. Interfaces and type aliases both fit. */
export type EventMap<E> = { [K in keyof E]: unknown[] };

export type Listener<A extends unknown[]> = (...args: A) => void | Promise<void>;

export interface TypedEmitterOptions<E> {
  /** Told about every listener failure; itself guarded, so it cannot throw into emit either. */
  onListenerError?: (err: unknown, event: keyof E) => void;
}

export class TypedEmitter<E extends EventMap<E>> {
  private readonly listeners = new Map<keyof E, Set<Listener<E[keyof E]>>>();

  constructor(private readonly options: TypedEmitterOptions<E> = {}) {}

  /** Subscribes `fn`; returns the matching unsubscribe function. */
  on<K extends keyof E>(event: K, fn: Listener<E[K]>): () => void {
    let set = this.listeners.get(event);
    if (!set) {
      set = new Set();
      this.listeners.set(event, set);
    }
    set.add(fn as Listener<E[keyof E]>);
    return () => this.off(event, fn);
  }

  off<K extends keyof E>(event: K, fn: Listener<E[K]>): void {
    const set = this.listeners.get(event);
    set?.delete(fn as Listener<E[keyof E]>);
    if (set?.size === 0) this.listeners.delete(event);
  }

  listenerCount(event: keyof E): number {
    return this.listeners.get(event)?.size ?? 0;
  }

  /** Calls every listener in subscription order; never throws. */
  emit<K extends keyof E>(event: K, ...args: E[K]): void {
    const set = this.listeners.get(event);
    if (!set) return;
    // A copy, so listeners that subscribe or unsubscribe during emit do not disturb this round.
    for (const fn of [...set]) {
      try {
        const result = fn(...args);
        if (isThenable(result)) result.then(undefined, (err: unknown) => this.report(err, event));
      } catch (err) {
        this.report(err, event);
      }
    }
  }

  private report(err: unknown, event: keyof E): void {
    try {
      this.options.onListenerError?.(err, event);
    } catch {
      // The error reporter failed too; there is nowhere left to report to.
    }
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as PromiseLike<unknown> | undefined)?.then === 'function';
}
