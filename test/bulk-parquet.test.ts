/**
 * Parquet in and out (issue 18) on the suite's real S3 server, with DuckDB as the other side: files
 * DuckDB wrote (several row groups, a list column, snappy by default, zstd, nulls) read chunk by
 * chunk through ranged GETs as a worker reads them, every row once with DuckDB's own values; and
 * a part parquetPart wrote reads back the same with hyparquet and with DuckDB.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { type DuckDBConnection, DuckDBInstance } from '@duckdb/node-api';
import { parquetReadObjects } from 'hyparquet';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ChunkRows } from '../infra/contracts/bulk.ts';
import { loadConfig } from '../infra/kernel/config.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { readParquetRows } from '../infra/tabular/parquet-input.ts';
import { MAX_UNINDEXED_PIECES, parquetLayout, planParquetChunks } from '../infra/tabular/parquet-layout.ts';
import type { InputSpec } from '../infra/tabular/parquet-mapping.ts';
import { parquetPart, parquetPartRows } from '../infra/tabular/parquet-part.ts';
import { testEnv, testServices } from './support/services.ts';

const config = loadConfig(testEnv());
const store = createS3ObjectStore(config.s3);
/** This file's own folder in the shared bucket. */
const root = `${config.s3.prefix}/bulk-parquet/`;
let duck: DuckDBInstance;
let db: DuckDBConnection;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(path.join(testServices().tmpDir, 'bulk-parquet-'));
  duck = await DuckDBInstance.create(':memory:');
  db = await duck.connect();
});

afterAll(() => {
  db?.closeSync();
  duck?.closeSync();
  store.close();
});

/** DuckDB writes `select` to a Parquet file with `options`; the file goes to S3. Its key and size. */
async function duckFile(name: string, select: string, options: string): Promise<{ key: string; size: number }> {
  const local = path.join(dir, name);
  await db.run(`COPY (${select}) TO '${local}' (FORMAT parquet, ${options})`);
  const bytes = readFileSync(local);
  const key = `${root}${name}`;
  await store.put(key, bytes);
  return { key, size: bytes.length };
}

/** Every chunk of the plan read through S3 as a worker reads it. */
async function readAll(
  key: string,
  size: number,
  chunkRows: number,
  inputs: InputSpec[],
): Promise<{ chunks: ChunkRows[]; ranges: Array<{ start: number; end: number }> }> {
  const ranges = planParquetChunks(await parquetLayout(store, key, size), chunkRows);
  const chunks: ChunkRows[] = [];
  for (const range of ranges) chunks.push(await readParquetRows(store, key, size, range, inputs, { idColumn: 'id' }));
  return { chunks, ranges };
}

/** Rows of every chunk's groups as id → [input's row values]. */
function rowsById(chunks: ChunkRows[], input = 0): Map<string | number, number[]> {
  const out = new Map<string | number, number[]>();
  for (const c of chunks) {
    for (const g of c.groups) {
      const t = g.inputs[input];
      if (!t) continue;
      const size = t.shape.slice(1).reduce((a, b) => a * b, 1);
      g.rows.forEach((pos, i) => {
        const id = c.ids[pos] as string | number;
        expect(out.has(id), `id ${id} read twice`).toBe(false);
        out.set(id, Array.from((t.data as Float32Array).subarray(i * size, (i + 1) * size)));
      });
    }
  }
  return out;
}

const N = 10_000;
const LIST = `SELECT i AS id, [i * 0.5, -i, i % 7]::FLOAT[] AS x, (i * 0.25)::DOUBLE AS f0, (i % 13)::INTEGER AS f1 FROM range(${N}) t(i)`;
const expectedX = (i: number) => [i * 0.5, 0 - i, i % 7];

