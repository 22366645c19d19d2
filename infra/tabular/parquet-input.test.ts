import { Readable } from 'node:stream';
import { parquetMetadata, type SchemaElement } from 'hyparquet';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import type { ChunkRows } from '../contracts/bulk.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { readParquetRows } from './parquet-input.ts';
import { MAX_UNINDEXED_PIECES, parquetLayout, planParquetChunks } from './parquet-layout.ts';
import type { InputSpec } from './parquet-mapping.ts';

type Columns = Parameters<typeof parquetWriteBuffer>[0]['columnData'];

/** An object store of one object that records the byte ranges asked for (the narrow interface's fake). */
function memoryStore(bytes: Uint8Array) {
  const gets: Array<[number, number]> = [];
  return {
    gets,
    async getRange(_key: string, start: number, end: number) {
      gets.push([start, end]);
      return Readable.from([Buffer.from(bytes.subarray(start, Math.min(end, bytes.length)))]);
    },
  };
}

function file(columnData: Columns, options: { rowGroupSize?: number; pageSize?: number } = {}): Uint8Array {
  return new Uint8Array(
    parquetWriteBuffer({
      columnData,
      rowGroupSize: options.rowGroupSize ?? 1000,
      ...(options.pageSize ? { pageSize: options.pageSize } : {}),
    }),
  );
}

/** A file of an id column and one LIST column (`depth` deep, FLOAT leaves, nulls allowed at every level). */
function listFile(
  idName: string,
  ids: Array<string | number>,
  name: string,
  depth: number,
  rows: unknown[],
  options: { rowGroupSize?: number; pageSize?: number } = {},
): Uint8Array {
  const schema: SchemaElement[] = [{ name: 'root', num_children: 2 }];
  schema.push(
    typeof ids[0] === 'string'
      ? { name: idName, type: 'BYTE_ARRAY', converted_type: 'UTF8', repetition_type: 'REQUIRED' }
      : { name: idName, type: 'INT64', repetition_type: 'REQUIRED' },
  );
  for (let d = 0; d < depth; d++) {
    schema.push(
      { name: d === 0 ? name : 'element', repetition_type: 'OPTIONAL', converted_type: 'LIST', num_children: 1 },
      { name: 'list', repetition_type: 'REPEATED', num_children: 1 },
    );
  }
  schema.push({ name: 'element', type: 'FLOAT', repetition_type: 'OPTIONAL' });
  const idData = typeof ids[0] === 'string' ? ids : BigInt64Array.from(ids as number[], BigInt);
  const columnData = [
    { name: idName, data: idData },
    { name, data: rows },
  ];
  return new Uint8Array(parquetWriteBuffer({ schema, columnData, ...options }));
}

async function read(
  bytes: Uint8Array,
  inputs: InputSpec[],
  range?: { start: number; end: number },
  options: { columns?: Record<string, string[]>; idColumn?: string } = {},
) {
  const store = memoryStore(bytes);
  const rows = await readParquetRows(store, 'in/x.parquet', bytes.length, range ?? { start: 0, end: 1e9 }, inputs, {
    idColumn: options.idColumn ?? 'id',
    ...(options.columns ? { columns: options.columns } : {}),
  });
  return { rows, gets: store.gets };
}

const fp32 = (name: string, ...dims: number[]): InputSpec => ({ name, datatype: 'FP32', shape: [-1, ...dims] });
const plain = (t: ChunkRows) =>
  t.groups.map((g) => ({ rows: g.rows, inputs: g.inputs.map((i) => ({ ...i, data: Array.from(i.data as ArrayLike<unknown>) })) }));

