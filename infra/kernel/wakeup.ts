/**
 * A wake-up that is remembered when it fires while nobody waits, so a chunk completing between
 * two polls still wakes the next wait at once. `next()` pairs with `cancel()` when the wait ended
 * another way (its timer), so a stale waiter never swallows a later wake-up; `within()` is that
 * pairing around a timer, for a poll loop (the bulk run driver's).
 */
import type { Clock } from './clock.ts';

export class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  readonly fire = (): void => {
    const resolve = this.resolve;
    this.resolve = undefined;
    if (resolve) resolve();
    else this.pending = true;
  };

  next(): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      this.resolve = resolve;
    });
  }

  cancel(): void {
    this.resolve = undefined;
  }

  /**
   * Resolves at the first of: a wake-up, `ms` on `clock`, or `signal` aborting (without
   * throwing: the caller looks at the signal). The wait is cancelled after, whichever ended it.
   */
  async within(clock: Pick<Clock, 'sleep'>, ms: number, signal: AbortSignal): Promise<void> {
    const timer = new AbortController();
    const onAbort = () => timer.abort();
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      await Promise.race([clock.sleep(ms, timer.signal).catch(() => undefined), this.next()]);
    } finally {
      this.cancel();
      timer.abort();
      signal.removeEventListener('abort', onAbort);
    }
  }
}
