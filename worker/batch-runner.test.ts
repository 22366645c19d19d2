/**
 * The batch runner on the real thread engine and real models: a batch holding duplicate rows
 * answers every slice exactly as running all its rows would, while the engine runs each
 * distinct row once.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDynamicAxisModel, buildMlpModel, buildMultiTypeModel, seededRandom } from '../scripts/fixtures/onnx-models.ts';
import { type BatchEvent, createBatchRunner, type Slice } from './batch-runner.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { concatRows, splitRows } from './engine/tensor-codec.ts';
import { createThreadEngine, type ThreadEngine } from './engine/thread-engine.ts';

const CPU = { executionProviders: ['cpu'], intraOpThreads: 1 };
const F = 16;
let dir: string;
let engine: ThreadEngine;
const paths: Record<string, string> = {};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-runner-'));
  const models = { mlp: buildMlpModel({ features: F, hidden: 32 }), multi: buildMultiTypeModel(), dynamic: buildDynamicAxisModel() };
  for (const [name, bytes] of Object.entries(models)) {
    paths[name] = path.join(dir, `${name}.onnx`);
    await writeFile(paths[name], bytes);
  }
  engine = createThreadEngine();
});

afterAll(async () => {
  await engine?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The real engine, recording how many rows each forward pass carried. */
function counting(inner: InferenceEngine): InferenceEngine & { rows: number[] } {
  const rows: number[] = [];
  return {
    rows,
    load: (p, o) => inner.load(p, o),
    run: (inputs, names) => {
      rows.push(Object.values(inputs)[0]?.dims[0] ?? 0);
      return inner.run(inputs, names);
    },
    close: () => inner.close(),
  };
}

function copy(t: EngineTensor): EngineTensor {
  return { type: t.type, dims: [...t.dims], data: t.data.slice() };
}

/** The reference: every row of every slice in one plain forward pass, no collapsing. */
async function runAll(slices: Slice[], outputNames: string[]): Promise<Array<Record<string, EngineTensor>>> {
  const names = Object.keys(slices[0]?.inputs ?? {});
  const feeds = Object.fromEntries(names.map((n) => [n, concatRows(slices.map((s) => copy(s.inputs[n] as EngineTensor)))]));
  const out = await engine.run(feeds, outputNames);
  const perSlice: Array<Record<string, EngineTensor>> = slices.map(() => ({}));
  for (const name of outputNames) {
    splitRows(
      out[name] as EngineTensor,
      slices.map((s) => s.rows),
    ).forEach((part, i) => {
      (perSlice[i] as Record<string, EngineTensor>)[name] = part;
    });
  }
  return perSlice;
}

function mlpRows(seeds: number[]): Slice {
  const data = Float32Array.from(
    seeds.flatMap((seed) => {
      const rand = seededRandom(seed);
      return Array.from({ length: F }, () => rand() * 4 - 2);
    }),
  );
  return { inputs: { features: { type: 'float32', dims: [seeds.length, F], data } }, rows: seeds.length };
}

describe('createBatchRunner collapses identical rows', () => {
  it('answers a batch with duplicates exactly as running every row, with fewer engine rows', async () => {
    await engine.load(paths.mlp as string, CPU);
    // Slices of one row and of several; seeds repeat within a slice and across slices.
    const slices = [mlpRows([1]), mlpRows([2, 1, 3]), mlpRows([1]), mlpRows([3, 3]), mlpRows([4]), mlpRows([2])];
    const rows = slices.reduce((n, s) => n + s.rows, 0);
    const expected = await runAll(slices, ['score']);
    const seen = counting(engine);
    const events: BatchEvent[] = [];
    const run = createBatchRunner(seen, ['features'], ['score'], (e) => events.push(e));

    const results = await run(slices, rows);

    expect(results.map((r) => r.outputs)).toEqual(expected);
    expect(seen.rows).toEqual([4]); // seeds 1, 2, 3, 4
    expect(events).toEqual([{ rows, uniqueRows: 4, items: slices.length, inferMs: expect.any(Number) }]);
    expect(results.every((r) => r.batchRows === 4)).toBe(true);
  });

  it('merges rows only when every input agrees (multi-input, int64, bool, rank 3)', async () => {
    await engine.load(paths.multi as string, CPU);
    const slice = (x: number[], ids: bigint[], mask: number[], n: number): Slice => ({
      inputs: {
        x: { type: 'float32', dims: [1, 2, 2], data: Float32Array.from(x) },
        ids: { type: 'int64', dims: [1, 3], data: BigInt64Array.from(ids) },
        mask: { type: 'bool', dims: [1, 3], data: Uint8Array.from(mask) },
        n: { type: 'int32', dims: [1, 1], data: Int32Array.from([n]) },
      },
      rows: 1,
    });
    const a = slice([1, 2, 3, 4], [1n, 2n, 3n], [1, 0, 1], 5);
    const slices = [
      a,
      slice([1, 2, 3, 4], [1n, 2n, 3n], [1, 0, 1], 6), // differs in n only
      slice([1, 2, 3, 4], [1n, 2n, 3n], [1, 0, 0], 5), // differs in mask only
      slice([1, 2, 3, 4], [1n, 2n, 4n], [1, 0, 1], 5), // differs in ids only
      { inputs: Object.fromEntries(Object.entries(a.inputs).map(([k, t]) => [k, copy(t)])), rows: 1 }, // same as a
    ];
    const names = ['y', 'ids_next', 'mask_not', 'n_double'];
    const expected = await runAll(slices, names);
    const seen = counting(engine);
    const results = await createBatchRunner(seen, ['x', 'ids', 'mask', 'n'], names)(slices, slices.length);
    expect(results.map((r) => r.outputs)).toEqual(expected);
    expect(seen.rows).toEqual([4]);
  });

  it('passes a batch without duplicates through unchanged', async () => {
    await engine.load(paths.mlp as string, CPU);
    const slices = [mlpRows([10, 11]), mlpRows([12])];
    const expected = await runAll(slices, ['score']);
    const seen = counting(engine);
    const results = await createBatchRunner(seen, ['features'], ['score'])(slices, 3);
    expect(results.map((r) => r.outputs)).toEqual(expected);
    expect(seen.rows).toEqual([3]);
  });

  it('runs rows of different lengths on a dynamic axis as one forward pass per length, not a failed batch', async () => {
    await engine.load(paths.dynamic as string, CPU);
    const seq = (rows: number, length: number): Slice => ({
      inputs: { seq: { type: 'float32', dims: [rows, length], data: Float32Array.from({ length: rows * length }, (_, i) => i + 1) } },
      rows,
    });
    const slices = [seq(2, 3), seq(1, 5), seq(1, 3), seq(2, 0)];
    const seen = counting(engine);
    const results = await createBatchRunner(seen, ['seq'], ['total'])(slices, 6);
    // Each slice answered as if run alone: the row sums.
    expect(results.map((r) => Array.from(r.outputs.total?.data as Float32Array))).toEqual([[6, 15], [15], [6], [0, 0]]);
    expect(results.map((r) => r.outputs.total?.dims)).toEqual([
      [2, 1],
      [1, 1],
      [1, 1],
      [2, 1],
    ]);
    // Lengths 3, 5 and 0: three passes, the length-3 rows together. Duplicates still collapse
    // within a pass: the third slice repeats the first's first row, and empty rows are all alike.
    expect(seen.rows).toEqual([2, 1, 1]);
  });
});