describe('planParquetChunks', () => {
  const groups = (...rows: number[]) => {
    const starts = rows.map((_, i) => rows.slice(0, i).reduce((a, b) => a + b, 0));
    return { rowGroups: rows.map((r, i) => ({ start: starts[i] as number, rows: r, indexed: true })) };
  };

  it('keeps a group that fits whole, merges small neighbours up to chunkRows, splits a big one evenly', () => {
    expect(planParquetChunks(groups(10, 10, 10, 25, 95, 3), 30)).toEqual([
      { start: 0, end: 30 },
      { start: 30, end: 55 },
      { start: 55, end: 78 },
      { start: 78, end: 102 },
      { start: 102, end: 126 },
      { start: 126, end: 150 },
      { start: 150, end: 153 },
    ]);
  });

  it('cuts a group without an offset index in at most MAX_UNINDEXED_PIECES (each piece reads the whole group)', () => {
    const layout = {
      rowGroups: [
        { start: 0, rows: 122_880, indexed: false },
        { start: 122_880, rows: 5000, indexed: true },
      ],
    };
    expect(planParquetChunks(layout, 1000)).toEqual([
      { start: 0, end: 30_720 },
      { start: 30_720, end: 61_440 },
      { start: 61_440, end: 92_160 },
      { start: 92_160, end: 122_880 },
      ...Array.from({ length: 5 }, (_, k) => ({ start: 122_880 + k * 1000, end: 122_880 + (k + 1) * 1000 })),
    ]);
    expect(MAX_UNINDEXED_PIECES).toBe(4);
  });

  it('covers every row exactly once, in order, with no range over chunkRows', () => {
    for (const chunkRows of [1, 7, 64, 1000]) {
      const layout = groups(0, 5, 130, 1, 1, 64, 65, 2000, 3);
      const plan = planParquetChunks(layout, chunkRows);
      let at = 0;
      for (const r of plan) {
        expect(r.start).toBe(at);
        expect(r.end - r.start).toBeGreaterThan(0);
        expect(r.end - r.start).toBeLessThanOrEqual(chunkRows);
        at = r.end;
      }
      expect(at).toBe(2269);
      // A group that fits is never cut: no boundary falls strictly inside it.
      for (const g of layout.rowGroups.filter((g) => g.rows <= chunkRows)) {
        expect(plan.some((r) => r.start > g.start && r.start < g.start + g.rows)).toBe(false);
      }
    }
  });
});

describe('parquetLayout', () => {
  it('reads rows, row groups and columns from the footer alone', async () => {
    const n = 2500;
    const bytes = file(
      [
        { name: 'id', data: Array.from({ length: n }, (_, i) => `r${i}`), type: 'STRING', nullable: false },
        { name: 'x', data: new Float32Array(n), type: 'FLOAT', nullable: false },
        { name: 'when', data: Array.from({ length: n }, () => new Date(0)), type: 'TIMESTAMP' },
      ],
      { rowGroupSize: 1000 },
    );
    const store = memoryStore(bytes);
    const layout = await parquetLayout(store, 'k', bytes.length);
    expect(layout.rows).toBe(n);
    expect(layout.rowGroups).toEqual([
      { start: 0, rows: 1000, indexed: true },
      { start: 1000, rows: 1000, indexed: true },
      { start: 2000, rows: 500, indexed: true },
    ]);
    expect(layout.columns).toEqual([
      { name: 'id', type: 'BYTE_ARRAY', logicalType: 'UTF8', listDepth: 0, numeric: false },
      { name: 'x', type: 'FLOAT', listDepth: 0, numeric: true },
      { name: 'when', type: 'INT64', logicalType: 'TIMESTAMP_MILLIS', listDepth: 0, numeric: false },
    ]);
    // Only the file's tail was read.
    expect(store.gets.every(([s]) => s >= bytes.length - 64 * 1024)).toBe(true);
  });

  it('refuses an object that is not Parquet with invalid_parquet', async () => {
    const bytes = new TextEncoder().encode('{"id":1}\n'.repeat(20));
    const err = await parquetLayout(memoryStore(bytes), 'in/a.parquet', bytes.length).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).code).toBe('invalid_parquet');
    expect((err as InvalidInputError).message).toContain('in/a.parquet');
  });
});

