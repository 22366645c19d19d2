/**
 * The thread engine against real ONNX Runtime: every answer must equal what an in-process
 * InferenceSession gives for the same inputs, on the real models from scripts/fixtures/onnx-models.ts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Worker } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFp16Model, buildGatherModel, buildMlpModel, buildMultiTypeModel, seededRandom } from '../../scripts/fixtures/onnx-models.ts';
import type { EngineTensor } from './engine.ts';
import { encodeHalf } from './tensor-codec.ts';
import { createThreadEngine, type ThreadEngine } from './thread-engine.ts';

const CPU = { executionProviders: ['cpu'], intraOpThreads: 0 };

let dir: string;
const models: Record<string, string> = {};

beforeAll(async () => {
  dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-engine-'));
  const builds: Record<string, Uint8Array> = {
    mlp: buildMlpModel(),
    multi: buildMultiTypeModel(),
    fp16: buildFp16Model(),
    gather: buildGatherModel(),
    slow: buildMlpModel({ hidden: 1024, layers: 8 }),
  };
  for (const [name, bytes] of Object.entries(builds)) {
    models[name] = path.join(dir, `${name}.onnx`);
    await writeFile(models[name], bytes);
  }
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function modelPath(name: string): string {
  const p = models[name];
  if (!p) throw new Error(`no model ${name}`);
  return p;
}

/** A deep copy: the engine detaches the buffers it is given. */
function clone(inputs: Record<string, EngineTensor>): Record<string, EngineTensor> {
  return Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, { type: t.type, dims: [...t.dims], data: t.data.slice() }]));
}

/** The same forward pass, in this thread, straight through onnxruntime-node. */
async function runInProcess(model: string, inputs: Record<string, EngineTensor>): Promise<Record<string, EngineTensor>> {
  const session = await ort.InferenceSession.create(modelPath(model), { graphOptimizationLevel: 'all' });
  try {
    const feeds = Object.fromEntries(Object.entries(inputs).map(([n, t]) => [n, new ort.Tensor(t.type, t.data, t.dims)]));
    const results = await session.run(feeds);
    return Object.fromEntries(
      Object.entries(results).map(([n, v]) => [n, { type: v.type, dims: [...v.dims], data: v.data } as EngineTensor]),
    );
  } finally {
    await session.release();
  }
}

function floats(n: number, seed: number): Float32Array {
  const rand = seededRandom(seed);
  return Float32Array.from({ length: n }, () => rand() * 4 - 2);
}

const CASES: Array<[string, Record<string, EngineTensor>]> = [
  ['mlp', { features: { type: 'float32', dims: [3, 64], data: floats(3 * 64, 1) } }],
  [
    'multi',
    {
      x: { type: 'float32', dims: [2, 2, 2], data: floats(8, 2) },
      ids: { type: 'int64', dims: [2, 3], data: new BigInt64Array([0n, -5n, 2n ** 40n, 9007199254740993n, 7n, -(2n ** 62n)]) },
      mask: { type: 'bool', dims: [2, 3], data: new Uint8Array([1, 0, 1, 0, 0, 1]) },
      n: { type: 'int32', dims: [2, 1], data: new Int32Array([-21, 1 << 20]) },
    },
  ],
  ['fp16', { h: { type: 'float16', dims: [2, 4], data: Uint16Array.from([1, -2.5, 0.1, 65504, 2 ** -24, -0, 1000, 3.3], encodeHalf) } }],
  ['gather', { idx: { type: 'int64', dims: [4, 1], data: new BigInt64Array([0n, 7n, -1n, 3n]) } }],
];

