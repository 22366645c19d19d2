import { describe, expect, it } from 'vitest';
import { certainlyOpenAtOnce } from './hostile-report.ts';

describe('certainlyOpenAtOnce', () => {
  it('counts overlaps of the spans less the lag at their end: a close seen late is no overlap', () => {
    // Three connections one after another; each new one's SETTINGS seen 30 ms before the previous close was.
    const spans: Array<[number, number]> = [
      [0, 1_030],
      [1_000, 2_030],
      [2_000, 3_000],
    ];
    expect(certainlyOpenAtOnce(spans, 0)).toBe(2);
    expect(certainlyOpenAtOnce(spans, 50)).toBe(1);
    // Truly open together: no lag explains it.
    expect(
      certainlyOpenAtOnce(
        [
          [0, 5_000],
          [100, 5_000],
          [200, 5_000],
        ],
        1_000,
      ),
    ).toBe(3);
    // A span shorter than the lag may have covered nothing certain.
    expect(certainlyOpenAtOnce([[0, 40]], 50)).toBe(0);
    expect(certainlyOpenAtOnce([], 0)).toBe(0);
  });
});