describe('readParquetRows: columns to inputs', () => {
  const n = 4;
  const ids = [10, 11, 12, 13];
  const base: Columns = [
    { name: 'label', data: ['a', 'b', 'c', 'd'], type: 'STRING' },
    { name: 'f0', data: new Float64Array([0.5, 1.5, 2.5, 3.5]), type: 'DOUBLE', nullable: false },
    { name: 'id', data: BigInt64Array.from(ids, BigInt), type: 'INT64', nullable: false },
    {
      name: 'vec',
      data: [
        [1, 2],
        [3, 4],
        [5, 6],
        [7, 8],
      ],
      type: 'JSON',
    },
    { name: 'f1', data: Int32Array.from([1, 2, 3, 4]), type: 'INT32', nullable: false },
  ];

  it('a single-input model without a column of its name takes every numeric column but the id, in file order', async () => {
    const { rows } = await read(file(base.filter((c) => c.name !== 'vec')), [fp32('input', 2)]);
    expect(rows.ids).toEqual(ids);
    expect(rows.lines).toBe(n);
    expect(plain(rows)).toEqual([
      { rows: [0, 1, 2, 3], inputs: [{ name: 'input', datatype: 'FP32', shape: [4, 2], data: [0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4] }] },
    ]);
    expect(rows.groups[0]?.inputs[0]?.data).toBeInstanceOf(Float32Array);
  });

  it('explicit columns override, in the order given; one column fills a one-element row', async () => {
    const bytes = file(base.filter((c) => c.name !== 'vec'));
    const { rows } = await read(bytes, [fp32('a', 2), { name: 'b', datatype: 'INT64', shape: [-1, 1] }], undefined, {
      columns: { a: ['f1', 'f0'], b: ['f1'] },
    });
    const [a, b] = rows.groups[0]?.inputs ?? [];
    expect(Array.from(a?.data as Float32Array)).toEqual([1, 0.5, 2, 1.5, 3, 2.5, 4, 3.5]);
    expect(b?.data).toEqual(new BigInt64Array([1n, 2n, 3n, 4n]));
    expect(b?.shape).toEqual([4, 1]);
  });

  it('a list column named like the input is its rows (nested lists for rank 2); a string id column gives string ids', async () => {
    const bytes = listFile('key', ['p', 'q'], 'x', 2, [
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
      [
        [7, 8, 9],
        [10, 11, 12],
      ],
    ]);
    const { rows } = await read(bytes, [fp32('x', 2, 3)], undefined, { idColumn: 'key' });
    expect(rows.ids).toEqual(['p', 'q']);
    expect(plain(rows)).toEqual([
      { rows: [0, 1], inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2, 3], data: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12] }] },
    ]);
    // One flat list may also fill a rank-2 row, its dynamic dim taken from the length.
    const flat = listFile('key', ['p'], 'x', 1, [[1, 2, 3, 4, 5, 6]]);
    const f = await read(flat, [fp32('x', -1, 3)], undefined, { idColumn: 'key' });
    expect(f.rows.groups[0]?.inputs[0]?.shape).toEqual([1, 2, 3]);
  });

  it('rows of different dynamic dims go to separate groups; a wrong length, a null list or a null element is a bad row', async () => {
    const bytes = listFile('id', [1, 2, 3, 4, 5, 6, 7], 'x', 1, [[1, 2], [3, 4, 5], [6, 7], null, [8, null], [9, 10, 11], [12]]);
    const dynamic = await read(bytes, [fp32('x', -1)]);
    expect(dynamic.rows.ids).toEqual([1, 2, 3, 6, 7]);
    expect(plain(dynamic.rows)).toEqual([
      { rows: [0, 2], inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2], data: [1, 2, 6, 7] }] },
      { rows: [1, 3], inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 3], data: [3, 4, 5, 9, 10, 11] }] },
      { rows: [4], inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], data: [12] }] },
    ]);
    expect(dynamic.rows.bad).toEqual([
      { line: 4, message: 'column "x": a null or empty list, or a null element' },
      { line: 5, message: 'column "x": a null or empty list, or a null element' },
    ]);
    const fixed = await read(bytes, [fp32('x', 2)]);
    expect(fixed.rows.ids).toEqual([1, 3]);
    expect(fixed.rows.bad.find((b) => b.line === 2)?.message).toBe('column "x": a row of [3] does not fit input "x" [2]');
  });

  it('a missing column fails the file, naming it and the columns the file has', async () => {
    const bytes = file(base);
    const err = await read(bytes, [fp32('x', 2), fp32('y', 2)]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).code).toBe('missing_columns');
    expect((err as InvalidInputError).message).toBe(
      'in/x.parquet: no column "x" for input "x"; the file has columns "label", "f0", "id", "vec", "f1"',
    );
    const named = await read(bytes, [fp32('x', 2)], undefined, { columns: { x: ['f0', 'nope'] } }).catch((e: unknown) => e);
    expect((named as Error).message).toContain('no column "nope" for input "x"');
    const noId = await read(bytes, [fp32('x', 2)], undefined, { idColumn: 'row_id' }).catch((e: unknown) => e);
    expect((noId as Error).message).toContain('no id column "row_id"');
  });

  it("scalar columns that cannot fill the input's row fail the file", async () => {
    const err = await read(file(base.filter((c) => c.name !== 'vec')), [fp32('input', 3)]).catch((e: unknown) => e);
    expect((err as InvalidInputError).code).toBe('column_shape');
  });
});

