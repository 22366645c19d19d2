/**
 * Serving's check on warm-up's thread count. Warm-up chooses the intra-op thread count before any
 * traffic, on a host as quiet as it finds it (worker/warmup.ts, host-cpu.ts); what serves the
 * traffic shares the host with whatever that traffic wakes. Where the API, Redis or a load
 * generator run on the same cores (the whole stack on one machine), a worker busy with work finds
 * the rest of the host taking the cores its threads need, and there fewer threads serve better
 * (docs/BENCHMARKS.md, issue 34: on 2 cores, 2 threads served the stack's requests at 0.99× the
 * minimal stack where 1 thread had served 1.54×, p99 at 50 req/s 242 against 60 ms).
 *
 * So while serving, each window (a heartbeat interval) the worker reports the cores the rest of
 * the host used and how busy its inference thread was. A window counts only when the thread had
 * work for at least half of it (an idle worker is not short of anything). After
 * STEP_DOWN_WINDOWS counting windows in a row in which its thread count was short of its cores
 * (host-cpu.ts measuredShort), the governor names the largest measured count below it that the
 * median of those windows leaves its cores (else the smallest), once: the worker reloads its
 * sessions at that count and keeps it until it restarts, when warm-up and this check run again.
 * Never up, and never twice: a count that flapped with the load would reload sessions (seconds on
 * a large model) each time the load changed.
 */
import { measuredShort } from './host-cpu.ts';

/** Windows in a row that must agree: one window's figure can be a blip (a neighbour's compile, a log rotation). */
export const STEP_DOWN_WINDOWS = 3;
/** The inference thread's busy share from which a window counts: below it the cores are not what limits the worker. */
export const BUSY_ENOUGH = 0.5;

export interface ServingWindow {
  /** Cores the rest of the host used over the window; undefined where the host cannot tell. */
  othersCores: number | undefined;
  /** The share of the window the inference thread had work, in [0, 1]. */
  busyFraction: number;
}

export interface ThreadGovernor {
  /** The thread count to step down to, once; undefined otherwise. */
  observe(window: ServingWindow): number | undefined;
}

/**
 * A governor for a worker serving at `threads` (0: ONNX Runtime's default, every core), with the
 * counts warm-up measured; undefined when none is below it.
 */
export function createThreadGovernor(threads: number, measured: readonly number[], cores: number): ThreadGovernor | undefined {
  const now = threads > 0 ? Math.min(threads, cores) : cores;
  const lower = [...new Set(measured)].filter((t) => t > 0 && t < now).sort((a, b) => b - a);
  if (lower.length === 0) return undefined;
  let streak: number[] = [];
  let decided = false;
  return {
    observe({ othersCores, busyFraction }) {
      if (decided || othersCores === undefined || busyFraction < BUSY_ENOUGH) return undefined;
      if (!measuredShort(threads, othersCores, cores)) {
        streak = [];
        return undefined;
      }
      streak.push(othersCores);
      if (streak.length < STEP_DOWN_WINDOWS) return undefined;
      decided = true;
      const typical = [...streak].sort((a, b) => a - b)[Math.floor(streak.length / 2)] ?? 0;
      return lower.find((t) => !measuredShort(t, typical, cores)) ?? lower.at(-1);
    },
  };
}
