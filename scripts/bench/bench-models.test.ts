import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import { buildDynamicAxisModel, buildMlpModel } from '../fixtures/onnx-models.ts';
import {
  BENCH_BATCHES,
  benchBatches,
  benchInputs,
  benchMode,
  benchRequest,
  builtInModels,
  rowWidth,
  unbenchable,
  userModel,
} from './bench-models.ts';
import { nest } from './bulk.ts';
import { ORT_BOUND_MODEL, QUEUE_BOUND_MODEL } from './report.ts';

const spec = (datatype: TensorSpec['datatype'], shape: number[]): TensorSpec => ({ name: 'x', datatype, shape });

describe('the mode a model is benched in', () => {
  it('runs a fixed-batch export at its one size, and says so; any other at every bench size', () => {
    const batching = (fixedBatch?: number) => ({ maxBatch: fixedBatch ?? 128, warmupBatches: [], ...(fixedBatch ? { fixedBatch } : {}) });
    expect(benchBatches(1)).toEqual([1]);
    expect(benchMode({ inputs: [spec('FP32', [-1, 4])], batching: batching(1) })).toMatch(
      /fixed batch of 1: 1 row a forward pass, no micro-batching/,
    );
    expect(benchBatches(undefined)).toEqual(BENCH_BATCHES);
    expect(benchMode({ inputs: [spec('FP32', [-1, 4])], batching: batching() })).toMatch(/^batched: passes of up to 128/);
  });

  it('says when the model has no batch axis, or keeps it elsewhere', () => {
    const none = { ...spec('FP32', [-1, 2, 3]), batchAxis: 'none' as const };
    expect(benchMode({ inputs: [none], batching: { maxBatch: 1, warmupBatches: [], fixedBatch: 1 } })).toMatch(
      /^unbatched: one request a forward pass, its shapes exact/,
    );
    const state = { ...spec('FP32', [-1, 2, 3]), name: 'state', batchAxis: 1 };
    const sr = { ...spec('INT64', [-1]), name: 'sr', batchAxis: 'none' as const };
    expect(benchMode({ inputs: [spec('FP32', [-1, 4]), state, sr], batching: { maxBatch: 16, warmupBatches: [] } })).toBe(
      "batched on each input's own axis (state on axis 1, sr one value a pass): passes of up to 128 rows",
    );
  });
});

describe('unbenchable', () => {
  it('accepts inputs with fixed non-batch dimensions, one or several', () => {
    expect(unbenchable({ inputs: [spec('FP32', [-1, 64])] })).toBeUndefined();
    expect(unbenchable({ inputs: [spec('INT64', [-1, 2, 3]), { ...spec('FP32', [-1, 4]), name: 'y' }] })).toBeUndefined();
  });

  it('says why it cannot make up rows', () => {
    expect(unbenchable({ inputs: [spec('FP32', [-1, -1])] })).toMatch(/input x has a dynamic non-batch dimension.*--input-shape/);
    expect(unbenchable({ inputs: [spec('BYTES', [-1, 1])] })).toMatch(/BYTES/);
  });
});

describe('builtInModels', () => {
  it('has one model of each regime, each loadable with a dynamic batch axis', () => {
    const models = builtInModels();
    expect(models.map((m) => m.name)).toEqual([QUEUE_BOUND_MODEL, ORT_BOUND_MODEL]);
    for (const m of models) expect(readOnnxMetadata(m.bytes).inputs[0]?.shape[0]).toBe(-1);
  });
});

