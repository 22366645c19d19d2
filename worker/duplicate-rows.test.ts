// Which rows of a batch are identical: across every input, byte for byte, whatever the hash says.
import { describe, expect, it } from 'vitest';
import { findDuplicateRows } from './duplicate-rows.ts';
import type { EngineTensor } from './engine/engine.ts';

const f32 = (rows: number[][]): EngineTensor => ({
  type: 'float32',
  dims: [rows.length, rows[0]?.length ?? 0],
  data: Float32Array.from(rows.flat()),
});
const u8 = (rows: number[][]): EngineTensor => ({
  type: 'uint8',
  dims: [rows.length, rows[0]?.length ?? 0],
  data: Uint8Array.from(rows.flat()),
});

describe('findDuplicateRows', () => {
  it('groups rows equal in every input and maps each row to its group', () => {
    const x = f32([
      [1, 2],
      [3, 4],
      [1, 2],
      [1, 2],
      [3, 4],
      [5, 6],
    ]);
    expect(findDuplicateRows([x], 6)).toEqual({ unique: [0, 1, 5], sourceOf: Int32Array.from([0, 1, 0, 0, 1, 2]) });
  });

  it('keeps rows apart that agree in one input but not in another', () => {
    const x = f32([
      [1, 2],
      [1, 2],
      [1, 2],
    ]);
    const ids: EngineTensor = { type: 'int64', dims: [3, 1], data: new BigInt64Array([7n, 8n, 7n]) };
    expect(findDuplicateRows([x, ids], 3)).toEqual({ unique: [0, 1], sourceOf: Int32Array.from([0, 1, 0]) });
  });

  it('compares bytes, not values: -0 and 0 stay apart, identical NaN bits merge', () => {
    const x = f32([[0], [-0], [Number.NaN], [Number.NaN]]);
    expect(findDuplicateRows([x], 4).unique).toEqual([0, 1, 2]);
  });

  it('handles rows that are not a whole number of 32-bit words (3-byte rows)', () => {
    const mask = u8([
      [1, 0, 1],
      [1, 0, 1],
      [0, 0, 1],
      [1, 0, 1],
    ]);
    expect(findDuplicateRows([mask], 4)).toEqual({ unique: [0, 2], sourceOf: Int32Array.from([0, 0, 1, 0]) });
  });

  it('works on a view into a larger buffer at an odd offset', () => {
    const backing = new Uint8Array([9, 1, 2, 1, 2, 3, 4]);
    const view: EngineTensor = { type: 'uint8', dims: [3, 2], data: new Uint8Array(backing.buffer, 1, 6) };
    expect(findDuplicateRows([view], 3).unique).toEqual([0, 2]);
  });

  it('compares strings element by element (["ab", ""] is not ["a", "b"])', () => {
    const s: EngineTensor = { type: 'string', dims: [3, 2], data: ['ab', '', 'a', 'b', 'ab', ''] };
    expect(findDuplicateRows([s], 3)).toEqual({ unique: [0, 1], sourceOf: Int32Array.from([0, 1, 0]) });
  });

  it('never merges different rows when every hash collides', () => {
    const x = f32([
      [1, 2],
      [3, 4],
      [1, 2],
      [5, 6],
      [3, 4],
    ]);
    const collide = () => 42;
    expect(findDuplicateRows([x], 5, collide)).toEqual({ unique: [0, 1, 3], sourceOf: Int32Array.from([0, 1, 0, 2, 1]) });
  });
});
