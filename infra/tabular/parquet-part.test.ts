import { Readable } from 'node:stream';
import { parquetMetadata, parquetReadObjects, parquetSchema } from 'hyparquet';
import { describe, expect, it } from 'vitest';
import type { RowsTensor } from '../contracts/bulk.ts';
import { readParquetRows } from './parquet-input.ts';
import { parquetPart, parquetPartRows } from './parquet-part.ts';

const readBack = (bytes: Uint8Array) => parquetReadObjects({ file: bytes.slice().buffer as ArrayBuffer });
const leafOf = (bytes: Uint8Array, column: string) => {
  let node = parquetSchema(parquetMetadata(bytes)).children.find((c) => c.element.name === column);
  while (node?.children[0]) node = node.children[0];
  return node?.element;
};

describe('parquetPart', () => {
  it('writes an INT64 id column when every id is an integer, and a scalar column per rank-0 output', async () => {
    const bytes = parquetPart(
      [3, 1, 2],
      [
        { name: 'score', datatype: 'FP32', shape: [3], data: new Float32Array([0.5, 0.25, 0.125]) },
        { name: 'label', datatype: 'INT64', shape: [3], data: new BigInt64Array([7n, -1n, 2n ** 62n]) },
      ],
    );
    expect(await readBack(bytes)).toEqual([
      { id: 3n, score: 0.5, label: 7n },
      { id: 1n, score: 0.25, label: -1n },
      { id: 2n, score: 0.125, label: 2n ** 62n },
    ]);
    expect(leafOf(bytes, 'id')).toMatchObject({ type: 'INT64', repetition_type: 'REQUIRED' });
    expect(leafOf(bytes, 'score')).toMatchObject({ type: 'FLOAT', repetition_type: 'REQUIRED' });
    expect(parquetPartRows(bytes)).toBe(3);
  });

  it('writes STRING ids when any id is not an integer, and LIST columns (nested for rank 2) for rows with dims', async () => {
    const bytes = parquetPart(
      ['a', 2, 2.5],
      [
        { name: 'probs', datatype: 'FP32', shape: [3, 2], data: new Float32Array([0.25, 0.75, 0.5, 0.5, 1, 0]) },
        { name: 'grid', datatype: 'INT32', shape: [3, 2, 1], data: new Int32Array([1, 2, 3, 4, 5, 6]) },
        { name: 'ok', datatype: 'BOOL', shape: [3, 1], data: new Uint8Array([1, 0, 1]) },
        { name: 'text', datatype: 'BYTES', shape: [3], data: ['x', 'é', ''] },
      ],
      'row',
    );
    expect(await readBack(bytes)).toEqual([
      { row: 'a', probs: [0.25, 0.75], grid: [[1], [2]], ok: [true], text: 'x' },
      { row: '2', probs: [0.5, 0.5], grid: [[3], [4]], ok: [false], text: 'é' },
      { row: '2.5', probs: [1, 0], grid: [[5], [6]], ok: [true], text: '' },
    ]);
    expect(leafOf(bytes, 'row')).toMatchObject({ type: 'BYTE_ARRAY', converted_type: 'UTF8' });
    expect(leafOf(bytes, 'probs')).toMatchObject({ name: 'element', type: 'FLOAT' });
  });

  it('keeps each datatype as its Parquet type: FP16 as FLOAT, small integers annotated, UINT64 past 2^63', async () => {
    const outputs: RowsTensor[] = [
      { name: 'h', datatype: 'FP16', shape: [2], data: new Uint16Array([0x3c00, 0xc000]) },
      { name: 'u8', datatype: 'UINT8', shape: [2], data: new Uint8Array([0, 255]) },
      { name: 'i16', datatype: 'INT16', shape: [2], data: new Int16Array([-32768, 5]) },
      { name: 'u32', datatype: 'UINT32', shape: [2], data: new Uint32Array([0, 4_294_967_295]) },
      { name: 'u64', datatype: 'UINT64', shape: [2], data: new BigUint64Array([1n, 2n ** 64n - 1n]) },
      { name: 'd', datatype: 'FP64', shape: [2], data: new Float64Array([Math.PI, -0]) },
    ];
    const bytes = parquetPart([1, 2], outputs);
    const rows = await readBack(bytes);
    expect(rows[0]).toEqual({ id: 1n, h: 1, u8: 0, i16: -32768, u32: 0n, u64: 1n, d: Math.PI });
    expect(rows[1]).toEqual({ id: 2n, h: -2, u8: 255, i16: 5, u32: 4_294_967_295n, u64: 2n ** 64n - 1n, d: -0 });
    expect(leafOf(bytes, 'u8')).toMatchObject({ type: 'INT32', logical_type: { type: 'INTEGER', bitWidth: 8, isSigned: false } });
  });

  it('writes a part of no rows that still has its columns', async () => {
    const bytes = parquetPart([], [{ name: 'score', datatype: 'FP32', shape: [0], data: new Float32Array(0) }]);
    expect(parquetPartRows(bytes)).toBe(0);
    expect(parquetSchema(parquetMetadata(bytes)).children.map((c) => c.element.name)).toEqual(['id', 'score']);
    expect(await readBack(bytes)).toEqual([]);
  });

  it('refuses an output whose rows do not match the ids', () => {
    expect(() => parquetPart([1, 2], [{ name: 'y', datatype: 'FP32', shape: [3], data: new Float32Array(3) }])).toThrow(/3 rows for 2 ids/);
  });

  it("reads back through readParquetRows as the same tensors (a part can be a later run's input)", async () => {
    const probs = new Float32Array([0.1, 0.9, 0.3, 0.7]);
    const bytes = parquetPart(['p', 'q'], [{ name: 'probs', datatype: 'FP32', shape: [2, 2], data: probs }]);
    const store = { getRange: async (_k: string, s: number, e: number) => Readable.from([Buffer.from(bytes.subarray(s, e))]) };
    const rows = await readParquetRows(
      store,
      'part.parquet',
      bytes.length,
      { start: 0, end: 2 },
      [{ name: 'probs', datatype: 'FP32', shape: [-1, 2] }],
      {
        idColumn: 'id',
      },
    );
    expect(rows.ids).toEqual(['p', 'q']);
    expect(rows.groups[0]?.inputs[0]?.data).toEqual(probs);
  });
});
