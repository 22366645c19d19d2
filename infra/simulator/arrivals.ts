/**
 * Arrivals for the simulator: per-minute counts from a trace, turned into job arrival times.
 *
 * - Counts: the trace's per-minute rate × scale, rounded stochastically (floor, plus one with
 *   the fractional part's probability), so a scaled-down trace keeps its mean. Missing minutes
 *   (an outage) replay no arrivals.
 * - Within a minute the count is kept exactly and only the placement varies: `uniform` spreads
 *   N jobs evenly at (i + ½)/N of the minute (no randomness; hand-computable tests use it);
 *   `poisson` and `gamma` draw N + 1 gaps (exponential, or gamma with coefficient of variation
 *   `cv`: CV 2 is the ServeGen traces' within-window burstiness) and scale them to fill the minute.
 * - Deterministic: every minute has its own generator seeded from (seed, minute), so all
 *   policies in a run see the very same arrivals (common random numbers: their differences are
 *   the policies', not the dice's).
 */
import { seededRandom } from '../kernel/seeded-random.ts';

export { seededRandom };
export type ArrivalPattern = { kind: 'uniform' } | { kind: 'poisson' } | { kind: 'gamma'; cv: number };

function minuteSeed(seed: number, minute: number, stream: number): number {
  return (Math.imul(seed ^ 0x5bd1e995, 0x9e3779b1) ^ Math.imul(minute + 1, 0x85ebca6b) ^ Math.imul(stream, 0xc2b2ae35)) >>> 0;
}

/** Whole arrivals per minute: rate × scale, stochastically rounded; missing minutes are 0. */
export function realiseCounts(perMinute: readonly number[], missing: readonly boolean[], scale: number, seed: number): number[] {
  return perMinute.map((n, m) => {
    if (missing[m] === true) return 0;
    const x = Math.max(0, n * scale);
    const whole = Math.floor(x);
    return whole + (seededRandom(minuteSeed(seed, m, 1))() < x - whole ? 1 : 0);
  });
}

/** Sorted arrival times (epoch ms) of `count` jobs within the minute starting at `startMs`. */
export function minuteArrivals(count: number, startMs: number, minute: number, pattern: ArrivalPattern, seed: number): Float64Array {
  const out = new Float64Array(count);
  if (count === 0) return out;
  if (pattern.kind === 'uniform') {
    for (let i = 0; i < count; i++) out[i] = startMs + ((i + 0.5) / count) * 60_000;
    return out;
  }
  const random = seededRandom(minuteSeed(seed, minute, 2));
  const draw = pattern.kind === 'poisson' ? () => -Math.log(1 - random()) : gammaSampler(1 / (pattern.cv * pattern.cv), random);
  let total = draw();
  for (let i = 0; i < count; i++) {
    out[i] = total;
    total += draw();
  }
  // N + 1 gaps scaled to the minute: the first and last jobs do not sit on its edges.
  for (let i = 0; i < count; i++) out[i] = startMs + ((out[i] as number) / total) * 60_000;
  return out;
}

/** Gamma(shape, 1) by Marsaglia–Tsang; shape < 1 is boosted by U^(1/shape). */
function gammaSampler(shape: number, random: () => number): () => number {
  const boost = shape < 1;
  const k = boost ? shape + 1 : shape;
  const d = k - 1 / 3;
  const c = 1 / Math.sqrt(9 * d);
  const normal = () => Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  return () => {
    for (;;) {
      const x = normal();
      const v = (1 + c * x) ** 3;
      if (v <= 0) continue;
      const u = 1 - random();
      if (Math.log(u) < 0.5 * x * x + d - d * v + d * Math.log(v)) {
        const g = d * v;
        return boost ? g * (1 - random()) ** (1 / shape) : g;
      }
    }
  };
}
