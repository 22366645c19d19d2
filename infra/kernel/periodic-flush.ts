/**
 * The timer half of "hold in memory, write once per interval": the caller keeps what waits and
 * calls `held()` whenever it adds something; `flush` then runs `intervalMs` later. The timer runs
 * only while something waits, so an idle process holds none. Once `close()` has begun (it stops
 * the timer and flushes), whatever is added is flushed at once. Shared by the arrival counter
 * (infra/telemetry/arrival-counter.ts) and the open-jobs releaser (infra/redis/open-jobs.ts).
 */
import type { Clock } from './clock.ts';

export interface PeriodicFlush {
  /** Something was added: flush within the interval (at once after close() began). */
  held(): void;
  /** Stops the timer and flushes. Idempotent. */
  close(): Promise<void>;
}

/** `flush` must not reject: it reports its own failures. */
export function periodicFlush(flush: () => Promise<void>, clock: Pick<Clock, 'sleep'>, intervalMs: number): PeriodicFlush {
  const stop = new AbortController();
  let scheduled = false;
  let closing: Promise<void> | undefined;
  return {
    held() {
      if (closing) {
        void flush();
        return;
      }
      if (scheduled) return;
      scheduled = true;
      void clock.sleep(intervalMs, stop.signal).then(
        () => {
          scheduled = false;
          return flush();
        },
        () => undefined, // stopped by close(), which flushes itself
      );
    },
    close() {
      closing ??= (async () => {
        stop.abort();
        await flush();
      })();
      return closing;
    },
  };
}
