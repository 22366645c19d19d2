/**
 * Time, injected. The batcher, the scaler and retry schedules take a Clock so their tests run
 * as plain steps with no real waiting (ManualClock), including the clock going backwards.
 */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const timer = setTimeout(
        () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        Math.max(0, ms),
      );
      const onAbort = () => {
        clearTimeout(timer);
        reject(signal?.reason);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
    }),
};

interface Sleeper {
  wakeAt: number;
  resolve: () => void;
}

/**
 * A clock that only moves when told to. `advance(ms)` wakes every sleeper whose time has come,
 * in wake order, and lets their continuations run before returning.
 */
export class ManualClock implements Clock {
  private sleepers: Sleeper[] = [];

  constructor(private current = 0) {}

  now(): number {
    return this.current;
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const sleeper: Sleeper = { wakeAt: this.current + Math.max(0, ms), resolve };
      this.sleepers.push(sleeper);
      signal?.addEventListener(
        'abort',
        () => {
          this.sleepers = this.sleepers.filter((s) => s !== sleeper);
          reject(signal.reason);
        },
        { once: true },
      );
    });
  }

  /** Pending sleepers, for tests that assert something is waiting. */
  get pending(): number {
    return this.sleepers.length;
  }

  async advance(ms: number): Promise<void> {
    const target = this.current + ms;
    for (;;) {
      this.sleepers.sort((a, b) => a.wakeAt - b.wakeAt);
      const next = this.sleepers[0];
      if (!next || next.wakeAt > target) break;
      this.sleepers.shift();
      this.current = Math.max(this.current, next.wakeAt);
      next.resolve();
      await flushMicrotasks();
    }
    this.current = Math.max(this.current, target);
    await flushMicrotasks();
  }

  /** Moves time without waking anyone: for "the clock goes backwards" cases. */
  set(ms: number): void {
    this.current = ms;
  }
}

export async function flushMicrotasks(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}