describe('readParquetRows: bad rows', () => {
  it('a null, a NaN, an out-of-range value or a bad id makes that row bad, with its 1-based row in the file', async () => {
    const n = 8;
    const bytes = file(
      [
        { name: 'id', data: ['a', 'b', null, 'd', '', 'f', 'g', 'h'], type: 'STRING' },
        { name: 'f0', data: [1, 2, 3, null, 5, 6, 7, 8], type: 'DOUBLE' },
        { name: 'f1', data: [1, 2, 3, 4, 5, Number.NaN, 300, 1e300], type: 'DOUBLE' },
      ],
      { rowGroupSize: n },
    );
    const fp = await read(bytes, [fp32('input', 2)]);
    expect(fp.rows.ids).toEqual(['a', 'b', 'g']);
    expect(fp.rows.badRows).toBe(5);
    expect(fp.rows.bad).toEqual([
      { line: 3, message: 'missing "id" (a non-empty string or a number)' },
      { line: 5, message: 'missing "id" (a non-empty string or a number)' },
      { line: 4, message: 'column "f0": must be a finite number for FP32, got null' },
      { line: 6, message: 'column "f1": must be a finite number for FP32, got NaN' },
      {
        line: 8,
        message:
          'column "f1": must be a finite number for FP32, got 1e+300, which FP32 rounds to Infinity (|x| must be below 3.4028235677973366e+38)',
      },
    ]);
    expect(plain(fp.rows)[0]?.inputs[0]?.data).toEqual([1, 1, 2, 2, 7, 300]);

    // The same file into INT8 from row 2 on: 300 is out of range, NaN is not an integer.
    const i8 = await read(bytes, [{ name: 'input', datatype: 'INT8', shape: [-1, 2] }], { start: 1, end: 8 });
    expect(i8.rows.lines).toBe(7);
    expect(i8.rows.ids).toEqual(['b']);
    expect(i8.rows.bad.map((b) => b.line).sort()).toEqual([3, 4, 5, 6, 7, 8]);
    expect(i8.rows.bad.find((b) => b.line === 7)?.message).toBe('column "f1": must be an integer in [-128, 127] for INT8, got 300');
    expect(i8.rows.groups[0]?.inputs[0]?.data).toEqual(new Int8Array([2, 2]));
  });

  it('BigInt ids stay numbers while safe and become decimal strings beyond', async () => {
    const big = 2n ** 60n;
    const bytes = file([
      { name: 'id', data: new BigInt64Array([1n, big]), type: 'INT64', nullable: false },
      { name: 'x', data: new Float32Array([1, 2]), type: 'FLOAT', nullable: false },
    ]);
    const { rows } = await read(bytes, [fp32('x', 1)]);
    expect(rows.ids).toEqual([1, big.toString()]);
  });
});

