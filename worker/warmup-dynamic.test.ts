/**
 * Warm-up of models with dynamic non-batch dimensions (worker/warmup.ts), on the real thread
 * engine and real conv nets whose images may be any size: the manifest's warm-up shape when
 * published, else the first of WARMUP_DIM_CANDIDATES ONNX Runtime runs, recorded in the profile
 * and in its key; a clear failure, naming the input and --warmup-shape, when none runs.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { readOnnxMetadata } from '../infra/registry/onnx-metadata.ts';
import { buildDynamicImageModel, buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { createThreadEngine, type ThreadEngine } from './engine/thread-engine.ts';
import { profileFileFor } from './profile-cache.ts';
import { representativeInputs } from './representative-inputs.ts';
import { WARMUP_DIM_CANDIDATES } from './settle-shapes.ts';
import { runWarmup, type WarmupOptions, type WarmupProgress } from './warmup.ts';

const MODELS = {
  /** x [-1, 3, -1, -1]: 2 unpadded stages, 1×1 fails, 32×32 runs. */
  cls: buildDynamicImageModel(),
  /** 4 stages: 32×32 fails too, 224×224 runs. */
  deep: buildDynamicImageModel({ stages: 4 }),
  /** x [-1, 3, 48, -1], as PaddleOCR's classifier fixes its height. */
  tall: buildDynamicImageModel({ height: 48 }),
  /** x [-1, -1, -1, -1]: the channel axis too, which no image size fixes. */
  anyChannels: buildDynamicImageModel({ dynamicChannels: true }),
  mlp: buildMlpModel({ features: 8, hidden: 8, layers: 1 }),
};
type ModelName = keyof typeof MODELS;

let dir: string;
let engine: ThreadEngine;

function manifest(name: ModelName, warmupShapes?: Record<string, number[]>): ModelManifest {
  const meta = readOnnxMetadata(MODELS[name]);
  return {
    name,
    version: '1',
    format: 'onnx',
    // Distinct per model and hint, as the kept profile's key needs (the file name is the path's).
    sha256: name.padEnd(64, '0'),
    sizeBytes: MODELS[name].length,
    inputs: meta.inputs,
    outputs: meta.outputs,
    batching: { maxBatch: 4, warmupBatches: [1, 4], ...(warmupShapes ? { warmupShapes } : {}) },
    createdAt: new Date(0).toISOString(),
    labels: {},
  };
}

/** The real engine, recording the input dims of every run and every load. */
function observed(fail?: (inputs: Record<string, EngineTensor>) => Error | undefined) {
  const runs: number[][] = [];
  let loads = 0;
  const wrapped: InferenceEngine = {
    load: async (modelPath, options) => {
      loads++;
      return engine.load(modelPath, options);
    },
    run: async (inputs, outputNames) => {
      runs.push(Object.values(inputs)[0]?.dims ?? []);
      const err = fail?.(inputs);
      if (err) throw err;
      return engine.run(inputs, outputNames);
    },
    close: () => engine.close(),
  };
  return { engine: wrapped, runs, loads: () => loads };
}

async function warm(name: ModelName, m: ModelManifest, o = observed(), extra: Partial<WarmupOptions> = {}) {
  const events: WarmupProgress[] = [];
  const profile = await runWarmup({
    engine: o.engine,
    modelPath: path.join(dir, `${name}.onnx`),
    manifest: m,
    executionProviders: ['cpu'],
    threadCandidates: [1],
    iterations: 1,
    latencyBudgetMs: 60_000,
    profileFile: null,
    onProgress: (e) => events.push(e),
    ...extra,
  });
  return { profile, events, shapes: events.filter((e) => e.type === 'shapes') };
}

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-warmup-dynamic-'));
  for (const [name, bytes] of Object.entries(MODELS)) await writeFile(path.join(dir, `${name}.onnx`), bytes);
  engine = createThreadEngine();
});

afterAll(async () => {
  await engine.close();
  await rm(dir, { recursive: true, force: true });
});

