import { describe, expect, it } from 'vitest';
import type { RowsTensor } from '../contracts/bulk.ts';
import type { OipTensor } from '../contracts/oip.ts';
import { jsonValues } from '../contracts/packed-tensors.ts';
import { encodeHalf } from '../kernel/half-float.ts';
import { splitCsv } from './csv-rows.ts';
import { csvPart, jsonlPart } from './text-part.ts';

/** Today's part text (worker/bulk-part.ts serialisePart): JSON.stringify of one object per row over the JSON values. */
function reference(ids: Array<string | number>, outputs: RowsTensor[]): string {
  const nest = (flat: OipTensor['data'], dims: readonly number[]): unknown => {
    if (dims.length === 0) return flat[0];
    if (dims.length === 1) return flat;
    const [first, ...rest] = dims as [number, ...number[]];
    const step = flat.length / Math.max(1, first);
    return Array.from({ length: first }, (_, i) => nest(flat.slice(i * step, (i + 1) * step), rest));
  };
  const values = outputs.map((t) => jsonValues(t.datatype, t.data));
  const lines = ids.map((id, r) => {
    const row: Record<string, unknown> = { id };
    outputs.forEach((t, i) => {
      const dims = t.shape.slice(1);
      const size = dims.reduce((n, d) => n * d, 1);
      row[t.name] = nest((values[i] as OipTensor['data']).slice(r * size, (r + 1) * size), dims);
    });
    return JSON.stringify(row);
  });
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

const ids = ['a', 7, 'with "quote", comma'];
const f32 = (name: string, shape: number[], values: number[]): RowsTensor => ({
  name,
  datatype: 'FP32',
  shape,
  data: Float32Array.from(values),
});

const outputs: Record<string, RowsTensor> = {
  scalar: f32('score', [3], [0.1, -2.5, 1e-7]),
  vector: f32('probs', [3, 2], [0.1, 0.9, 1 / 3, 2 / 3, -0, 3.4e38]),
  matrix: { name: 'm', datatype: 'FP64', shape: [3, 2, 2], data: Float64Array.from({ length: 12 }, (_, i) => i / 7) },
  int64: {
    name: 'n',
    datatype: 'INT64',
    shape: [3, 2],
    data: BigInt64Array.from([1n, -9007199254740991n, 9007199254740992n, -9223372036854775808n, 0n, 42n]),
  },
  uint64: { name: 'u', datatype: 'UINT64', shape: [3], data: BigUint64Array.from([0n, 18446744073709551615n, 5n]) },
  bool: { name: 'ok', datatype: 'BOOL', shape: [3, 1], data: Uint8Array.from([1, 0, 1]) },
  bytes: { name: 'label', datatype: 'BYTES', shape: [3], data: ['cat', 'say "hi"\n', 'é,ü'] },
  fp16: { name: 'h', datatype: 'FP16', shape: [3, 1], data: Uint16Array.from([encodeHalf(0.5), 0x7c00, 0x7e00]) },
  nonFinite: f32('nf', [3, 2], [Number.NaN, 1, Infinity, -Infinity, 2, 3]),
  int8: { name: 'i8', datatype: 'INT8', shape: [3, 1, 2], data: Int8Array.from([-128, 127, 0, 1, -1, 5]) },
  empty: f32('e', [3, 2, 0], []),
};

describe('jsonlPart', () => {
  it.each(Object.entries(outputs))('prints %s outputs byte for byte as JSON.stringify of each row', (_, t) => {
    expect(jsonlPart(ids, [t]).toString()).toBe(reference(ids, [t]));
  });

  it('prints several outputs in one line, in JSON.stringify key order (integer-like names first, a repeated name once)', () => {
    const all = Object.values(outputs);
    expect(jsonlPart(ids, all).toString()).toBe(reference(ids, all));
    const odd = [f32('23', [3], [1, 2, 3]), f32('score', [3], [4, 5, 6]), f32('0', [3], [7, 8, 9]), f32('score', [3], [0, 0, 0])];
    expect(jsonlPart(ids, odd).toString()).toBe(reference(ids, odd));
    expect(jsonlPart(ids, odd).toString().split('\n')[0]).toBe('{"0":7,"23":1,"id":"a","score":0}');
  });

  it('prints parts larger than one printing block (rows of any width straddle no block)', () => {
    const n = 30_000;
    const many = Array.from({ length: n }, (_, i) => (i % 3 === 0 ? `r${i}` : i));
    const wide = f32(
      'v',
      [n, 3],
      Array.from({ length: 3 * n }, (_, i) => Math.sin(i) * 1e3),
    );
    const ints: RowsTensor = { name: 'k', datatype: 'INT32', shape: [n], data: Int32Array.from({ length: n }, (_, i) => i * 7 - 5) };
    expect(jsonlPart(many, [wide, ints]).toString()).toBe(reference(many, [wide, ints]));
    const lines = csvPart(many, [wide]).toString().split('\n');
    expect(lines[n]).toBe(`${many[n - 1]},${Array.from((wide.data as Float32Array).subarray(3 * n - 3)).join(',')}`);
  });

  it('names the id field idColumn, and writes nothing for no rows', () => {
    expect(jsonlPart([1], [f32('s', [1], [0.5])], 'key').toString()).toBe('{"key":1,"s":0.5}\n');
    expect(jsonlPart([], [f32('s', [0], [])]).byteLength).toBe(0);
  });

  it('throws when an output has more or fewer rows than ids', () => {
    expect(() => jsonlPart(['a', 'b'], [f32('s', [3], [1, 2, 3])])).toThrow('output "s" has 3 rows for 2 ids');
    expect(() => csvPart(['a', 'b'], [f32('s', [1], [1])])).toThrow('output "s" has 1 rows for 2 ids');
  });
});

describe('csvPart', () => {
  it('writes a header of one column per output element and one line per row, flattened row-major', () => {
    const text = csvPart(ids, [outputs.scalar, outputs.vector, outputs.matrix] as RowsTensor[]).toString();
    const lines = text.split('\n');
    expect(lines[0]).toBe('id,score,probs_0,probs_1,m_0,m_1,m_2,m_3');
    expect(lines[1]).toBe(`a,${Math.fround(0.1)},${Math.fround(0.1)},${Math.fround(0.9)},0,${1 / 7},${2 / 7},${3 / 7}`);
    expect(lines).toHaveLength(5);
    expect(lines[4]).toBe('');
  });

  it('prints every datatype so that a CSV reader gets the values back', () => {
    const t = [outputs.int64, outputs.uint64, outputs.bool, outputs.bytes, outputs.fp16, outputs.nonFinite] as RowsTensor[];
    const lines = csvPart(ids, t, 'key').toString().trimEnd().split('\n');
    expect(lines[0]).toBe('key,n_0,n_1,u,ok,label,h,nf_0,nf_1');
    expect(splitCsv(lines[1] as string)).toEqual(['a', '1', '-9007199254740991', '0', 'true', 'cat', '0.5', 'NaN', '1']);
    // A quoted cell may hold a line break (RFC 4180): this row spans two physical lines.
    expect(lines[2]).toBe('7,9007199254740992,-9223372036854775808,18446744073709551615,false,"say ""hi""');
    expect(splitCsv(`${lines[2]}\n${lines[3]}`)).toEqual([
      '7',
      '9007199254740992',
      '-9223372036854775808',
      '18446744073709551615',
      'false',
      'say "hi"\n',
      'Infinity',
      'Infinity',
      '-Infinity',
    ]);
    expect(splitCsv(lines[4] as string)).toEqual(['with "quote", comma', '0', '42', '5', 'true', 'é,ü', 'NaN', '2', '3']);
  });

  it('writes only the header for no rows, and no columns for an empty row', () => {
    expect(csvPart([], [f32('s', [0, 2], [])]).toString()).toBe('id,s_0,s_1\n');
    expect(csvPart(['x'], [f32('e', [1, 0], []), f32('s', [1], [2])]).toString()).toBe('id,s\nx,2\n');
  });
});
