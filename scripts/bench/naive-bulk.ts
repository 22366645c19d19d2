/**
 * The script a data engineer would write instead of `warmpool bulk run` (issue 18): one process,
 * list the prefix, then per object GET it whole, parse it (JSONL: JSON.parse per line; CSV: split
 * on newlines and commas; Parquet: hyparquet's parquetReadObjects), run ONNX Runtime in batches
 * of 1,024 rows with default session options, JSON.stringify each row's scores and PUT one JSONL
 * object per input object. Honest, not tuned: no worker threads, no streaming, no overlap of S3
 * with scoring, which is what such a script looks like.
 *
 * Its rate (the bench's `bulk_vs_naive_script` denominator) is rows ÷ the wall time from the
 * first list request to the last put; node's start, loading onnxruntime-node and creating the
 * session are before it. Run as a child of the bench:
 *
 *   node --import tsx naive-bulk.ts JOB.json     (a NaiveJob; S3 from the environment:
 *                                                 S3_ENDPOINT, AWS_REGION, AWS_* keys)
 *
 * and it writes one line of JSON, the NaiveResult, to stdout.
 */
import { readFileSync } from 'node:fs';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { parquetReadObjects } from 'hyparquet';
import * as ort from 'onnxruntime-node';
import { type BatchAxis, modelShape, toModelLayout, toRowLayout } from '../../infra/contracts/batch-axes.ts';

export type NaiveFormat = 'jsonl' | 'csv' | 'parquet';

/** A model input (FP32) and where a row's values are: `columns` one scalar each, else the field named like the input. */
export interface NaiveInput {
  name: string;
  /** The row's dims (the model's shape without the batch axis). */
  dims: number[];
  columns?: string[];
  /** Where the model keeps the rows (infra/contracts/batch-axes.ts); absent: axis 0. */
  batchAxis?: BatchAxis;
}

export interface NaiveJob {
  bucket: string;
  /** Key prefixes: every object under `input` is scored into `output`. */
  input: string;
  output: string;
  modelPath: string;
  format: NaiveFormat;
  inputs: NaiveInput[];
  /** Rows per forward pass: NAIVE_BATCH_ROWS, or a fixed-batch model's one size (what its author would loop at). */
  batchRows?: number;
  /** Outputs the model keeps its rows elsewhere for, by name (absent: axis 0 for all). */
  outputAxes?: Record<string, BatchAxis>;
}

export interface NaiveResult {
  rows: number;
  objects: number;
  /** First list request → last put. */
  wallMs: number;
}

interface Row {
  id: unknown;
  /** One flat list of numbers per input. */
  values: number[][];
}

export const NAIVE_BATCH_ROWS = 1024;

export async function naiveBulk(client: S3Client, job: NaiveJob): Promise<NaiveResult> {
  const session = await ort.InferenceSession.create(job.modelPath);
  const started = performance.now();
  const keys = await listKeys(client, job.bucket, job.input);
  let rows = 0;
  for (const key of keys) {
    const got = await client.send(new GetObjectCommand({ Bucket: job.bucket, Key: key }));
    const records = await parse((await got.Body?.transformToByteArray()) ?? new Uint8Array(), job);
    const lines: string[] = [];
    const step = job.batchRows ?? NAIVE_BATCH_ROWS;
    for (let i = 0; i < records.length; i += step)
      lines.push(...(await score(session, records.slice(i, i + step), job.inputs, job.outputAxes)));
    const out = `${job.output}${key.slice(job.input.length).replace(/\.[^./]+$/, '')}.jsonl`;
    await client.send(new PutObjectCommand({ Bucket: job.bucket, Key: out, Body: lines.length > 0 ? `${lines.join('\n')}\n` : '' }));
    rows += records.length;
  }
  const wallMs = performance.now() - started;
  await session.release();
  return { rows, objects: keys.length, wallMs };
}

async function listKeys(client: S3Client, bucket: string, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  let token: string | undefined;
  do {
    const page = await client.send(new ListObjectsV2Command({ Bucket: bucket, Prefix: prefix, ContinuationToken: token }));
    for (const o of page.Contents ?? []) if (o.Key) keys.push(o.Key);
    token = page.IsTruncated ? page.NextContinuationToken : undefined;
  } while (token);
  return keys;
}

async function parse(bytes: Uint8Array, job: NaiveJob): Promise<Row[]> {
  const values = (get: (column: string) => unknown) =>
    job.inputs.map((i) => (i.columns ? i.columns.map((c) => Number(get(c))) : ([get(i.name)].flat(Number.POSITIVE_INFINITY) as number[])));
  if (job.format === 'parquet') {
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
    const objects = await parquetReadObjects({ file });
    return objects.map((o) => ({ id: typeof o.id === 'bigint' ? Number(o.id) : o.id, values: values((c) => o[c]) }));
  }
  const lines = Buffer.from(bytes)
    .toString('utf8')
    .split('\n')
    .filter((line) => line.trim() !== '');
  if (job.format === 'jsonl') {
    return lines.map((line) => {
      const o = JSON.parse(line) as Record<string, unknown>;
      return { id: o.id, values: values((c) => o[c]) };
    });
  }
  const header = (lines.shift() ?? '').trim().split(',');
  const index = new Map(header.map((name, k) => [name, k]));
  return lines.map((line) => {
    const fields = line.trim().split(',');
    return { id: Number(fields[index.get('id') ?? -1]), values: values((c) => fields[index.get(c) ?? -1]) };
  });
}

/** One forward pass over `batch`; a JSONL line per row: `{"id", "<output>": [values…]}`. */
async function score(
  session: ort.InferenceSession,
  batch: Row[],
  inputs: NaiveInput[],
  outputAxes: Record<string, BatchAxis> = {},
): Promise<string[]> {
  const feeds: Record<string, ort.Tensor> = {};
  inputs.forEach((input, k) => {
    const width = input.dims.reduce((a, d) => a * d, 1);
    const data = new Float32Array(batch.length * width);
    batch.forEach((row, r) => {
      data.set(row.values[k] ?? [], r * width);
    });
    // The rows stacked on the model's own batch axis, as its author would (batch-axes.ts).
    const rows = [batch.length, ...input.dims];
    feeds[input.name] = new ort.Tensor('float32', toModelLayout(data, rows, input.batchAxis), modelShape(rows, input.batchAxis));
  });
  const results = await session.run(feeds);
  return batch.map((row, r) => {
    const line: Record<string, unknown> = { id: row.id };
    for (const name of session.outputNames) {
      const out = results[name] as ort.Tensor;
      const data = toRowLayout(out.data as Float32Array, out.dims, outputAxes[name], batch.length);
      const width = data.length / batch.length;
      line[name] = Array.from(data.subarray(r * width, (r + 1) * width));
    }
    return JSON.stringify(line);
  });
}

async function main(jobFile: string | undefined): Promise<void> {
  if (!jobFile) throw new Error('usage: naive-bulk.ts JOB.json');
  const job = JSON.parse(readFileSync(jobFile, 'utf8')) as NaiveJob;
  const endpoint = process.env.S3_ENDPOINT;
  const client = new S3Client({ region: process.env.AWS_REGION ?? 'us-east-1', ...(endpoint ? { endpoint, forcePathStyle: true } : {}) });
  try {
    process.stdout.write(`${JSON.stringify(await naiveBulk(client, job))}\n`);
  } finally {
    client.destroy();
  }
}

if (process.argv[1] && import.meta.url.endsWith(process.argv[1].replaceAll('\\', '/'))) {
  main(process.argv[2]).catch((err: unknown) => {
    process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
}
