/**
 * Queue waits without keeping every job: a fixed-bucket histogram, exact for zero waits, one
 * bucket for (0, 1 ms), then buckets 1 % wide (so a percentile is within 1 % of the truth; it is
 * reported as its bucket's upper edge, capped at the exact maximum). SLO attainment is counted
 * exactly beside it, so it carries no bucket error.
 */
const GROWTH = 1.01;
const LN_GROWTH = Math.log(GROWTH);
/** Buckets reach 1.01^2000 ms ≈ 4.4e8 ms (5 days); longer waits share the last one. */
const BUCKETS = 2002;

export interface WaitSummary {
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

export class WaitHistogram {
  private readonly buckets = new Float64Array(BUCKETS);
  count = 0;
  withinSlo = 0;
  max = 0;

  constructor(private readonly sloMs: number) {}

  record(waitMs: number): void {
    const k = bucketOf(waitMs);
    this.buckets[k] = (this.buckets[k] as number) + 1;
    this.count++;
    if (waitMs <= this.sloMs) this.withinSlo++;
    if (waitMs > this.max) this.max = waitMs;
  }

  percentile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    let seen = 0;
    for (let k = 0; k < BUCKETS; k++) {
      seen += this.buckets[k] as number;
      if (seen >= rank) return Math.min(upperEdge(k), this.max);
    }
    return this.max;
  }

  summary(): WaitSummary {
    return { p50: this.percentile(0.5), p95: this.percentile(0.95), p99: this.percentile(0.99), max: this.max };
  }

  reset(): void {
    this.buckets.fill(0);
    this.count = 0;
    this.withinSlo = 0;
    this.max = 0;
  }
}

function bucketOf(ms: number): number {
  if (ms <= 0) return 0;
  if (ms < 1) return 1;
  return Math.min(BUCKETS - 1, 2 + Math.floor(Math.log(ms) / LN_GROWTH));
}

function upperEdge(k: number): number {
  if (k === 0) return 0;
  if (k === 1) return 1;
  return GROWTH ** (k - 1);
}
