import { describe, expect, it } from 'vitest';
import { modelShape, rowShape, rowsAlike, toModelLayout, toRowLayout } from './batch-axes.ts';

describe('batch axes', () => {
  it('maps shapes between the model layout and the row layout', () => {
    expect(modelShape([-1, 2, 128], 1)).toEqual([2, -1, 128]);
    expect(modelShape([-1, 2, 128], 2)).toEqual([2, 128, -1]);
    expect(modelShape([-1], 'none')).toEqual([]);
    expect(modelShape([-1, 3, 4], 'none')).toEqual([3, 4]);
    expect(modelShape([-1, 5], undefined)).toEqual([-1, 5]);
    expect(rowShape([2, 7, 128], 1, 7)).toEqual([7, 2, 128]);
    expect(rowShape([], 'none', 3)).toEqual([3]);
    expect(rowShape([7, 5], 0, 7)).toEqual([7, 5]);
  });

  it('moves a middle axis to the front and back, for typed arrays and plain arrays', () => {
    // state [2, 3, 2] (layers, rows, hidden): element = 100·layer + 10·row + hidden
    const shape = [2, 3, 2];
    const model = Float32Array.from({ length: 12 }, (_, i) => 100 * Math.floor(i / 6) + 10 * Math.floor((i % 6) / 2) + (i % 2));
    const rows = toRowLayout(model, shape, 1, 3);
    expect(rows).toBeInstanceOf(Float32Array);
    // row r: [layer 0 hidden 0, layer 0 hidden 1, layer 1 hidden 0, layer 1 hidden 1]
    expect(Array.from(rows)).toEqual([0, 1, 100, 101, 10, 11, 110, 111, 20, 21, 120, 121]);
    expect(Array.from(toModelLayout(rows, [3, 2, 2], 1))).toEqual(Array.from(model));
    const plain = Array.from(model, String);
    expect(toModelLayout(toRowLayout(plain, shape, 1, 3), [3, 2, 2], 1)).toEqual(plain);
  });

  it('moves the last axis', () => {
    const model = BigInt64Array.from([1n, 2n, 3n, 4n, 5n, 6n]); // [2, 3], rows on axis 1
    const rows = toRowLayout(model, [2, 3], 1, 3);
    expect(Array.from(rows)).toEqual([1n, 4n, 2n, 5n, 3n, 6n]);
    expect(Array.from(toModelLayout(rows, [3, 2], 1))).toEqual([1n, 2n, 3n, 4n, 5n, 6n]);
  });

  it('repeats a tensor with no batch axis once a row, and takes it back once', () => {
    const sr = BigInt64Array.from([16_000n]);
    const rows = toRowLayout(sr, [], 'none', 3);
    expect(Array.from(rows)).toEqual([16_000n, 16_000n, 16_000n]);
    expect(rowsAlike(rows, 3)).toBe(true);
    expect(Array.from(toModelLayout(rows, [3], 'none'))).toEqual([16_000n]);
    const fixed = [1, 2, 3, 4];
    expect(toRowLayout(fixed, [2, 2], 'none', 2)).toEqual([1, 2, 3, 4, 1, 2, 3, 4]);
    expect(rowsAlike([1, 2, 1, 3], 2)).toBe(false);
  });

  it('leaves axis 0 alone', () => {
    const data = [1, 2, 3];
    expect(toRowLayout(data, [3], 0, 3)).toBe(data);
    expect(toModelLayout(data, [3], undefined)).toBe(data);
  });
});
