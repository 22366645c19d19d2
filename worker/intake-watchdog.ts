/**
 * Notices an intake that stopped taking jobs while jobs wait for it, so the worker can replace
 * it instead of sitting idle beside a full queue.
 *
 * Why it exists: after a Redis Cluster node restarts, BullMQ's worker (6.7) can stop fetching
 * for good — no error, no job, the process alive and `active`, its shared connection ready.
 * The chaos suite's redis-restart scenario on a cluster caught it about one short run in five
 * on a loaded machine. Nothing in BullMQ's public API says so; what can be seen from outside is
 * the symptom, and that is what this watches:
 *
 *   the worker wants jobs (active, intake running, room for more) and
 *   none was taken for `stallMs` and
 *   the queue holds jobs waiting (asked of Redis on the worker's own connection).
 *
 * A free BullMQ worker takes a waiting job within milliseconds, so an idle stretch of seconds
 * beside waiting jobs is never healthy. A Redis that does not answer the question is an outage,
 * not a stall: the check skips that round.
 */
import type { Clock } from '../infra/kernel/clock.ts';

export interface StallInfo {
  waiting: number;
  idleMs: number;
}

export interface IntakeWatchdogOptions {
  clock: Clock;
  /** How long without taking a job, with jobs waiting, counts as a stall. */
  stallMs: number;
  /** True while the intake should be taking jobs: active, running, not paused, room for more. */
  wantsJobs(): boolean;
  /** When the intake last took a job (or was started). */
  lastTakenAt(): number;
  /** Jobs waiting for this queue; undefined when Redis did not answer. */
  waiting(): Promise<number | undefined>;
  /** Replaces the intake; the watchdog measures idleness from lastTakenAt() again afterwards. */
  onStall(info: StallInfo): Promise<void>;
}

export interface IntakeWatchdog {
  /** One look; true when it found a stall and called onStall. */
  check(): Promise<boolean>;
  /** Looks every `stallMs / 3` until closed. */
  start(): void;
  close(): void;
}

export function createIntakeWatchdog(options: IntakeWatchdogOptions): IntakeWatchdog {
  const stop = new AbortController();
  let started = false;

  const check = async (): Promise<boolean> => {
    if (!options.wantsJobs()) return false;
    const idleMs = options.clock.now() - options.lastTakenAt();
    if (idleMs < options.stallMs) return false;
    const waiting = await options.waiting().catch(() => undefined);
    // Asked again after the await: the intake may have taken a job or been paused meanwhile.
    if (waiting === undefined || waiting === 0 || !options.wantsJobs()) return false;
    if (options.clock.now() - options.lastTakenAt() < options.stallMs) return false;
    await options.onStall({ waiting, idleMs });
    return true;
  };

  return {
    check,
    start() {
      if (started) return;
      started = true;
      const every = Math.max(100, Math.floor(options.stallMs / 3));
      void (async () => {
        while (!stop.signal.aborted) {
          await options.clock.sleep(every, stop.signal).catch(() => undefined);
          if (!stop.signal.aborted) await check().catch(() => undefined);
        }
      })();
    },
    close() {
      stop.abort();
    },
  };
}
