import { describe, expect, it } from 'vitest';
import { bestCellAt, cellAt, type RawCell } from './raw-ort.ts';

const cell = (threads: number, batch: number, rowsPerS: number): RawCell => ({ threads, batch, rowsPerS, p50Ms: 1 });
const cells = [cell(1, 1, 100), cell(1, 128, 400), cell(2, 1, 150), cell(2, 128, 700)];

describe('bestCellAt', () => {
  it('is the best cell at the given thread count or fewer', () => {
    expect(bestCellAt({ cells }, 1)).toEqual(cell(1, 128, 400));
    expect(bestCellAt({ cells }, 2)).toEqual(cell(2, 128, 700));
  });

  it('takes any thread count for 0 (unknown), and nothing below the smallest measured', () => {
    expect(bestCellAt({ cells }, 0)).toEqual(cell(2, 128, 700));
    expect(bestCellAt({ cells: cells.filter((c) => c.threads === 2) }, 1)).toBeUndefined();
  });
});

describe('cellAt', () => {
  it('finds the measured cell', () => {
    expect(cellAt({ cells }, 2, 1)).toEqual(cell(2, 1, 150));
    expect(cellAt({ cells }, 3, 1)).toBeUndefined();
  });
});