describe('userModel', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-models-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const write = (name: string, bytes: Uint8Array) => {
    const file = path.join(dir, name);
    writeFileSync(file, bytes);
    return file;
  };

  it('pins dynamic non-batch dimensions from --input-shape into the model it publishes', () => {
    const model = userModel(write('my seq.model.onnx', buildDynamicAxisModel()), '12');
    expect(model.name).toBe('my-seq-model');
    expect(readOnnxMetadata(model.bytes).inputs[0]?.shape).toEqual([-1, 12]);
  });

  it('names the input whose dimension is dynamic and not given', () => {
    expect(() => userModel(write('dyn.onnx', buildDynamicAxisModel()))).toThrow(
      /input seq has dynamic non-batch dimensions.*--input-shape/,
    );
  });

  it('keeps a model with fixed dimensions byte for byte', () => {
    const bytes = buildMlpModel({ features: 8 });
    expect(Buffer.from(userModel(write('mlp.onnx', bytes)).bytes).equals(Buffer.from(bytes))).toBe(true);
  });
});

describe('benchInputs', () => {
  it('gives rows × the row width values in the input shape', () => {
    const [t] = benchInputs({ inputs: [spec('FP32', [-1, 2, 3])] }, 4, 0);
    expect(rowWidth(spec('FP32', [-1, 2, 3]))).toBe(6);
    expect(t).toMatchObject({ name: 'x', datatype: 'FP32', shape: [4, 2, 3] });
    expect(t?.data).toHaveLength(24);
  });

  it('makes every row different, across jobs too, so none is a cache hit or a collapsed duplicate', () => {
    for (const datatype of ['FP32', 'INT64', 'BOOL'] as const) {
      const manifest = { inputs: [spec(datatype, [-1, 32])] };
      const rows = new Set<string>();
      for (let seed = 0; seed < 200; seed++) rows.add(JSON.stringify(benchInputs(manifest, 1, seed)[0]?.data));
      expect(rows.size, datatype).toBe(200);
    }
  });

  it('keeps float rows apart whose sines agree to 4 digits (seeds a run apart, as the bench phases use)', () => {
    // 31 × (3,003,706 − 1,000,028) is within 1e-4 of a multiple of 2π: the sine values alone repeat.
    const manifest = { inputs: [spec('FP32', [-1, 64])] };
    const a = benchInputs(manifest, 1, 1_000_028)[0]?.data ?? [];
    const b = benchInputs(manifest, 1, 3_003_706)[0]?.data ?? [];
    expect(Float32Array.from(a as number[]).slice(1)).toEqual(Float32Array.from(b as number[]).slice(1));
    expect(Float32Array.from(a as number[])).not.toEqual(Float32Array.from(b as number[]));
  });

  it('keeps integers and booleans to values every model accepts', () => {
    const ints = benchInputs({ inputs: [spec('INT32', [-1, 8])] }, 3, 77)[0]?.data ?? [];
    expect(ints.every((v) => v === 0 || v === 1)).toBe(true);
    const bools = benchInputs({ inputs: [spec('BOOL', [-1, 8])] }, 1, 5)[0]?.data ?? [];
    expect(bools.every((v) => typeof v === 'boolean')).toBe(true);
  });
});

describe('benchRequest', () => {
  it('is a request as the API hands it to the entry writer: typed arrays of the rows benchInputs makes', () => {
    const manifest = { name: 'm', version: '2', inputs: [spec('FP32', [-1, 2])] };
    const request = benchRequest(manifest as Parameters<typeof benchRequest>[0], 1, 3, 99);
    expect(request).toMatchObject({ tenant: 'bench', model: 'm', version: '2', submittedAt: 99, rows: 1 });
    expect(request.inputs[0]?.shape).toEqual([1, 2]);
    expect(request.inputs[0]?.data).toBeInstanceOf(Float32Array);
    const json = benchInputs(manifest as Parameters<typeof benchInputs>[0], 1, 3)[0]?.data ?? [];
    expect(Array.from(request.inputs[0]?.data as Float32Array)).toEqual((json as number[]).map((v) => Math.fround(v)));
  });
});

describe('nest', () => {
  it('turns a flat row into nested arrays of its dimensions', () => {
    expect(nest([1, 2, 3, 4, 5, 6], [2, 3])).toEqual([
      [1, 2, 3],
      [4, 5, 6],
    ]);
    expect(nest([7, 8], [2])).toEqual([7, 8]);
    expect(nest([9], [])).toBe(9);
  });
});
