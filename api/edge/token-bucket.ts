/**
 * A token bucket as pure arithmetic: the edge's per-tenant rate limiter (rate-limiter-object.ts)
 * keeps one in a Durable Object's memory and hands it the clock's time, so the rule is tested
 * here without a runtime. Same meaning as the region's RATE_LIMIT_RPS / RATE_LIMIT_BURST.
 */

export interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date, ms since the epoch. */
  at: number;
}

export interface BucketRule {
  /** Tokens per second. */
  rate: number;
  /** The most a bucket holds (and holds at first). */
  burst: number;
}

export type Take = { ok: true; bucket: Bucket } | { ok: false; bucket: Bucket; retryAfterS: number };

/** Takes `cost` tokens at `now`, or says how long until there are enough (whole seconds, ≥ 1). */
export function take(bucket: Bucket | undefined, rule: BucketRule, now: number, cost = 1): Take {
  const elapsedS = bucket ? Math.max(0, now - bucket.at) / 1000 : 0;
  const tokens = bucket ? Math.min(rule.burst, bucket.tokens + elapsedS * rule.rate) : rule.burst;
  if (tokens >= cost) return { ok: true, bucket: { tokens: tokens - cost, at: now } };
  const waitS = (Math.min(cost, rule.burst) - tokens) / rule.rate;
  return { ok: false, bucket: { tokens, at: now }, retryAfterS: Math.max(1, Math.ceil(waitS)) };
}
