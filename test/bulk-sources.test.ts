/**
 * Workers read their own rows (issue 18), end to end on the real services: objects in s3rver →
 * the driver plans byte ranges / Parquet row ranges → chunk jobs that carry no rows → a real
 * worker reads its range, scores it and writes its part → `_manifest.json`. Scores are checked
 * against ONNX Runtime run in-process on the same model bytes; Parquet is written and read back
 * with DuckDB, the engine a data team would check the output with.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BulkDeps, createBulkRuns } from '../infra/bulk/bulk-runs.ts';
import { driveBulkRun } from '../infra/bulk/driver.ts';
import type { RunManifest } from '../infra/bulk/run-manifest.ts';
import type { BulkRunRequest, BulkRuns } from '../infra/contracts/bulk.ts';
import { closeRedis, type RedisClient } from '../infra/redis/client.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { StoreFactory } from '../infra/registry/store-factory.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { MAX_CHUNKS_IN_HAND } from '../worker/intake.ts';
import { bulkDeps, bulkLocations } from './support/bulk-deps.ts';
import { TEST_BUCKET } from './support/services.ts';
import { startStack, type TestStack } from './support/stack.ts';

const F = 8;
const modelBytes = buildMlpModel({ features: F, hidden: 64, layers: 2, seed: 11 });
let stack: TestStack;
let redis: RedisClient;
let stores: StoreFactory;
let s3: ObjectStore;
let deps: BulkDeps;
let runs: BulkRuns;
let reference: ort.InferenceSession;
let duck: DuckDBInstance;
let dir: string;

const row = (i: number) => Array.from({ length: F }, (_, k) => Math.round(Math.cos(i * 3 + k) * 1000) / 1000);

const locations = (label: string) => bulkLocations(stack, label);

async function run(request: Omit<BulkRunRequest, 'model'>) {
  const started = await runs.start('tenant-a', { model: 'ranges', ...request });
  const { run } = await driveBulkRun(deps, { tenant: 'tenant-a', id: started.id }, { owner: 'test', pollMs: 200, progressIntervalMs: 100 });
  return run;
}

async function parts(outPrefix: string, ext: string): Promise<string[]> {
  return (await s3.list(outPrefix)).map((o) => o.key).filter((k) => k.endsWith(`.${ext}`));
}

/** Every JSONL part line as {id, score}. */
async function jsonlRows(outPrefix: string): Promise<Array<{ id: string | number; score: number[] }>> {
  const out: Array<{ id: string | number; score: number[] }> = [];
  for (const key of await parts(outPrefix, 'jsonl')) {
    const text = new TextDecoder().decode((await s3.getBytes(key)) ?? new Uint8Array());
    for (const l of text.split('\n').filter(Boolean)) out.push(JSON.parse(l) as { id: string | number; score: number[] });
  }
  return out;
}

/** Each expected id exactly once, with ONNX Runtime's score for its row. */
async function expectScores(got: Array<{ id: string | number; score: number }>, expected: Map<string | number, number>) {
  const counts = new Map<string | number, number>();
  for (const g of got) counts.set(g.id, (counts.get(g.id) ?? 0) + 1);
  expect([...counts.entries()].filter(([, n]) => n !== 1)).toEqual([]);
  expect(new Set(counts.keys())).toEqual(new Set(expected.keys()));
  const ids = [...expected.keys()];
  const feeds = Float32Array.from(ids.flatMap((id) => row(expected.get(id) as number)));
  const want = (await reference.run({ features: new ort.Tensor('float32', feeds, [ids.length, F]) })).score?.data as Float32Array;
  const byId = new Map(got.map((g) => [g.id, g.score]));
  const off = ids.filter((id, k) => Math.abs((byId.get(id) as number) - (want[k] as number)) > 1e-5);
  expect(off).toEqual([]);
}

async function duckRows(sql: string): Promise<Array<Record<string, unknown>>> {
  const connection = await duck.connect();
  try {
    return (await connection.runAndReadAll(sql)).getRowObjectsJS() as Array<Record<string, unknown>>;
  } finally {
    connection.closeSync();
  }
}

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', INTRA_OP_THREADS: '1', HEARTBEAT_INTERVAL_MS: '300' });
  ({ deps, redis, stores } = bulkDeps(stack));
  s3 = stores.storeFor(TEST_BUCKET);
  runs = createBulkRuns(deps);
  reference = await ort.InferenceSession.create(modelBytes);
  duck = await DuckDBInstance.create(':memory:');
  dir = mkdtempSync(path.join(os.tmpdir(), 'bulk-sources-'));
  await stack.registry.publish({ name: 'ranges', version: '1', bytes: modelBytes, maxBatch: 64, warmupBatches: [1] });
  await stack.deployments.put({ model: 'ranges', version: '1', min: 0, max: 1, standby: 0 });
  await stack.startWorker('ranges', '1');
  await stack.waitForWorkers('ranges', 'active');
}, 180_000);