describe('warm-up of a model with dynamic image dimensions', () => {
  it('fails at the old 1×1 warm-up shape: the case the candidates are for', async () => {
    await engine.load(path.join(dir, 'cls.onnx'), { executionProviders: ['cpu'], intraOpThreads: 1 });
    await expect(engine.run(representativeInputs(manifest('cls'), 1))).rejects.toThrow(/Invalid input shape/);
  });

  it('without a hint, profiles at the first candidate size that runs and says so', async () => {
    const o = observed();
    const { profile, shapes } = await warm('cls', manifest('cls'), o);
    expect(WARMUP_DIM_CANDIDATES[0]).toBe(32);
    expect(profile.inputShapes).toEqual({ x: [3, 32, 32] });
    expect(shapes).toEqual([{ type: 'shapes', inputShapes: { x: [3, 32, 32] }, source: 'tried', rejected: [] }]);
    // One probe at batch 1, then every warm-up batch (a discarded and a timed run each) at that size.
    expect(o.runs).toEqual([
      [1, 3, 32, 32],
      [1, 3, 32, 32],
      [1, 3, 32, 32],
      [4, 3, 32, 32],
      [4, 3, 32, 32],
    ]);
    expect(profile.entries.map((e) => e.batch)).toEqual([1, 4]);
  });

  it('goes on to the next candidate when ONNX Runtime refuses one (32×32 through 4 unpadded stages)', async () => {
    const { profile, shapes } = await warm('deep', manifest('deep'));
    expect(profile.inputShapes).toEqual({ x: [3, 224, 224] });
    const [event] = shapes;
    expect(event).toMatchObject({ source: 'tried', inputShapes: { x: [3, 224, 224] } });
    expect(event?.type === 'shapes' && event.rejected).toEqual([{ inputShapes: { x: [3, 32, 32] }, error: expect.stringMatching(/Conv/) }]);
  });

  it('keeps the dimensions the model fixes and tries sizes only for the dynamic ones', async () => {
    const { profile } = await warm('tall', manifest('tall'));
    expect(profile.inputShapes).toEqual({ x: [3, 48, 32] });
  });

  it("uses the manifest's warm-up shape, with no candidate tried", async () => {
    const o = observed();
    const { profile, shapes } = await warm('deep', manifest('deep', { x: [3, 48, 192] }), o);
    expect(profile.inputShapes).toEqual({ x: [3, 48, 192] });
    expect(shapes).toEqual([{ type: 'shapes', inputShapes: { x: [3, 48, 192] }, source: 'manifest', rejected: [] }]);
    expect(o.runs.every((dims) => dims.slice(1).join() === '3,48,192')).toBe(true);
  });

  it('fails naming the input and --warmup-shape when no candidate runs; a hint then makes it warm up', async () => {
    const err = await warm('anyChannels', manifest('anyChannels')).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Error);
    const message = (err as Error).message;
    expect(message).toMatch(/no forward pass ran with input x \[-1, -1, -1, -1\] at any size tried/);
    expect(message).toMatch(/--warmup-shape x:C,H,W$/);
    for (const size of WARMUP_DIM_CANDIDATES) expect(message).toContain(`${size}: `);

    const { profile } = await warm('anyChannels', manifest('anyChannels', { x: [3, 40, 40] }));
    expect(profile.inputShapes).toEqual({ x: [3, 40, 40] });
  });

  it("fails naming the manifest's shape when ONNX Runtime refuses it, without trying others", async () => {
    const o = observed();
    const err = await warm('deep', manifest('deep', { x: [3, 32, 32] }), o).catch((e: unknown) => e);
    expect((err as Error).message).toMatch(/refused the manifest's warm-up shape \(--warmup-shape x:3,32,32\): .*Conv/);
    expect(o.runs).toEqual([[1, 3, 32, 32]]);
  });

  it('fails on an engine that died rather than trying the next size', async () => {
    const o = observed(() => new Error('inference thread exited'));
    await expect(warm('cls', manifest('cls'), o)).rejects.toThrow('inference thread exited');
    expect(o.runs).toHaveLength(1);
  });

  it('runs no extra pass and records no shape for a model whose inputs are all fixed', async () => {
    const o = observed();
    const { profile, shapes } = await warm('mlp', manifest('mlp'), o);
    expect(profile.inputShapes).toBeUndefined();
    expect(shapes).toEqual([]);
    expect(o.runs).toEqual([
      [1, 8],
      [1, 8],
      [4, 8],
      [4, 8],
    ]);
  });
});