describe('thread engine', () => {
  let engine: ThreadEngine;
  beforeAll(() => {
    engine = createThreadEngine();
  });
  afterAll(async () => {
    await engine.close();
  });

  it.each(CASES)('gives the same outputs as an in-process session: %s model', async (model, inputs) => {
    const info = await engine.load(modelPath(model), CPU);
    expect(info.inputNames.sort()).toEqual(Object.keys(inputs).sort());
    const expected = await runInProcess(model, inputs);
    const actual = await engine.run(clone(inputs));
    expect(Object.keys(actual).sort()).toEqual(info.outputNames.sort());
    expect(actual).toEqual(expected);
  });

  it('returns only the outputs asked for', async () => {
    const [, inputs] = CASES[1] as [string, Record<string, EngineTensor>];
    await engine.load(modelPath('multi'), CPU);
    const out = await engine.run(clone(inputs), ['ids_next', 'mask_not']);
    expect(Object.keys(out).sort()).toEqual(['ids_next', 'mask_not']);
    expect(out.mask_not?.data).toEqual(new Uint8Array([0, 1, 0, 1, 1, 0]));
    expect(out.ids_next?.data).toEqual(new BigInt64Array([1n, -4n, 2n ** 40n + 1n, 9007199254740994n, 8n, -(2n ** 62n) + 1n]));
  });

  it('transfers whole input buffers and copies views on larger ones', async () => {
    await engine.load(modelPath('gather'), CPU);
    const whole = new BigInt64Array([1n, 2n]);
    await engine.run({ idx: { type: 'int64', dims: [2, 1], data: whole } });
    expect(whole.buffer.byteLength).toBe(0);

    const backing = new BigInt64Array([5n, 1n, 2n, 5n]);
    const out = await engine.run({ idx: { type: 'int64', dims: [2, 1], data: new BigInt64Array(backing.buffer, 8, 2) } });
    expect(Array.from(backing)).toEqual([5n, 1n, 2n, 5n]);
    expect(Array.from(out.row?.data as Float32Array)).toEqual([4, 5, 6, 7, 8, 9, 10, 11]);
  });

  it("rejects a failing run with ONNX Runtime's message and serves the next run", async () => {
    await engine.load(modelPath('gather'), CPU);
    const bad = engine.run({ idx: { type: 'int64', dims: [2, 1], data: new BigInt64Array([1n, 99n]) } });
    await expect(bad).rejects.toThrow(/Gather.*idx=99/);
    const good = await engine.run({ idx: { type: 'int64', dims: [1, 1], data: new BigInt64Array([2n]) } });
    expect(Array.from(good.row?.data as Float32Array)).toEqual([8, 9, 10, 11]);
  });

  it('keeps the loaded model when a reload fails', async () => {
    await engine.load(modelPath('gather'), CPU);
    await expect(engine.load(path.join(dir, 'missing.onnx'), CPU)).rejects.toThrow(/missing\.onnx/);
    const out = await engine.run({ idx: { type: 'int64', dims: [1, 1], data: new BigInt64Array([0n]) } });
    expect(out.row?.dims).toEqual([1, 1, 4]);
  });

  it('falls back to the CPU provider when an accelerator cannot be set up, and honours the thread count', async () => {
    const info = await engine.load(modelPath('mlp'), { executionProviders: ['cuda', 'cpu'], intraOpThreads: 1 });
    expect(info.executionProviders.at(-1)).toBe('cpu');
    const [, inputs] = CASES[0] as [string, Record<string, EngineTensor>];
    expect(await engine.run(clone(inputs))).toEqual(await runInProcess('mlp', inputs));
  });

  it('keeps the event loop turning during a long forward pass', async () => {
    await engine.load(modelPath('slow'), CPU);
    const rows = 4096;
    let ticks = 0;
    let inFlight = true;
    const timer = setInterval(() => {
      if (inFlight) ticks++;
    }, 5);
    try {
      await engine.run({ features: { type: 'float32', dims: [rows, 64], data: floats(rows * 64, 3) } });
    } finally {
      inFlight = false;
      clearInterval(timer);
    }
    // An engine that ran ORT on this thread would block it: at most one tick before the run.
    expect(ticks).toBeGreaterThanOrEqual(3);
  });
});

describe('thread engine lifecycle', () => {
  it('rejects a run before any model is loaded', async () => {
    const engine = createThreadEngine();
    try {
      await expect(engine.run({})).rejects.toThrow(/no model loaded/);
    } finally {
      await engine.close();
    }
  });

  it('closes idempotently and rejects calls after close', async () => {
    const engine = createThreadEngine();
    await engine.load(modelPath('gather'), CPU);
    await Promise.all([engine.close(), engine.close()]);
    await engine.close();
    await expect(engine.run({ idx: { type: 'int64', dims: [1, 1], data: new BigInt64Array([0n]) } })).rejects.toThrow(/closed/);
    await expect(engine.load(modelPath('gather'), CPU)).rejects.toThrow(/closed/);
  });

  it('rejects a call still in flight when the engine closes', async () => {
    const engine = createThreadEngine();
    await engine.load(modelPath('slow'), CPU);
    const running = engine.run({ features: { type: 'float32', dims: [1024, 64], data: floats(1024 * 64, 4) } });
    const rejected = expect(running).rejects.toThrow(/closed/);
    await engine.close();
    await rejected;
  });

  it('rejects later calls with a clear error when the thread dies', async () => {
    const engine = createThreadEngine();
    try {
      await engine.load(modelPath('gather'), CPU);
      // Nothing public kills the thread; reach the Worker to stand in for a crash. (Only while
      // it is idle: terminating a thread inside ORT's run aborts the process, see close().)
      await (engine as unknown as { worker: Worker }).worker.terminate();
      await expect(engine.run({ idx: { type: 'int64', dims: [1, 1], data: new BigInt64Array([0n]) } })).rejects.toThrow(
        /inference thread exited/,
      );
    } finally {
      await engine.close();
    }
  });
});