afterAll(async () => {
  await reference?.release();
  duck?.closeSync();
  stores?.close();
  if (redis) await closeRedis(redis);
  await stack?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('bulk chunks read by the workers themselves', () => {
  it('text byte ranges: lines across every kind of boundary, CRLF, multi-byte ids, no last newline, empty objects — each id once, ORT’s values, bad lines placed in their object', async () => {
    const loc = locations('text');
    const expected = new Map<string | number, number>();
    // Ids with 2-, 3- and 4-byte UTF-8 characters, so chunk cuts land inside characters.
    const id = (i: number) => `é€𝄞-${i}`;
    const a: string[] = [];
    for (let i = 0; i < 600; i++) {
      a.push(JSON.stringify({ id: id(i), features: row(i) }));
      expected.set(id(i), i);
    }
    a.splice(250, 0, '{"id":"half a line"');
    // CRLF throughout, and no newline after the last line.
    await s3.put(`${loc.inPrefix}a.jsonl`, a.join('\r\n'));
    await s3.put(`${loc.inPrefix}b.jsonl`, '');
    const c = ['id,f0,f1,f2,f3,f4,f5,f6,f7'];
    for (let i = 0; i < 400; i++) {
      c.push([`c-${i}`, ...row(1000 + i)].join(','));
      expected.set(`c-${i}`, 1000 + i);
    }
    c.splice(301, 0, 'c-bad,1,2');
    await s3.put(`${loc.inPrefix}c.csv`, `${c.join('\n')}\n\n`);
    await s3.put(`${loc.inPrefix}d.jsonl`, '\n');

    const done = await run({ input: loc.input, output: loc.output, chunkRows: 7 });
    expect(done.status).toBe('succeeded');
    expect(done.progress).toMatchObject({ rowsDone: 1000, badRows: 2, rowsTotalExact: true });
    // Dozens of chunks per object: cuts fall mid-line, mid-character, between \r and \n.
    expect(done.progress.chunksTotal).toBeGreaterThan(50);
    expect(done.badRowSamples.map((s) => `${s.object.split('/').pop()}:${s.line}`)).toEqual(['a.jsonl:251', 'c.csv:302']);
    const got = await jsonlRows(loc.outPrefix);
    await expectScores(
      got.map((g) => ({ id: g.id, score: g.score[0] as number })),
      expected,
    );
    const manifest = JSON.parse(
      new TextDecoder().decode((await s3.getBytes(`${loc.outPrefix}_manifest.json`)) ?? new Uint8Array()),
    ) as RunManifest;
    expect(manifest.parts.length).toBe(done.progress.chunksTotal);
    expect(manifest).toMatchObject({ rows: 1000, badRows: 2 });
  });

  it('Parquet DuckDB wrote (several row groups, a list column) → Parquet parts DuckDB reads back with ORT’s values', async () => {
    const loc = locations('parquet');
    const file = path.join(dir, 'in.parquet');
    const n = 230;
    const values = Array.from({ length: n }, (_, i) => `(${i}, [${row(i).join(', ')}]::FLOAT[])`).join(', ');
    await duckRows(`COPY (SELECT * FROM (VALUES ${values}) t(id, features)) TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 50)`);
    await s3.put(`${loc.inPrefix}in.parquet`, readFileSync(file));
    const done = await run({ input: loc.input, output: loc.output, chunkRows: 64 });
    expect(done.status).toBe('succeeded');
    expect(done.progress).toMatchObject({ rowsDone: n, badRows: 0, rowsTotal: n });
    const keys = await parts(loc.outPrefix, 'parquet');
    expect(keys.length).toBe(done.progress.chunksTotal);
    const local: string[] = [];
    for (const key of keys) {
      const to = path.join(dir, path.basename(key));
      writeFileSync(to, (await s3.getBytes(key)) as Uint8Array);
      local.push(`'${to}'`);
    }
    const read = await duckRows(`SELECT id, score FROM read_parquet([${local.join(', ')}])`);
    const expected = new Map(Array.from({ length: n }, (_, i) => [i, i] as [number, number]));
    await expectScores(
      read.map((r) => ({ id: Number(r.id), score: (r.score as number[])[0] as number })),
      expected,
    );
  });

  it('Parquet with one scalar column per feature (the implicit mapping) and a named id column → JSONL parts', async () => {
    const loc = locations('parquet-cols');
    const file = path.join(dir, 'cols.parquet');
    const n = 120;
    const cols = Array.from({ length: F }, (_, k) => `f${k}`);
    const values = Array.from({ length: n }, (_, i) => `('r${i}', ${row(i).join(', ')})`).join(', ');
    await duckRows(
      `COPY (SELECT * FROM (VALUES ${values}) t(key, ${cols.join(', ')})) TO '${file}' (FORMAT parquet, ROW_GROUP_SIZE 40, COMPRESSION zstd)`,
    );
    await s3.put(`${loc.inPrefix}cols.parquet`, readFileSync(file));
    const done = await run({ input: loc.input, output: loc.output, idColumn: 'key', outputFormat: 'jsonl', chunkRows: 50 });
    expect(done.status).toBe('succeeded');
    const got = await jsonlRows(loc.outPrefix);
    await expectScores(
      got.map((g) => ({ id: (g as unknown as Record<string, string>).key ?? g.id, score: g.score[0] as number })),
      new Map(Array.from({ length: n }, (_, i) => [`r${i}`, i] as [string, number])),
    );
  });

  it('a worker holds at most MAX_CHUNKS_IN_HAND chunks and one waiting: the rest stay queued, costing them no attempt', async () => {
    const loc = locations('in-hand');
    const lines = Array.from({ length: 3000 }, (_, i) => JSON.stringify({ id: i, features: row(i) }));
    await s3.put(`${loc.inPrefix}rows.jsonl`, `${lines.join('\n')}\n`);
    let held = 0;
    let queued = 0;
    let watching = true;
    const watch = (async () => {
      while (watching) {
        const counts = await stack.withQueue('ranges', '1', (q) => q.getJobCounts('active', 'prioritized'));
        held = Math.max(held, counts.active ?? 0);
        queued = Math.max(queued, counts.prioritized ?? 0);
      }
    })();
    const done = await run({ input: loc.input, output: loc.output, chunkRows: 20 });
    watching = false;
    await watch;
    // The one worker (concurrency far above MAX_CHUNKS_IN_HAND) was offered more chunks than it may hold…
    expect(done.progress.chunksTotal).toBeGreaterThan(16);
    expect(queued).toBeGreaterThan(MAX_CHUNKS_IN_HAND + 1);
    // …and held no more than its bound and its one waiter (and, for a moment, a fetch already under
    // way that it hands straight back), without a chunk running out of attempts (3).
    expect(held).toBeLessThanOrEqual(MAX_CHUNKS_IN_HAND + 2);
    expect(done.status).toBe('succeeded');
    expect(done.progress.rowsDone).toBe(3000);
  });

  it('a run whose every row is bad ends failed with too_many_bad_rows, naming the first bad row', async () => {
    const loc = locations('all-bad');
    const lines = Array.from({ length: 40 }, (_, i) => JSON.stringify({ id: i, features: [1, 2, 3] }));
    await s3.put(`${loc.inPrefix}bad.jsonl`, `${lines.join('\n')}\n`);
    const done = await run({ input: loc.input, output: loc.output, chunkRows: 10 });
    expect(done.status).toBe('failed');
    expect(done.error?.code).toBe('too_many_bad_rows');
    expect(done.error?.message).toMatch(/every row was bad \(40\).*bad\.jsonl line 1/);
    expect(done.progress.badRows).toBe(40);
  });

  it('the default budget fails a run past 1 % bad rows (and at least 100); --max-bad-rows raises it', async () => {
    const loc = locations('budget');
    const lines: string[] = [];
    for (let i = 0; i < 2000; i++) lines.push(i % 10 === 0 ? `{"id":${i},"features":"nope"}` : JSON.stringify({ id: i, features: row(i) }));
    await s3.put(`${loc.inPrefix}rows.jsonl`, `${lines.join('\n')}\n`);
    const failed = await run({ input: loc.input, output: loc.output, chunkRows: 200 });
    expect(failed.status).toBe('failed');
    expect(failed.error?.code).toBe('too_many_bad_rows');
    expect(failed.error?.message).toMatch(/budget of 1 %/);
    const loc2 = locations('budget-raised');
    await s3.put(`${loc2.inPrefix}rows.jsonl`, `${lines.join('\n')}\n`);
    const passed = await run({ input: loc2.input, output: loc2.output, chunkRows: 200, maxBadRows: 500 });
    expect(passed.status).toBe('succeeded');
    expect(passed.progress).toMatchObject({ rowsDone: 1800, badRows: 200 });
    // 200 bad rows over ~10 chunks finishing in any order: the samples are the first 20 in the input.
    expect(passed.badRowSamples.map((b) => b.line)).toEqual(Array.from({ length: 20 }, (_, k) => 1 + 10 * k));
  });
});
