import { describe, expect, it } from 'vitest';
import { BUSY_ENOUGH, createThreadGovernor, STEP_DOWN_WINDOWS } from './thread-governor.ts';

const busy = (othersCores: number | undefined, busyFraction = 0.9) => ({ othersCores, busyFraction });

describe('createThreadGovernor', () => {
  it('steps 2 threads down to 1 on a 2-core host after STEP_DOWN_WINDOWS busy windows short of cores, once', () => {
    const g = createThreadGovernor(2, [1, 2], 2);
    const answers = Array.from({ length: STEP_DOWN_WINDOWS }, () => g?.observe(busy(0.8)));
    expect(answers.slice(0, -1)).toEqual(Array(STEP_DOWN_WINDOWS - 1).fill(undefined));
    expect(answers.at(-1)).toBe(1);
    for (let i = 0; i < 2 * STEP_DOWN_WINDOWS; i++) expect(g?.observe(busy(1.9))).toBeUndefined();
  });

  it('needs the windows in a row: one with the cores free starts the count again', () => {
    const g = createThreadGovernor(2, [1, 2], 2);
    for (let i = 0; i < STEP_DOWN_WINDOWS - 1; i++) expect(g?.observe(busy(0.8))).toBeUndefined();
    expect(g?.observe(busy(0.2))).toBeUndefined();
    for (let i = 0; i < STEP_DOWN_WINDOWS - 1; i++) expect(g?.observe(busy(0.8))).toBeUndefined();
    expect(g?.observe(busy(0.8))).toBe(1);
  });

  it('ignores windows where the worker was not busy enough or the host could not tell, without breaking the count', () => {
    const g = createThreadGovernor(2, [1, 2], 2);
    expect(g?.observe(busy(0.8))).toBeUndefined();
    expect(g?.observe(busy(1.9, BUSY_ENOUGH - 0.01))).toBeUndefined();
    expect(g?.observe(busy(undefined))).toBeUndefined();
    for (let i = 0; i < STEP_DOWN_WINDOWS - 2; i++) expect(g?.observe(busy(0.8))).toBeUndefined();
    expect(g?.observe(busy(0.8))).toBe(1);
  });

  it('never steps on a host that leaves the threads their cores', () => {
    const g = createThreadGovernor(2, [1, 2], 2);
    for (let i = 0; i < 10 * STEP_DOWN_WINDOWS; i++) expect(g?.observe(busy(0.4))).toBeUndefined();
  });

  it('steps to the largest measured count the median window leaves its cores, else the smallest', () => {
    // 8 cores, 8 threads: the rest took 5 to 7 cores, 6 in the median window: 2 free, so 2 fits (≥ 1.5), 4 does not (< 3.5).
    const g = createThreadGovernor(8, [1, 2, 4, 8], 8);
    expect([6, 5, 7].map((o) => g?.observe(busy(o)))).toEqual([undefined, undefined, 2]);
    // 4 free in the median window: 4 fits.
    const roomier = createThreadGovernor(8, [1, 2, 4, 8], 8);
    expect([5, 3, 4].map((o) => roomier?.observe(busy(o))).at(-1)).toBe(4);
    const starved = createThreadGovernor(8, [2, 4, 8], 8);
    expect([7.9, 7.9, 7.9].map((o) => starved?.observe(busy(o))).at(-1)).toBe(2);
  });

  it('has nothing to govern when no measured count is below the one serving', () => {
    expect(createThreadGovernor(1, [1, 2], 2)).toBeUndefined();
    expect(createThreadGovernor(2, [2], 2)).toBeUndefined();
    // 0 is every core: 1 is below it.
    expect(createThreadGovernor(0, [0, 1], 2)).toBeDefined();
  });
});
