/**
 * When to try a webhook delivery again (Svix/Stripe-like): the configured schedule
 * (WEBHOOK_RETRY_SCHEDULE_MS, about a day by default) gives the delay before each retry, each
 * delay jittered by ±20% so that receivers recovering from an outage are not hit by every
 * retry at once.
 *
 * `Retry-After` (seconds or an HTTP date) is honoured as a lower bound: the retry waits at least
 * as long as the receiver asked, and never less than the schedule says, so `Retry-After: 0`
 * cannot pull retries forward faster than the schedule. Values past 24 h are capped at 24 h.
 */
export const JITTER = 0.2;
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60 * 1000;

export interface NextAttemptInput {
  /** Attempts made so far, the one that just failed included (≥ 1). */
  attempt: number;
  now: number;
  /** Delay before retry n (index n - 1). Its length is the number of retries. */
  scheduleMs: readonly number[];
  retryAfterHeader?: string | null;
  /** [0, 1), like Math.random; injected for tests. */
  random: () => number;
}

/** Epoch ms of the next attempt, or null when the schedule is used up (dead-letter). */
export function nextAttemptAt(input: NextAttemptInput): number | null {
  const base = input.scheduleMs[input.attempt - 1];
  if (base === undefined || input.attempt < 1) return null;
  const jittered = Math.round(base * (1 + (input.random() * 2 - 1) * JITTER));
  const asked = parseRetryAfter(input.retryAfterHeader, input.now) ?? 0;
  return input.now + Math.max(jittered, asked);
}

/** Milliseconds from `now` a `Retry-After` value asks for (capped at 24 h); undefined when unusable. */
export function parseRetryAfter(header: string | null | undefined, now: number): number | undefined {
  const value = header?.trim();
  if (!value) return undefined;
  let ms: number;
  if (/^\d+$/.test(value)) ms = Number(value) * 1000;
  else {
    // HTTP dates (all three RFC 9110 forms) start with the day's name; Date.parse alone reads "1.5" as a date.
    const at = /^[A-Za-z]{3,9},? /.test(value) ? Date.parse(value) : Number.NaN;
    if (Number.isNaN(at)) return undefined;
    ms = at - now;
  }
  return Math.min(Math.max(0, ms), MAX_RETRY_AFTER_MS);
}
