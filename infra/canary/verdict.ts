/**
 * The canary verdict, pure: a canary version's window against the stable version's, under a
 * policy. Margins are relative to the stable version's own numbers (an error rate some points
 * above it, a p95 some factor above it), never absolutes, so a model that is slow or flaky by
 * nature is not rolled back for being itself.
 *
 * Flapping protection: a breach must be seen on every look for `sustainMs` before it calls for
 * a rollback. The state carried between looks is the breach, `{ since, lastSeenAt }`:
 *
 *   none --breach--> breach(since = now) --breach, now - since ≥ sustainMs--> rollback
 *   breach --healthy | insufficient data--> none
 *   breach --breach after a gap > maxGapMs (nobody looked, or the clock jumped)--> breach(since = now)
 *   breach --breach with now < since or now < lastSeenAt (the clock went back)--> breach(since = now)
 *
 * So a clock that jumps, either way, can only delay a rollback, never bring one forward.
 */

import { CANARY_DEFAULTS, type Config } from '../kernel/config.ts';

/**
 * What a verdict is judged by: the config's `canary` section (its fields are documented there)
 * without the guard's own switch and period.
 */
export type CanaryPolicy = Omit<Config['canary'], 'enabled' | 'tickMs'>;

const { enabled: _enabled, tickMs: _tickMs, ...defaultPolicy } = CANARY_DEFAULTS;

/** The policy of an empty environment (the CANARY_* defaults), for a guard or reader given none. */
export const DEFAULT_CANARY_POLICY: Readonly<CanaryPolicy> = defaultPolicy;

/** What a verdict reads of a version's window (outcomes.ts WindowStats fits). */
export interface VersionFigures {
  requests: number;
  errorRate: number;
  latencySamples: number;
  p95Ms: number | null;
}

export interface Breach {
  since: number;
  lastSeenAt: number;
}

export type Verdict =
  | { state: 'healthy' }
  | { state: 'insufficient_data'; reason: string }
  | { state: 'failing'; since: number; reasons: string[]; rollback: boolean };

export interface VerdictInput {
  stable: VersionFigures;
  canary: VersionFigures;
  policy: CanaryPolicy;
  now: number;
  /** The breach carried from the previous look, if any. */
  previous: Breach | null;
  /** Longest gap between looks that still counts as "seen all along". */
  maxGapMs: number;
}

export interface VerdictOutput {
  verdict: Verdict;
  /** The breach to carry to the next look (null = none). */
  breach: Breach | null;
}

export function judgeCanary(input: VerdictInput): VerdictOutput {
  const { stable, canary, policy, now, previous } = input;
  const short = shortOfData(stable, canary, policy.minRequests);
  if (short) return { verdict: { state: 'insufficient_data', reason: short }, breach: null };
  const reasons = breaches(stable, canary, policy);
  if (reasons.length === 0) return { verdict: { state: 'healthy' }, breach: null };
  const continues = previous !== null && previous.since <= now && previous.lastSeenAt <= now && now - previous.lastSeenAt <= input.maxGapMs;
  const since = continues ? previous.since : now;
  return {
    verdict: { state: 'failing', since, reasons, rollback: now - since >= policy.sustainMs },
    breach: { since, lastSeenAt: now },
  };
}

function shortOfData(stable: VersionFigures, canary: VersionFigures, minRequests: number): string | null {
  if (canary.requests < minRequests) return `canary has ${canary.requests} of the ${minRequests} requests needed in the window`;
  if (stable.requests < minRequests) return `stable has ${stable.requests} of the ${minRequests} requests needed in the window`;
  return null;
}

/** Why the canary is worse than the margins allow; empty when it is not. */
export function breaches(stable: VersionFigures, canary: VersionFigures, policy: CanaryPolicy): string[] {
  const reasons: string[] = [];
  const delta = canary.errorRate - stable.errorRate;
  if (delta > policy.maxErrorRateDelta) {
    reasons.push(
      `error rate ${percent(canary.errorRate)} vs stable ${percent(stable.errorRate)} (allowed +${percent(policy.maxErrorRateDelta)})`,
    );
  }
  // Percentiles come from successes only: judge latency when each side has enough of them
  // (a canary that mostly fails is caught by its error rate).
  const enough = Math.max(1, Math.ceil(policy.minRequests / 2));
  if (canary.latencySamples >= enough && stable.latencySamples >= enough && canary.p95Ms !== null && stable.p95Ms !== null) {
    const ratio = Math.max(canary.p95Ms, policy.latencyFloorMs) / Math.max(stable.p95Ms, policy.latencyFloorMs);
    if (ratio > policy.maxLatencyRatio) {
      reasons.push(
        `p95 latency ${Math.round(canary.p95Ms)} ms vs stable ${Math.round(stable.p95Ms)} ms (×${ratio.toFixed(2)}, allowed ×${policy.maxLatencyRatio})`,
      );
    }
  }
  return reasons;
}

function percent(x: number): string {
  return `${(x * 100).toFixed(1)}%`;
}
