/**
 * Retrying a start-up step that reaches the model registry (S3): an outage of the store must
 * hold a launching worker in `downloading`, retrying with exponential back-off and jitter, not
 * kill it (a pool whose workers die on every S3 hiccup relaunches them into the same outage).
 *
 * What is retried: anything but a decision. A model or version that does not exist, a request
 * that is wrong, or a manifest that cannot name a cache file will not change by waiting, so
 * they fail the worker at once. Bytes that do not match their manifest may be a transfer cut
 * short, so they are retried a few times, then fail the worker: such bytes are never served.
 * The wait ends early, without a result, when `signal` aborts (the worker is draining).
 */
import type { Clock } from '../infra/kernel/clock.ts';
import { IntegrityError, isClientError } from '../infra/kernel/errors.ts';

export interface StartBackoffOptions {
  clock: Clock;
  signal: AbortSignal;
  /** First delay; doubles each attempt up to maxDelayMs. */
  initialDelayMs?: number;
  maxDelayMs?: number;
  /** Attempts allowed for bytes that do not match their manifest. */
  integrityAttempts?: number;
  /** Called before each wait: for the heartbeat and the log. */
  onRetry: (e: { attempt: number; delayMs: number; error: unknown }) => void;
  random?: () => number;
}

export async function withStartBackoff<T>(step: () => Promise<T>, options: StartBackoffOptions): Promise<T> {
  const initial = options.initialDelayMs ?? 500;
  const max = options.maxDelayMs ?? 15_000;
  const random = options.random ?? Math.random;
  for (let attempt = 1; ; attempt++) {
    try {
      return await step();
    } catch (err) {
      if (options.signal.aborted || isPermanent(err, attempt, options.integrityAttempts ?? 3)) throw err;
      // Full jitter over the upper half: workers launched together do not retry in lockstep.
      const ceiling = Math.min(max, initial * 2 ** (attempt - 1));
      const delayMs = Math.round(ceiling / 2 + (random() * ceiling) / 2);
      options.onRetry({ attempt, delayMs, error: err });
      await options.clock.sleep(delayMs, options.signal).catch(() => undefined);
      if (options.signal.aborted) throw err;
    }
  }
}

function isPermanent(err: unknown, attempt: number, integrityAttempts: number): boolean {
  if (isClientError(err)) return true;
  if (err instanceof IntegrityError) return err.code !== 'checksum_mismatch' || attempt >= integrityAttempts;
  return false;
}
