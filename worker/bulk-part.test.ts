import { describe, expect, it } from 'vitest';
import { serialisePart } from './bulk-part.ts';

describe('serialisePart', () => {
  it('writes one line per row, id first, each output as that row nested', () => {
    const text = serialisePart(
      ['a', 7],
      [
        { name: 'score', datatype: 'FP32', shape: [2, 1], data: [0.5, 0.25] },
        { name: 'grid', datatype: 'INT64', shape: [2, 2, 2], data: [1, 2, 3, 4, 5, 6, 7, 8] },
        { name: 'label', datatype: 'BYTES', shape: [2], data: ['x', 'y'] },
      ],
    );
    expect(text.split('\n')).toEqual([
      '{"id":"a","score":[0.5],"grid":[[1,2],[3,4]],"label":"x"}',
      '{"id":7,"score":[0.25],"grid":[[5,6],[7,8]],"label":"y"}',
      '',
    ]);
  });

  it('refuses outputs whose rows do not match the ids', () => {
    expect(() => serialisePart(['a'], [{ name: 's', datatype: 'FP32', shape: [2, 1], data: [1, 2] }])).toThrow(/2 rows for 1 ids/);
  });
});
