import { expect, it } from 'vitest';
import { type CountMark, countSince } from './tick-counts.ts';

const M = 60_000;
const T0 = Date.UTC(2026, 11, 1);

it('counts what arrived since the last tick within a minute and across minutes', () => {
  const first = countSince(undefined, { startMs: T0, perMinute: [7, 3] }, T0 + M + 10_000);
  expect(first.rows).toBeUndefined();
  expect(first.mark).toEqual({ at: T0 + M + 10_000, minuteMs: T0 + M, count: 3 });
  // Same minute: 3 → 8.
  const same = countSince(first.mark, { startMs: T0, perMinute: [7, 8] }, T0 + M + 20_000);
  expect(same.rows).toBe(5);
  // Next minute: the marked minute finished at 10, the new one has 4 so far.
  const next = countSince(same.mark, { startMs: T0, perMinute: [7, 10, 4] }, T0 + 2 * M + 5_000);
  expect(next.rows).toBe(2 + 4);
  expect(next.mark).toMatchObject({ minuteMs: T0 + 2 * M, count: 4 });
});

it('says nothing when the clock went back or the marked minute is outside the series', () => {
  const mark: CountMark = { at: T0 + 5 * M, minuteMs: T0 + 5 * M, count: 2 };
  expect(countSince(mark, { startMs: T0, perMinute: [1, 2, 3, 4, 5, 6] }, T0 + 4 * M).rows).toBeUndefined();
  expect(countSince(mark, { startMs: T0 + 6 * M, perMinute: [1] }, T0 + 6 * M + 1).rows).toBeUndefined();
  expect(countSince({ ...mark, minuteMs: T0 + 9 * M }, { startMs: T0, perMinute: [1, 2, 3, 4, 5, 6] }, T0 + 6 * M).rows).toBeUndefined();
  // A counter that went down (a day key expired) is never a negative count.
  expect(countSince(mark, { startMs: T0, perMinute: [0, 0, 0, 0, 0, 1] }, T0 + 5 * M + 1).rows).toBe(0);
});
