/**
 * A periodic loop on the injected clock, for the background roles (scaler, canary guard): run
 * `tick`, wait `intervalMs`, repeat until closed. A failing tick is reported and the loop goes on
 * (the next tick redoes what the last could not); `close()` stops waiting and lets the tick in
 * progress finish. Idempotent start and close.
 */
import type { Clock } from './clock.ts';

export interface Ticker {
  start(): void;
  close(): Promise<void>;
}

export function createTicker(options: {
  clock: Clock;
  intervalMs: number;
  tick: () => Promise<void>;
  onError: (err: unknown) => void;
}): Ticker {
  const stop = new AbortController();
  let loop: Promise<void> | undefined;
  const run = async (): Promise<void> => {
    while (!stop.signal.aborted) {
      try {
        await options.tick();
      } catch (err) {
        options.onError(err);
      }
      await options.clock.sleep(options.intervalMs, stop.signal).catch(() => undefined);
    }
  };
  return {
    start() {
      if (loop || stop.signal.aborted) return;
      loop = run();
    },
    async close() {
      stop.abort();
      await loop;
    },
  };
}
