import { describe, expect, it } from 'vitest';
import type { OpenLoopRun } from './e2e.ts';
import { type LadderRung, ladderRows } from './latency-ladder.ts';

function rung(ratePerS: number, p99?: number): LadderRung {
  if (p99 === undefined) return { ratePerS, skipped: 'past 80% of its max' };
  const latency = { count: 100, p50: p99 / 2, p95: p99, p99, max: p99 };
  return {
    ratePerS,
    run: { ratePerS, latency, http: latency, accepted: 100, rejected: 0, failed: 0, requestsPerJob: 1, maxDispatchLagMs: 0 } as OpenLoopRun,
  };
}

describe('ladderRows', () => {
  it("takes warmpool's worst p99, and the minimal stack's over the same rungs only", () => {
    // warmpool left 50/s out (past 80% of its max); the minimal stack's 50/s rung must not count.
    const [p99, ratio] = ladderRows('m', [rung(10, 30), rung(20, 40), rung(50)], [rung(10, 10), rung(20, 20), rung(50, 80)]);
    expect(p99).toMatchObject({ name: 'm.light_load_p99_ms', value: 40 });
    expect(ratio).toMatchObject({ name: 'm.light_load_p99_vs_minimal', value: 2 });
    expect(p99?.detail).toContain('50/s — (past 80% of its max) | p50 40 p99 80 ms ×100');
  });

  it('is n/a when warmpool ran no rung, or the minimal stack none of the same', () => {
    expect(ladderRows('m', [rung(10)], [rung(10, 10)]).map((r) => r.value)).toEqual([NaN, NaN]);
    expect(ladderRows('m', [rung(10, 30)], undefined).map((r) => r.value)).toEqual([30, NaN]);
  });
});
