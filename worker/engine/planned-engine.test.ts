import { describe, expect, it } from 'vitest';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import type { EngineTensor, InferenceEngine } from './engine.ts';
import { plannedEngine } from './planned-engine.ts';

const VAD: { inputs: TensorSpec[]; outputs: TensorSpec[] } = {
  inputs: [
    { name: 'input', datatype: 'FP32', shape: [-1, 2] },
    { name: 'state', datatype: 'FP32', shape: [-1, 2, 1], batchAxis: 1 },
    { name: 'sr', datatype: 'INT64', shape: [-1], batchAxis: 'none' },
  ],
  outputs: [{ name: 'stateN', datatype: 'FP32', shape: [-1, 2, 1], batchAxis: 1 }],
};

/** Echoes `state` back as `stateN`, recording what it was fed. */
function echo(): InferenceEngine & { fed: Array<Record<string, EngineTensor>> } {
  const fed: Array<Record<string, EngineTensor>> = [];
  return {
    fed,
    load: async () => ({ inputNames: [], outputNames: [], loadMs: 0 }),
    close: async () => undefined,
    run: async (inputs) => {
      fed.push(inputs);
      return { stateN: inputs.state as EngineTensor };
    },
  };
}

describe('plannedEngine', () => {
  it('feeds the model its own layout and answers in row layout', async () => {
    const inner = echo();
    const engine = plannedEngine(inner, VAD.inputs, VAD.outputs);
    // Row layout: 3 rows; state row r = [layer 0, layer 1] = [r, 10 + r]
    const out = await engine.run({
      input: { type: 'float32', dims: [3, 2], data: new Float32Array(6) },
      state: { type: 'float32', dims: [3, 2, 1], data: Float32Array.from([0, 10, 1, 11, 2, 12]) },
      sr: { type: 'int64', dims: [3], data: BigInt64Array.from([8000n, 8000n, 8000n]) },
    });
    const fed = inner.fed[0] as Record<string, EngineTensor>;
    expect(fed.state?.dims).toEqual([2, 3, 1]);
    expect(Array.from(fed.state?.data as Float32Array)).toEqual([0, 1, 2, 10, 11, 12]);
    expect(fed.sr?.dims).toEqual([]);
    expect(Array.from(fed.sr?.data as BigInt64Array)).toEqual([8000n]);
    expect(fed.input?.dims).toEqual([3, 2]);
    expect(out.stateN?.dims).toEqual([3, 2, 1]);
    expect(Array.from(out.stateN?.data as Float32Array)).toEqual([0, 10, 1, 11, 2, 12]);
  });

  it('refuses a pass whose rows disagree on an input with no batch axis', async () => {
    const engine = plannedEngine(echo(), VAD.inputs, VAD.outputs);
    await expect(
      engine.run({
        input: { type: 'float32', dims: [2, 2], data: new Float32Array(4) },
        state: { type: 'float32', dims: [2, 2, 1], data: new Float32Array(4) },
        sr: { type: 'int64', dims: [2], data: BigInt64Array.from([8000n, 16000n]) },
      }),
    ).rejects.toThrow(/input "sr" has no batch axis/);
  });

  it('is the engine itself for a model that batches on axis 0', () => {
    const inner = echo();
    expect(plannedEngine(inner, [{ name: 'x', datatype: 'FP32', shape: [-1, 4] }], [{ name: 'y', datatype: 'FP32', shape: [-1] }])).toBe(
      inner,
    );
  });
});