describe('files DuckDB wrote', () => {
  for (const codec of ['snappy', 'zstd']) {
    it(`${codec}: several row groups and a list column read across chunk boundaries, each row once`, async () => {
      const { key, size } = await duckFile(`list-${codec}.parquet`, LIST, `COMPRESSION ${codec}, ROW_GROUP_SIZE 2048`);
      const layout = await parquetLayout(store, key, size);
      expect(layout.rows).toBe(N);
      expect(layout.rowGroups.length).toBeGreaterThan(2);
      expect(layout.columns.map((c) => [c.name, c.listDepth])).toEqual([
        ['id', 0],
        ['x', 1],
        ['f0', 0],
        ['f1', 0],
      ]);
      // Chunks start inside groups (and pages): DuckDB writes no offset index, so they read whole column chunks.
      const { chunks, ranges } = await readAll(key, size, 700, [{ name: 'x', datatype: 'FP32', shape: [-1, 3] }]);
      expect(ranges.some((r) => !layout.rowGroups.some((g) => g.start === r.start))).toBe(true);
      const rows = rowsById(chunks);
      expect(rows.size).toBe(N);
      for (const i of [0, 1, 2047, 2048, 2049, 4095, 4096, 7777, N - 1]) expect(rows.get(i)).toEqual(expectedX(i));
      expect(chunks.reduce((n, c) => n + c.badRows, 0)).toBe(0);

      // The same file into a single-input model without an "input" column: its numeric scalar columns, in file order.
      const scalars = rowsById((await readAll(key, size, 4000, [{ name: 'input', datatype: 'FP32', shape: [-1, 2] }])).chunks);
      expect(scalars.size).toBe(N);
      for (const i of [0, 3, 4096, N - 1]) expect(scalars.get(i)).toEqual([i * 0.25, i % 13]);
    });
  }

  it('a big group without an offset index (DuckDB writes none) is cut in a few pieces, not one per chunkRows', async () => {
    const cols = Array.from({ length: 16 }, (_, k) => `i * ${k + 1} AS f${k}`).join(', ');
    const { key, size } = await duckFile('big-groups.parquet', `SELECT i AS id, ${cols} FROM range(150000) t(i)`, 'ROW_GROUP_SIZE 100000');
    const layout = await parquetLayout(store, key, size);
    expect(layout.rowGroups.map((g) => g.indexed)).toEqual(layout.rowGroups.map(() => false));
    const plan = planParquetChunks(layout, 1000);
    for (const g of layout.rowGroups) {
      const inside = plan.filter((r) => r.start >= g.start && r.end <= g.start + g.rows);
      expect(inside.length).toBe(MAX_UNINDEXED_PIECES);
    }
    const last = plan[plan.length - 1] as { start: number; end: number };
    const rows = await readParquetRows(store, key, size, last, [{ name: 'input', datatype: 'FP32', shape: [-1, 16] }], { idColumn: 'id' });
    expect(rows.ids[0]).toBe(last.start);
    expect(rows.ids.length).toBe(last.end - last.start);
  });

  it('nulls and NaNs DuckDB wrote are bad rows with their row numbers; the rest score', async () => {
    const { key, size } = await duckFile(
      'nulls.parquet',
      `SELECT i AS id, CASE WHEN i % 1000 = 5 THEN NULL WHEN i % 1000 = 6 THEN 'NaN'::DOUBLE ELSE i END AS a FROM range(${N}) t(i)`,
      'ROW_GROUP_SIZE 4096',
    );
    const { chunks } = await readAll(key, size, 3000, [{ name: 'a', datatype: 'FP32', shape: [-1] }]);
    const bad = chunks.flatMap((c) => c.bad);
    expect(chunks.reduce((n, c) => n + c.badRows, 0)).toBe(20);
    expect(bad.map((b) => b.line).sort((a, b) => a - b)).toEqual(Array.from({ length: 10 }, (_, k) => [k * 1000 + 6, k * 1000 + 7]).flat());
    expect(bad.find((b) => b.line === 6)?.message).toBe('column "a": must be a finite number for FP32, got null');
    expect(bad.find((b) => b.line === 7)?.message).toBe('column "a": must be a finite number for FP32, got NaN');
    const rows = rowsById(chunks);
    expect(rows.size).toBe(N - 20);
    expect(rows.get(9999)).toEqual([9999]);
  });
});

describe('parts parquetPart wrote', () => {
  it('read back the same with hyparquet (through S3) and with DuckDB, and count from the footer alone', async () => {
    const n = 3000;
    const ids = Array.from({ length: n }, (_, i) => `row-${i}`);
    const score = Float32Array.from({ length: n }, (_, i) => Math.fround(Math.sin(i)));
    const probs = Float32Array.from({ length: n * 3 }, (_, k) => Math.fround(k / (n * 3)));
    const label = BigInt64Array.from({ length: n }, (_, i) => BigInt(i % 4));
    const bytes = parquetPart(ids, [
      { name: 'score', datatype: 'FP32', shape: [n], data: score },
      { name: 'probs', datatype: 'FP32', shape: [n, 3], data: probs },
      { name: 'label', datatype: 'INT64', shape: [n], data: label },
    ]);
    const key = `${root}out/part-000001.parquet`;
    await store.put(key, bytes);

    const fromS3 = await store.getBytes(key);
    expect(parquetPartRows(fromS3 as Uint8Array)).toBe(n);
    expect((await parquetLayout(store, key, bytes.length)).rows).toBe(n);

    const back = await parquetReadObjects({ file: (fromS3 as Uint8Array).slice().buffer as ArrayBuffer });
    back.forEach((r, i) => {
      expect(r).toEqual({ id: ids[i], score: score[i], probs: Array.from(probs.subarray(3 * i, 3 * i + 3)), label: label[i] });
    });

    const local = path.join(dir, 'part-000001.parquet');
    writeFileSync(local, fromS3 as Uint8Array);
    const reader = await db.runAndReadAll(`SELECT id, score, probs, label FROM read_parquet('${local}')`);
    const rows = reader.getRowObjectsJS();
    expect(rows.length).toBe(n);
    rows.forEach((r, i) => {
      expect(r.id).toBe(ids[i]);
      expect(r.score).toBe(score[i]);
      expect(r.probs).toEqual(Array.from(probs.subarray(3 * i, 3 * i + 3)));
      expect(r.label).toBe(label[i]);
    });
    const types = (await db.runAndReadAll(`DESCRIBE SELECT * FROM read_parquet('${local}')`)).getRowObjectsJS();
    expect(types.map((t) => [t.column_name, t.column_type])).toEqual([
      ['id', 'VARCHAR'],
      ['score', 'FLOAT'],
      ['probs', 'FLOAT[]'],
      ['label', 'BIGINT'],
    ]);
  });

  it('integer ids are an INT64 column DuckDB reads as BIGINT', async () => {
    const bytes = parquetPart([5, 6, 7], [{ name: 'y', datatype: 'FP64', shape: [3, 1], data: new Float64Array([0.1, 0.2, 0.3]) }]);
    const local = path.join(dir, 'int-ids.parquet');
    writeFileSync(local, bytes);
    const rows = (await db.runAndReadAll(`SELECT id, y FROM read_parquet('${local}') ORDER BY id`)).getRowObjectsJS();
    expect(rows).toEqual([
      { id: 5n, y: [0.1] },
      { id: 6n, y: [0.2] },
      { id: 7n, y: [0.3] },
    ]);
  });
});