describe('readParquetRows: ranges', () => {
  const n = 9000;
  const bytes = file(
    [
      { name: 'id', data: Int32Array.from({ length: n }, (_, i) => i), type: 'INT32', nullable: false },
      { name: 'a', data: Float32Array.from({ length: n }, (_, i) => i / 2), type: 'FLOAT', nullable: false },
      { name: 'b', data: Array.from({ length: n }, (_, i) => (i % 1500 === 7 ? null : -i)), type: 'DOUBLE' },
    ],
    { rowGroupSize: 3000, pageSize: 2048 },
  );

  it('chunks across row groups and pages give every row once, with its own values', async () => {
    const layout = await parquetLayout(memoryStore(bytes), 'k', bytes.length);
    expect(layout.rowGroups.length).toBe(3);
    const seen: number[] = [];
    const badLines: number[] = [];
    for (const range of planParquetChunks(layout, 700)) {
      const { rows } = await read(bytes, [fp32('input', 2)], range);
      const data = rows.groups[0]?.inputs[0]?.data as Float32Array;
      rows.ids.forEach((id, i) => {
        expect([data[2 * i], data[2 * i + 1]]).toEqual([(id as number) / 2, -(id as number)]);
        seen.push(id as number);
      });
      badLines.push(...rows.bad.map((b) => b.line));
      expect(rows.lines).toBe(range.end - range.start);
    }
    const nulls = Array.from({ length: 6 }, (_, k) => k * 1500 + 7);
    expect(seen).toEqual(Array.from({ length: n }, (_, i) => i).filter((i) => !nulls.includes(i)));
    expect(badLines).toEqual(nulls.map((i) => i + 1));
  });

  it('a list column across row groups and pages: every row once, its own list, chunks starting mid-group', async () => {
    const m = 3000;
    const list = (i: number) => Array.from({ length: 1 + (i % 3) }, (_, k) => i + k / 4);
    const lists = listFile(
      'id',
      Array.from({ length: m }, (_, i) => i),
      'x',
      1,
      Array.from({ length: m }, (_, i) => list(i)),
      {
        rowGroupSize: 1000,
        pageSize: 512,
      },
    );
    const layout = await parquetLayout(memoryStore(lists), 'k', lists.length);
    const seen = new Map<number, number[]>();
    for (const range of planParquetChunks(layout, 300)) {
      const { rows } = await read(lists, [fp32('x', -1)], range);
      for (const g of rows.groups) {
        const t = g.inputs[0] as { shape: number[]; data: Float32Array };
        const size = t.shape[1] as number;
        g.rows.forEach((pos, i) => {
          seen.set(rows.ids[pos] as number, Array.from(t.data.subarray(i * size, (i + 1) * size)));
        });
      }
    }
    expect(seen.size).toBe(m);
    for (let i = 0; i < m; i++) expect(seen.get(i)).toEqual(list(i));
  });

  it('a ragged rank-2 row is bad; rectangular ones of other shapes form their own groups', async () => {
    const bytes = listFile('id', [1, 2, 3], 'x', 2, [[[1, 2], [3]], [[1], [2], [3]], [[4, 5, 6]]]);
    const { rows } = await read(bytes, [fp32('x', -1, -1)]);
    expect(rows.bad).toEqual([{ line: 1, message: 'column "x": not a rectangular nested list' }]);
    expect(rows.groups.map((g) => g.inputs[0]?.shape)).toEqual([
      [1, 3, 1],
      [1, 1, 3],
    ]);
  });

  it('reads only the pages of its rows: no bytes of other groups, and of its own group only its pages', async () => {
    // Column chunks (30,000 rows) far bigger than the gap reads are merged across, pages of 2 KiB.
    const m = 60_000;
    const big = file(
      [
        { name: 'id', data: Int32Array.from({ length: m }, (_, i) => i), type: 'INT32', nullable: false },
        { name: 'a', data: Float32Array.from({ length: m }, (_, i) => i / 2), type: 'FLOAT', nullable: false },
        { name: 'b', data: Float64Array.from({ length: m }, (_, i) => -i), type: 'DOUBLE' },
      ],
      { rowGroupSize: 30_000, pageSize: 2048 },
    );
    const { rows, gets } = await read(big, [fp32('input', 2)], { start: 20_100, end: 20_200 });
    expect(rows.ids).toEqual(Array.from({ length: 100 }, (_, i) => 20_100 + i));
    expect(Array.from(rows.groups[0]?.inputs[0]?.data as Float32Array).slice(0, 2)).toEqual([10_050, -20_100]);
    const secondGroup = Number(parquetMetadata(big).row_groups[1]?.columns[0]?.meta_data?.data_page_offset);
    const footer = gets.filter(([s]) => s === big.length - 64 * 1024);
    const pages = gets.filter(([, e]) => e <= secondGroup);
    // The footer, the three offset indexes (one GET: they lie together after the data), one GET per column's pages.
    expect(footer.length).toBe(1);
    expect(pages.length).toBe(3);
    expect(gets.length).toBe(5);
    expect(pages.reduce((sum, [s, e]) => sum + e - s, 0)).toBeLessThan(4 * 2 * 2048);
  });

  it("a file's footer is read once per store and etag: later chunks GET only their pages", async () => {
    const m = 30_000;
    const bytes = file(
      [
        { name: 'id', data: Int32Array.from({ length: m }, (_, i) => i), type: 'INT32', nullable: false },
        { name: 'input', data: Float32Array.from({ length: m }, (_, i) => i), type: 'FLOAT', nullable: false },
      ],
      { rowGroupSize: 10_000, pageSize: 2048 },
    );
    expect(bytes.length).toBeGreaterThan(128 * 1024);
    const store = memoryStore(bytes);
    const chunk = (start: number, etag?: string) =>
      readParquetRows(store, 'in/f.parquet', bytes.length, { start, end: start + 100 }, [fp32('input', 1)], {
        idColumn: 'id',
        ...(etag ? { etag } : {}),
      });
    const footerGets = () => store.gets.filter(([s]) => s === bytes.length - 64 * 1024).length;
    await chunk(0, '"e1"');
    await chunk(100, '"e1"');
    expect(footerGets()).toBe(1);
    // Another etag is another file's bytes; no etag, nothing is kept.
    await chunk(200, '"e2"');
    await chunk(300);
    await chunk(400);
    expect(footerGets()).toBe(4);
    expect((await chunk(500, '"e1"')).ids[0]).toBe(500);
    expect(footerGets()).toBe(4);
  });
});