describe('the kept profile of a model with dynamic dimensions', () => {
  let cache: string;
  beforeAll(async () => {
    cache = path.join(dir, 'cache');
    await mkdir(cache, { recursive: true });
  });

  /** A start as the worker makes it: the model at <cache>/<sha256>.onnx, the profile beside it. */
  async function start(name: ModelName, m: ModelManifest) {
    const modelPath = path.join(cache, `${m.sha256}.onnx`);
    await writeFile(modelPath, MODELS[name]);
    const o = observed();
    return { ...(await warm(name, m, o, { modelPath, profileFile: undefined })), o, file: profileFileFor(modelPath) };
  }

  it('keeps the shape it measured at and reuses it without trying sizes again', async () => {
    const m = manifest('cls');
    await rm(profileFileFor(path.join(cache, `${m.sha256}.onnx`)), { force: true });
    const first = await start('cls', m);
    const kept = JSON.parse(await readFile(first.file, 'utf8')) as { key: Record<string, unknown>; profile: { inputShapes: unknown } };
    expect(kept.key).toMatchObject({ inputShapes: { x: [3, -1, -1] }, shapeCandidates: [...WARMUP_DIM_CANDIDATES] });
    expect(kept.profile.inputShapes).toEqual({ x: [3, 32, 32] });

    const again = await start('cls', m);
    expect(again.events.map((e) => e.type)).toEqual(['reused', 'load']);
    expect(again.profile).toEqual({ ...first.profile, reused: true });
    expect(again.o.runs).toEqual([[first.profile.chosenBatch, 3, 32, 32]]);
  });

  it('is measured again when the warm-up shape changes', async () => {
    const m = manifest('cls');
    await rm(profileFileFor(path.join(cache, `${m.sha256}.onnx`)), { force: true });
    await start('cls', m);
    const hinted = await start('cls', { ...m, batching: { ...m.batching, warmupShapes: { x: [3, 48, 192] } } });
    expect(hinted.events.filter((e) => e.type === 'measured')).toHaveLength(2);
    expect(hinted.profile.inputShapes).toEqual({ x: [3, 48, 192] });
    const kept = JSON.parse(await readFile(hinted.file, 'utf8')) as { key: Record<string, unknown> };
    expect(kept.key.inputShapes).toEqual({ x: [3, 48, 192] });
    expect(kept.key).not.toHaveProperty('shapeCandidates');
  });

  it("leaves a fixed model's key as it was: no shape in it", async () => {
    const { file } = await start('mlp', manifest('mlp'));
    const kept = JSON.parse(await readFile(file, 'utf8')) as { key: Record<string, unknown>; profile: Record<string, unknown> };
    expect(Object.keys(kept.key)).toEqual([
      'sha256',
      'executionProviders',
      'threadCandidates',
      'batchSizes',
      'iterations',
      'cpus',
      'cpuModel',
      'engine',
    ]);
    expect(kept.profile).not.toHaveProperty('inputShapes');
  });
});

describe('representativeInputs with shapes', () => {
  it('gives each named input its shape and the others their own, dynamic dimensions 1', () => {
    const m = {
      ...manifest('cls'),
      inputs: [
        { name: 'x', datatype: 'FP32' as const, shape: [-1, 3, -1, -1] },
        { name: 'mask', datatype: 'BOOL' as const, shape: [-1, -1] },
      ],
    };
    const inputs = representativeInputs(m, 2, { x: [3, 5, 7] });
    expect(inputs.x?.dims).toEqual([2, 3, 5, 7]);
    expect(inputs.x?.data).toHaveLength(2 * 3 * 5 * 7);
    expect(inputs.mask?.dims).toEqual([2, 1]);
  });
});
