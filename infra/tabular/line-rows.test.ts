import { describe, expect, it } from 'vitest';
import { type ChunkRows, MAX_CHUNK_BAD_SAMPLES } from '../contracts/bulk.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { encodeHalf } from '../kernel/half-float.ts';
import { splitCsv } from './csv-rows.ts';
import { createLineRows, type LineRowsOptions, type SourceLine } from './line-rows.ts';

const features: TensorSpec[] = [{ name: 'features', datatype: 'FP32', shape: [-1, 3] }];

/** Lines as a chunk starting at byte `start` hands them over (byte offsets counted in UTF-8, LF newlines). */
function toLines(text: string, start = 0): SourceLine[] {
  const out: SourceLine[] = [];
  let byte = start;
  text.split('\n').forEach((t, i, all) => {
    if (i === all.length - 1 && t === '') return;
    out.push({ text: t, byte, line: i + 1 });
    byte += Buffer.byteLength(t) + 1;
  });
  return out;
}

function read(
  text: string,
  format: 'jsonl' | 'csv',
  inputs: TensorSpec[] = features,
  options: Partial<LineRowsOptions> = {},
  batch = 1000,
  start = 0,
): ChunkRows {
  const reader = createLineRows(inputs, format, { idColumn: 'id', skipFirstLineIfHeader: true, ...options });
  const lines = toLines(text, start);
  for (let i = 0; i < lines.length; i += batch) reader.push(lines.slice(i, i + batch));
  return reader.finish();
}

/** The group's rows as plain numbers, row by row. */
function rowsOf(rows: ChunkRows, group = 0, input = 0): unknown[][] {
  const t = rows.groups[group]?.inputs[input];
  if (!t) return [];
  const size = t.shape.slice(1).reduce((n, d) => n * d, 1);
  const data = Array.from(t.data as ArrayLike<unknown>);
  return Array.from({ length: t.shape[0] as number }, (_, r) => data.slice(r * size, (r + 1) * size));
}

const badLines = (rows: ChunkRows) => rows.bad.map((b) => b.line);

