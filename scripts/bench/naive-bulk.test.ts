/**
 * The bench's bulk objects and its naive script, on the real S3-protocol server from global setup
 * and real ONNX Runtime: inputs written in each format (bulk-objects.ts) are scored by the naive
 * script (naive-bulk.ts) into JSONL whose scores equal ONNX Runtime's on the same rows, each id
 * once; and the output check (writtenIds, idsProblem) reads every part format and catches a
 * missing, a repeated and a foreign id.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { parquetMetadata } from 'hyparquet';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { parquetPart } from '../../infra/tabular/parquet-part.ts';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { benchInputs } from './bench-models.ts';
import { idsProblem, inputLayout, rowsPerObject, writeBulkInput, writtenIds } from './bulk-objects.ts';
import { type NaiveFormat, type NaiveInput, naiveBulk } from './naive-bulk.ts';

const FEATURES = 6;
const manifest: { inputs: TensorSpec[] } = { inputs: [{ name: 'features', datatype: 'FP32', shape: [-1, FEATURES] }] };
const prefix = uniqueId('naive-bulk');
let store: ReturnType<typeof createS3ObjectStore>;
let client: S3Client;
let bucket: string;
let modelPath: string;

beforeAll(() => {
  const { s3, tmpDir } = testServices();
  const credentials = { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey };
  store = createS3ObjectStore({ endpoint: s3.endpoint, bucket: s3.bucket, region: s3.region, forcePathStyle: true, credentials });
  client = new S3Client({ endpoint: s3.endpoint, region: s3.region, forcePathStyle: true, credentials });
  bucket = s3.bucket;
  modelPath = path.join(mkdtempSync(path.join(tmpDir, 'naive-bulk-')), 'mlp.onnx');
  writeFileSync(modelPath, buildMlpModel({ features: FEATURES, hidden: 8 }));
});

afterAll(async () => {
  for (const o of await store.list(`${prefix}/`)) await store.delete(o.key);
  store.close();
  client.destroy();
});

/** Each row's score from ONNX Runtime over the whole object at once, by id. */
async function expectedScores(rows: number): Promise<Map<number, number>> {
  const session = await ort.InferenceSession.create(modelPath);
  const scores = new Map<number, number>();
  const per = rowsPerObject(manifest);
  for (let start = 0; start < rows; start += per) {
    const count = Math.min(per, rows - start);
    const [input] = benchInputs(manifest, count, start);
    const data = Float32Array.from((input?.data ?? []) as number[]);
    const out = await session.run({ features: new ort.Tensor('float32', data, [count, FEATURES]) });
    const score = out.score?.data as Float32Array;
    for (let r = 0; r < count; r++) scores.set(start + r, score[r] as number);
  }
  await session.release();
  return scores;
}

describe('the naive script on the bench objects', () => {
  // Two objects (a full one and a short one), so batches of 1,024 end inside each and one object holds several.
  const rows = rowsPerObject(manifest) + 500;
  let expected: Map<number, number>;
  beforeAll(async () => {
    expected = await expectedScores(rows);
  });

  const layouts: Array<[string, NaiveFormat, () => NaiveInput[]]> = [
    ['JSONL', 'jsonl', () => inputLayout(manifest, 'jsonl') as NaiveInput[]],
    ['CSV', 'csv', () => inputLayout(manifest, 'csv') as NaiveInput[]],
    ['Parquet, one column a feature', 'parquet', () => inputLayout(manifest, 'parquet') as NaiveInput[]],
    ['Parquet, a list column', 'parquet', () => [{ name: 'features', dims: [FEATURES] }]],
  ];

  it.each(layouts)('%s: every row scored as ONNX Runtime scores it, each id once', async (label, format, layoutOf) => {
    const base = `${prefix}/${label.replace(/\W+/g, '-')}`;
    const layout = layoutOf();
    expect(await writeBulkInput(store, `${base}/in/`, manifest, rows, format, layout)).toBe(2);
    if (format === 'parquet') {
      const first = (await store.getBytes(`${base}/in/in-0000.parquet`)) ?? new Uint8Array();
      expect(
        parquetMetadata(first.buffer.slice(first.byteOffset, first.byteOffset + first.byteLength) as ArrayBuffer).row_groups,
      ).toHaveLength(4);
    }
    const result = await naiveBulk(client, { bucket, input: `${base}/in/`, output: `${base}/out/`, modelPath, format, inputs: layout });
    expect(result).toMatchObject({ rows, objects: 2 });
    expect(idsProblem(await writtenIds(store, `${base}/out/`, 'jsonl'), rows)).toBeUndefined();
    for (const o of await store.list(`${base}/out/`)) {
      const text = Buffer.from((await store.getBytes(o.key)) ?? new Uint8Array()).toString();
      for (const line of text.trim().split('\n')) {
        const { id, score } = JSON.parse(line) as { id: number; score: number[] };
        expect(score[0]).toBeCloseTo(expected.get(id) as number, 5);
      }
    }
  });
});

describe('inputLayout', () => {
  it('names one scalar column per feature for CSV and a narrow Parquet table, and says why it cannot lay out other models', () => {
    expect(inputLayout(manifest, 'csv')).toEqual([
      { name: 'features', dims: [FEATURES], columns: ['features_0', 'features_1', 'features_2', 'features_3', 'features_4', 'features_5'] },
    ]);
    expect(inputLayout({ inputs: [{ name: 'x', datatype: 'FP32', shape: [-1, 3, 32, 32] }] }, 'parquet')).toEqual([
      { name: 'x', dims: [3, 32, 32] },
    ]);
    const two: { inputs: TensorSpec[] } = { inputs: [...manifest.inputs, { name: 'mask', datatype: 'FP32', shape: [-1, 2] }] };
    expect(inputLayout(two, 'csv')).toMatch(/single-input/);
    expect(inputLayout({ inputs: [{ name: 'ids', datatype: 'INT64', shape: [-1, 4] }] }, 'parquet')).toMatch(/FP32/);
    expect(inputLayout({ inputs: [{ name: 'ids', datatype: 'INT64', shape: [-1, 4] }] }, 'jsonl')).toEqual([{ name: 'ids', dims: [4] }]);
  });
});

describe('the output check', () => {
  it('reads the ids of CSV and Parquet parts', async () => {
    await store.put(`${prefix}/parts/part-000000.csv`, 'id,score\n0,0.5\n"2",0.25\n');
    const outputs = [{ name: 'score', datatype: 'FP32' as const, shape: [1, 1], data: new Float32Array([0.75]) }];
    await store.put(`${prefix}/parts/part-000001.parquet`, parquetPart([1], outputs));
    await store.put(`${prefix}/parts/_manifest.json`, '{}');
    expect(await writtenIds(store, `${prefix}/parts/`, 'csv')).toEqual(['0', '2']);
    expect((await writtenIds(store, `${prefix}/parts/`, 'parquet')).map(Number)).toEqual([1]);
  });

  it('accepts each id once in any form, and counts missing, repeated and foreign ids', () => {
    expect(idsProblem([0, '1', 2n], 3)).toBeUndefined();
    expect(idsProblem([0, 1, 1, 7, 'x', ''], 3)).toBe('6 ids for 3 rows: 1 missing, 1 repeated, 3 not an input id');
  });
});