describe('readParquetRows: typed columns', () => {
  it('dictionary-encoded and DOUBLE columns convert to FP32; INT32 to INT64 as BigInt64Array', async () => {
    const n = 200;
    const bytes = file([
      { name: 'id', data: Int32Array.from({ length: n }, (_, i) => i), type: 'INT32', nullable: false },
      { name: 'cat', data: Array.from({ length: n }, (_, i) => i % 3), type: 'INT32' },
      { name: 'd', data: Float64Array.from({ length: n }, (_, i) => i + 0.25), type: 'DOUBLE', nullable: false },
    ]);
    const f = await read(bytes, [fp32('input', 2)]);
    expect(Array.from(f.rows.groups[0]?.inputs[0]?.data as Float32Array).slice(0, 6)).toEqual([0, 0.25, 1, 1.25, 2, 2.25]);
    const i = await read(bytes, [{ name: 'input', datatype: 'INT64', shape: [-1, 1] }], undefined, { columns: { input: ['cat'] } });
    expect(Array.from(i.rows.groups[0]?.inputs[0]?.data as BigInt64Array).slice(0, 4)).toEqual([0n, 1n, 2n, 0n]);
  });

  it('a string column for a numeric input fails the file; a string input takes it', async () => {
    const bytes = file([
      { name: 'id', data: ['a', 'b'], type: 'STRING', nullable: false },
      { name: 'text', data: ['hello', null], type: 'STRING' },
    ]);
    const err = await read(bytes, [fp32('text', 1)]).catch((e: unknown) => e);
    expect((err as InvalidInputError).message).toBe('in/x.parquet: column "text" holds BYTE_ARRAY (UTF8); input "text" takes FP32');
    const { rows } = await read(bytes, [{ name: 'text', datatype: 'BYTES', shape: [-1] }]);
    expect(rows.ids).toEqual(['a']);
    expect(rows.groups[0]?.inputs[0]).toEqual({ name: 'text', datatype: 'BYTES', shape: [1], data: ['hello'] });
    expect(rows.bad).toEqual([{ line: 2, message: 'column "text": must be a string for BYTES, got null' }]);
  });
});