describe('createLineRows (JSONL)', () => {
  it('fills good rows and reports each bad line with its number, byte and message, without stopping', () => {
    const text = [
      '{"id":"a","features":[1,2,3]}',
      '{"id":"b","features":[1,2]}', // wrong shape
      'not json',
      '',
      '{"features":[1,2,3]}', // no id
      '{"id":7,"features":[1,"x",3]}', // wrong type
      '{"id":8,"features":[4,5,6],"extra":true}',
      '[1,2,3]',
      '{"id":"c","features":[[1,2],[3]]}', // ragged
      '{"id":"d","features":[1e400,0,0]}', // not finite
    ].join('\n');
    const rows = read(text, 'jsonl');
    expect(rows.ids).toEqual(['a', 8]);
    expect(rows.lines).toBe(10);
    expect(badLines(rows)).toEqual([2, 3, 5, 6, 8, 9, 10]);
    expect(rows.badRows).toBe(7);
    const messages = rows.bad.map((b) => b.message);
    expect(messages[0]).toMatch(/axis 1 must be 3/);
    expect(messages[1]).toMatch(/^not valid JSON/);
    expect(messages[2]).toBe('missing "id" (a non-empty string or a number)');
    expect(messages[3]).toMatch(/data\[1\] must be a finite number for FP32, got "x"/);
    expect(messages[4]).toBe('a line must be a JSON object');
    expect(messages[5]).toBe('input "features": not a rectangular nested array');
    expect(messages[6]).toMatch(/data\[0\] must be a finite number for FP32, got Infinity/);
    expect(rows.bad[1]?.byte).toBe(Buffer.byteLength('{"id":"a","features":[1,2,3]}\n{"id":"b","features":[1,2]}\n'));
    const t = rows.groups[0]?.inputs[0];
    expect(t?.shape).toEqual([2, 3]);
    expect(t?.data).toBeInstanceOf(Float32Array);
    expect(rowsOf(rows)).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(rows.groups[0]?.rows).toEqual([0, 1]);
  });

  it('reads the id from idColumn, and names it when it is missing', () => {
    const rows = read('{"key":"k1","features":[1,2,3]}\n{"id":"x","features":[1,2,3]}\n', 'jsonl', features, { idColumn: 'key' });
    expect(rows.ids).toEqual(['k1']);
    expect(rows.bad[0]?.message).toBe('missing "key" (a non-empty string or a number)');
  });

  it('walks nested rows of any rank into one flat row-major array', () => {
    const image: TensorSpec[] = [{ name: 'img', datatype: 'FP64', shape: [-1, 2, 2, 2] }];
    const rows = read(
      ['{"id":1,"img":[[[1,2],[3,4]],[[5,6],[7,8]]]}', '{"id":2,"img":[[[1,2],[3,4]],[[5,6],[7]]]}', '{"id":3,"img":[[1,2],[3,4]]}'].join(
        '\n',
      ),
      'jsonl',
      image,
    );
    expect(rows.ids).toEqual([1]);
    expect(Array.from(rows.groups[0]?.inputs[0]?.data as Float64Array)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    expect(rows.bad.map((b) => b.message)).toEqual([
      'input "img": not a rectangular nested array',
      'input "img": expected rank 4 (shape [-1, 2, 2, 2]), got rank 3',
    ]);
  });

  it('puts rows of different shapes in separate groups, positions ascending', () => {
    const seq: TensorSpec[] = [{ name: 'seq', datatype: 'INT64', shape: [-1, -1] }];
    const rows = read('{"id":1,"seq":[1,2]}\n{"id":2,"seq":[1,2,3]}\n{"id":3,"seq":[5,6]}\n{"id":4,"seq":[]}\n', 'jsonl', seq);
    expect(rows.ids).toEqual([1, 2, 3, 4]);
    expect(rows.groups.map((g) => [g.rows, g.inputs[0]?.shape])).toEqual([
      [
        [0, 2],
        [2, 2],
      ],
      [[1], [1, 3]],
      [[3], [1, 0]],
    ]);
    expect(Array.from(rows.groups[0]?.inputs[0]?.data as BigInt64Array)).toEqual([1n, 2n, 5n, 6n]);
    expect(rows.bad).toEqual([]);
  });

  it('takes a scalar for a scalar input and for a one-element row', () => {
    const scalar: TensorSpec[] = [{ name: 'x', datatype: 'FP32', shape: [-1] }];
    expect(rowsOf(read('{"id":1,"x":2.5}\n{"id":2,"x":[2.5]}\n', 'jsonl', scalar))).toEqual([[2.5]]);
    const one: TensorSpec[] = [{ name: 'x', datatype: 'INT32', shape: [-1, 1] }];
    const rows = read('{"id":1,"x":7}\n{"id":2,"x":[8]}\n', 'jsonl', one);
    expect(rowsOf(rows)).toEqual([[7], [8]]);
    expect(rows.groups[0]?.inputs[0]?.shape).toEqual([2, 1]);
  });

  it('checks every datatype as a submitted job is checked, 64-bit integers past 2^53 as decimal strings', () => {
    const typed = (datatype: TensorSpec['datatype']): TensorSpec[] => [{ name: 'v', datatype, shape: [-1, 2] }];
    const one = (datatype: TensorSpec['datatype'], values: string[]) =>
      read(values.map((v, i) => `{"id":${i},"v":${v}}`).join('\n'), 'jsonl', typed(datatype));

    const u8 = one('UINT8', ['[0,255]', '[256,0]', '[-1,0]', '[1.5,0]', '["1",0]']);
    expect(rowsOf(u8)).toEqual([[0, 255]]);
    expect(u8.bad.map((b) => b.message)).toEqual([
      'input "v": data[0] must be an integer in [0, 255] for UINT8, got 256',
      'input "v": data[0] must be an integer in [0, 255] for UINT8, got -1',
      'input "v": data[0] must be an integer in [0, 255] for UINT8, got 1.5',
      'input "v": data[0] must be an integer in [0, 255] for UINT8, got "1"',
    ]);
    const i32 = one('INT32', ['[-2147483648,2147483647]', '[2147483648,0]', '[-0,0]']);
    expect(rowsOf(i32)).toEqual([
      [-2147483648, 2147483647],
      [0, 0],
    ]);
    expect(i32.badRows).toBe(1);
    const u32 = one('UINT32', ['[4294967295,0]', '[4294967296,0]']);
    expect(rowsOf(u32)).toEqual([[4294967295, 0]]);

    const i64 = one('INT64', [
      '[9007199254740991,-5]',
      '["9223372036854775807","-9223372036854775808"]',
      '["9223372036854775808",0]',
      '[1e300,0]',
    ]);
    expect(rowsOf(i64)).toEqual([
      [9007199254740991n, -5n],
      [9223372036854775807n, -9223372036854775808n],
    ]);
    expect(i64.bad.map((b) => b.line)).toEqual([3, 4]);
    const u64 = one('UINT64', ['["18446744073709551615",1]', '[-1,0]']);
    expect(rowsOf(u64)).toEqual([[18446744073709551615n, 1n]]);
    expect(u64.bad[0]?.message).toMatch(/UINT64/);

    const bool = one('BOOL', ['[true,false]', '[1,0]', '[2,0]', '["true",0]']);
    expect(rowsOf(bool)).toEqual([
      [1, 0],
      [1, 0],
    ]);
    expect(bool.groups[0]?.inputs[0]?.data).toBeInstanceOf(Uint8Array);
    expect(bool.badRows).toBe(2);

    const half = one('FP16', ['[1.5,-65504]', '[1e6,0]', '[null,0]']);
    // 1e6 is finite but FP16 rounds it to infinity: refused, as for a submitted job.
    expect(rowsOf(half)).toEqual([[encodeHalf(1.5), encodeHalf(-65504)]]);
    expect(half.badRows).toBe(2);
    expect(half.ids).toEqual([0]);
    expect(half.bad[0]?.message).toMatch(/data\[0\] must be a finite number for FP16, got 1000000, which FP16 rounds to Infinity/);

    const bytes = one('BYTES', ['["a","é"]', '[1,"b"]']);
    expect(rowsOf(bytes)).toEqual([['a', 'é']]);
    expect(bytes.bad[0]?.message).toMatch(/must be a string for BYTES/);
  });

  it('fills several inputs, and a row bad in its second input leaves nothing behind', () => {
    const two: TensorSpec[] = [
      { name: 'a', datatype: 'FP32', shape: [-1, 2] },
      { name: 'b', datatype: 'INT32', shape: [-1] },
    ];
    const rows = read('{"id":1,"a":[1,2],"b":3}\n{"id":2,"a":[9,9],"b":"x"}\n{"id":3,"a":[4,5]}\n{"id":4,"a":[6,7],"b":8}\n', 'jsonl', two);
    expect(rows.ids).toEqual([1, 4]);
    expect(rowsOf(rows, 0, 0)).toEqual([
      [1, 2],
      [6, 7],
    ]);
    expect(rowsOf(rows, 0, 1)).toEqual([[3], [8]]);
    expect(rows.bad.map((b) => b.message)).toEqual([
      'input "b": data[0] must be an integer in [-2147483648, 2147483647] for INT32, got "x"',
      'missing input "b"',
    ]);
  });

  it('maps inputs to keys with columns: one key is the row, several are one scalar feature each', () => {
    const two: TensorSpec[] = [
      { name: 'a', datatype: 'FP32', shape: [-1, 2] },
      { name: 'b', datatype: 'FP32', shape: [-1, 3] },
    ];
    const columns = { a: ['vec'], b: ['x', 'y', 'z'] };
    const rows = read(
      '{"id":1,"vec":[1,2],"x":3,"y":4,"z":5}\n{"id":2,"vec":[1,2],"x":3,"z":5}\n{"id":3,"vec":[1,2],"x":3,"y":[4],"z":5}\n',
      'jsonl',
      two,
      {
        columns,
      },
    );
    expect(rows.ids).toEqual([1]);
    expect(rowsOf(rows, 0, 1)).toEqual([[3, 4, 5]]);
    expect(rows.bad.map((b) => b.message)).toEqual(['input "b": missing key "y"', 'input "b": key "y" must be a scalar']);
    expect(() => read('', 'jsonl', two, { columns: { c: ['x'] } })).toThrow(/no input "c"/);
    expect(() => read('', 'jsonl', two, { columns: { b: ['x', 'y'] } })).toThrow(InvalidInputError);
  });

  it('counts every bad row and keeps the first MAX_CHUNK_BAD_SAMPLES', () => {
    const text = Array.from({ length: 30 }, (_, i) => (i % 3 === 0 ? `{"id":${i},"features":[1,2,3]}` : 'nope')).join('\n');
    const rows = read(text, 'jsonl');
    expect(rows.ids).toHaveLength(10);
    expect(rows.badRows).toBe(20);
    const many = read(`${text}\n${text}`, 'jsonl');
    expect(many.badRows).toBe(40);
    expect(many.bad).toHaveLength(MAX_CHUNK_BAD_SAMPLES);
    expect(many.lines).toBe(60);
  });

  it('counts blank lines, reports lines past the limit, strips a BOM at byte 0, and reads the same in any batches', () => {
    const text = '\uFEFF{"id":1,"features":[1,2,3]}\r\n\r\n   \n{"id":2,"features":[4,5,6]}\r\n';
    const lines = toLines(text);
    lines.push({ text: '{"id":3,"feat', byte: 999, line: 5, tooLong: true });
    const reader = createLineRows(features, 'jsonl', { idColumn: 'id', skipFirstLineIfHeader: false, maxLineBytes: 1024 });
    for (const l of lines) reader.push([l]);
    const rows = reader.finish();
    expect(rows.ids).toEqual([1, 2]);
    expect(rows.lines).toBe(5);
    expect(rows.bad).toEqual([{ line: 5, byte: 999, message: 'line longer than 1024 bytes' }]);
    const big = Array.from({ length: 50 }, (_, i) => (i % 7 === 3 ? 'x' : `{"id":${i},"features":[${i},0,1]}`)).join('\n');
    expect(read(big, 'jsonl', features, {}, 3)).toEqual(read(big, 'jsonl'));
  });

  it('grows its typed arrays past their first size without losing a value', () => {
    const n = 5000;
    const text = Array.from({ length: n }, (_, i) => `{"id":${i},"features":[${i},${-i},${i / 4}]}`).join('\n');
    const rows = read(text, 'jsonl', features, {}, 777);
    expect(rows.ids).toHaveLength(n);
    const data = rows.groups[0]?.inputs[0]?.data as Float32Array;
    expect(data).toHaveLength(3 * n);
    expect(Array.from(data.subarray(3 * (n - 1)))).toEqual([n - 1, -(n - 1), (n - 1) / 4]);
    expect(data.every((v, k) => v === [Math.floor(k / 3), -Math.floor(k / 3), Math.floor(k / 3) / 4][k % 3])).toBe(true);
    const words: TensorSpec[] = [{ name: 'w', datatype: 'BYTES', shape: [-1, 2] }];
    const strings = read(Array.from({ length: n }, (_, i) => `{"id":${i},"w":["a${i}","b${i}"]}`).join('\n'), 'jsonl', words);
    const labels = strings.groups[0]?.inputs[0]?.data as string[];
    expect(labels.slice(-2)).toEqual([`a${n - 1}`, `b${n - 1}`]);
  });

  it('has no group when no row is good', () => {
    const rows = read('{"id":1,"features":[1]}\n', 'jsonl');
    expect(rows.groups).toEqual([]);
    expect(rows.ids).toEqual([]);
  });
});

describe('createLineRows (CSV)', () => {
  it('skips the header at byte 0, reads flattened rows, reports wrong column counts and non-numbers', () => {
    const text =
      'id,f1,f2,f3\r\nr1,1,2,3\r\nr2,1,2\r\n"r,3",4,5,6\r\nr4,1,abc,3\r\nr5,1,,3\r\nr6,1,2,"3"\r\nr7,1,2,3,4\r\n,1,2,3\r\nr9,1,"2\r\n';
    const rows = read(text, 'csv');
    expect(rows.ids).toEqual(['r1', 'r,3', 'r6']);
    expect(rowsOf(rows)).toEqual([
      [1, 2, 3],
      [4, 5, 6],
      [1, 2, 3],
    ]);
    expect(badLines(rows)).toEqual([3, 5, 6, 8, 9, 10]);
    expect(rows.bad.map((b) => b.message)).toEqual([
      'expected 4 columns (id + 3 values), got 3',
      'column 3: "abc" is not a FP32 value',
      'column 3: "" is not a FP32 value',
      'expected 4 columns (id + 3 values), got 5',
      'missing "id" (the first column)',
      'unbalanced quotes',
    ]);
    expect(rows.lines).toBe(10);
  });

  it('reads the first line as a row when the chunk does not start at byte 0 or is told not to skip it', () => {
    const rows = read('id,f1,f2,f3\nr1,1,2,3\n', 'csv', features, { skipFirstLineIfHeader: false });
    expect(rows.ids).toEqual(['r1']);
    expect(rows.bad[0]?.message).toBe('column 2: "f1" is not a FP32 value');
    const header = ['id', 'f1', 'f2', 'f3'];
    const later = read('r0,0,0,0\nr1,1,2,3\n', 'csv', features, { header }, 1000, 4096);
    expect(later.ids).toEqual(['r0', 'r1']);
    expect(read('id,f1,f2,f3\nr1,1,2,3\n', 'csv', features, { header }).ids).toEqual(['r1']);
  });

  it('takes one dynamic dimension from the column count, rows of other widths in their own group', () => {
    const seq: TensorSpec[] = [{ name: 'seq', datatype: 'FP32', shape: [-1, -1] }];
    const rows = read('a,1,2\nb,3,4,5\nc,6,7\n', 'csv', seq);
    expect(rows.groups.map((g) => [g.rows, g.inputs[0]?.shape])).toEqual([
      [
        [0, 2],
        [2, 2],
      ],
      [[1], [1, 3]],
    ]);
    const two: TensorSpec[] = [{ name: 'm', datatype: 'FP32', shape: [-1, -1, -1] }];
    expect(() => read('a,1\n', 'csv', two)).toThrow(/several dynamic dimensions/);
  });

  it('converts cells per datatype as today: BOOL words, BYTES as is, 64-bit integers past 2^53 exactly', () => {
    const typed = (datatype: TensorSpec['datatype']): TensorSpec[] => [{ name: 'v', datatype, shape: [-1, 2] }];
    expect(rowsOf(read('a,true,0\nb,1,false\nc,yes,1\n', 'csv', typed('BOOL')))).toEqual([
      [1, 0],
      [1, 0],
    ]);
    expect(rowsOf(read('a, x ,"y,z"\r\nb,"",q\r\n', 'csv', typed('BYTES')))).toEqual([
      [' x ', 'y,z'],
      ['', 'q'],
    ]);
    const i64 = read('a,9223372036854775807,-3\nb,9223372036854775808,0\nc,0x10,1\n', 'csv', typed('INT64'));
    expect(rowsOf(i64)).toEqual([
      [9223372036854775807n, -3n],
      [16n, 1n],
    ]);
    expect(i64.bad[0]?.message).toMatch(/INT64/);
    const ints = read('a, 7 ,1e2\nb,1.5,0\nc,Infinity,0\nd,NaN,0\n', 'csv', typed('INT16'));
    expect(rowsOf(ints)).toEqual([[7, 100]]);
    expect(ints.badRows).toBe(3);
  });

  it('maps header columns by name: the id by idColumn, inputs by columns, by name, or every other column', () => {
    const header = ['x', 'Key', 'y', 'z'];
    const rows = read('x,Key,y,z\n1,k1,2,3\n4,k2,5,6\n', 'csv', features, { header, idColumn: 'key' });
    expect(rows.ids).toEqual(['k1', 'k2']);
    expect(rowsOf(rows)).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    const chosen = read('x,Key,y,z\n1,k1,2,3\n', 'csv', [{ name: 'features', datatype: 'FP32', shape: [-1, 2] }], {
      header,
      idColumn: 'key',
      columns: { features: ['z', 'x'] },
    });
    expect(rowsOf(chosen)).toEqual([[3, 1]]);
    const two: TensorSpec[] = [
      { name: 'a', datatype: 'FP32', shape: [-1, 1] },
      { name: 'b', datatype: 'INT32', shape: [-1] },
    ];
    const named = read('id,b,a\nr1,3,0.5\nr2,4\n', 'csv', two, { header: ['id', 'b', 'a'] });
    expect(named.ids).toEqual(['r1']);
    expect(rowsOf(named, 0, 0)).toEqual([[0.5]]);
    expect(rowsOf(named, 0, 1)).toEqual([[3]]);
    expect(named.bad[0]?.message).toBe('expected 3 columns (as the header), got 2');
  });

  it('reads a header whose columns after the id are the features like a headerless file, checking the width', () => {
    const rows = read('id,f1,f2,f3\nr1,1,2,3\nr2,1,2,3,4\n', 'csv', [{ name: 'v', datatype: 'FP32', shape: [-1, -1] }], {
      header: ['id', 'f1', 'f2', 'f3'],
    });
    expect(rows.ids).toEqual(['r1']);
    expect(rows.bad[0]?.message).toBe('expected 4 columns (as the header), got 5');
    expect(rows.groups[0]?.inputs[0]?.shape).toEqual([1, 3]);
  });

  it('refuses mappings that would make every row bad', () => {
    const two: TensorSpec[] = [
      { name: 'a', datatype: 'FP32', shape: [-1, 1] },
      { name: 'b', datatype: 'FP32', shape: [-1, 1] },
    ];
    expect(() => read('x,1,2\n', 'csv', two)).toThrow(/single-input/);
    expect(() => read('', 'csv', two, { header: ['id', 'a', 'c'] })).toThrow(/no column for "b"/);
    expect(() => read('', 'csv', features, { header: ['id', 'a'], columns: { features: ['q'] } })).toThrow(
      /column "q" is not in the CSV header/,
    );
    expect(() => read('', 'csv', features, { columns: { features: ['q'] } })).toThrow(/no header/);
    expect(() => read('', 'csv', features, { header: ['id', 'a', 'b'] })).toThrow(/cannot be filled/);
    let error: unknown;
    try {
      read('', 'csv', two);
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(InvalidInputError);
  });

  it('splits quoted fields', () => {
    expect(splitCsv('a,"b,c","d ""e"""')).toEqual(['a', 'b,c', 'd "e"']);
    expect(splitCsv('a,"b')).toBeUndefined();
    expect(splitCsv('a,,b')).toEqual(['a', '', 'b']);
  });
});
