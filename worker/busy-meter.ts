/**
 * How busy a shared pool's worker keeps its inference thread: the heartbeat's `busyFraction`
 * (infra/fleet/worker-states.ts), the share of each heartbeat interval the thread had work.
 *
 * Every call on the thread's sessions is timed, on the injected clock, from its send to its
 * answer: a session's creation and warm-up's passes (a load holds the thread for those, and not
 * while its weights download), each batch, a session's release. Busy is the time at least one
 * call was out, not the sum of their times. The thread takes calls one at a time in arrival order
 * (engine/thread-engine.ts), and a pool worker sends them concurrently (several models, two
 * passes in flight per model), so a call's own time includes its wait behind the others: summed,
 * two batches sent together would count the first one twice and a batch sent during a load
 * would count the load again. While any call is out the thread is working on one of them, so the
 * union is the thread's busy time, give or take the answer's trip back to this thread.
 *
 * Windows: take() ends one and starts the next; a call that spans a boundary counts in both for
 * the part in each. A clock that stands still or goes backwards gives the last share again.
 */
import type { Clock } from '../infra/kernel/clock.ts';
import type { InferenceEngine } from './engine/engine.ts';

export interface BusyMeter {
  /** `engine`, each of its calls counted as busy time. */
  timed(engine: InferenceEngine): InferenceEngine;
  /** The busy share of the window since the last take (or since the meter began), in [0, 1]; a new window begins. */
  take(): number;
}

export function createBusyMeter(clock: Clock): BusyMeter {
  let out = 0;
  /** When the calls out went from none to some. */
  let since = 0;
  let windowStart = clock.now();
  /** Busy ms in this window, of spells already ended. */
  let busyMs = 0;
  let last = 0;
  const spell = (now: number) => Math.max(0, now - Math.max(since, windowStart));

  async function time<T>(call: () => Promise<T>): Promise<T> {
    if (out++ === 0) since = clock.now();
    try {
      return await call();
    } finally {
      if (--out === 0) busyMs += spell(clock.now());
    }
  }

  return {
    timed: (engine) => ({
      load: (modelPath, options) => time(() => engine.load(modelPath, options)),
      run: (inputs, outputNames) => time(() => engine.run(inputs, outputNames)),
      close: () => time(() => engine.close()),
    }),
    take() {
      const now = clock.now();
      const windowMs = now - windowStart;
      const busy = busyMs + (out > 0 ? spell(now) : 0);
      windowStart = now;
      busyMs = 0;
      if (windowMs > 0) last = Math.min(1, Math.max(0, busy / windowMs));
      return last;
    },
  };
}
