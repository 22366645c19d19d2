import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { readOnnxMetadata } from '../../infra/registry/onnx-metadata.ts';
import { buildDynamicAxisModel } from '../fixtures/onnx-models.ts';
import { parseInputShapes, pinInputShapes, pinModelInputs, SINGLE_INPUT } from './input-shapes.ts';

const spec = (name: string, shape: number[]): TensorSpec => ({ name, datatype: 'FP32', shape });

describe('parseInputShapes', () => {
  it('reads the unnamed form for a single input and the named form for several', () => {
    expect(parseInputShapes('3,48,192')).toEqual(new Map([[SINGLE_INPUT, [3, 48, 192]]]));
    expect(parseInputShapes('x:3, 48 ,192; mask:16')).toEqual(
      new Map([
        ['x', [3, 48, 192]],
        ['mask', [16]],
      ]),
    );
    // TensorFlow exports name inputs like 'input:0': the dimensions follow the last colon.
    expect(parseInputShapes('input:0:3,32,32')).toEqual(new Map([['input:0', [3, 32, 32]]]));
  });

  it('refuses what is not a list of positive integers, a repeated input, and mixed forms', () => {
    for (const bad of ['', ';', '3,0,4', '3,-1', '3,x', 'x:', ':3', '3.5', 'x:2;x:3', '3,4;x:2']) {
      expect(() => parseInputShapes(bad), bad).toThrow(InvalidInputError);
    }
  });
});

describe('pinInputShapes', () => {
  it('replaces the dynamic non-batch dimensions and leaves the batch axis dynamic', () => {
    const pinned = pinInputShapes([spec('x', [-1, 3, -1, -1])], parseInputShapes('3,48,192'));
    expect(pinned).toEqual([spec('x', [-1, 3, 48, 192])]);
    const named = pinInputShapes([spec('a', [-1, -1]), spec('b', [-1, 4])], parseInputShapes('a:7'));
    expect(named.map((s) => s.shape)).toEqual([
      [-1, 7],
      [-1, 4],
    ]);
  });

  it('needs nothing for a model whose non-batch dimensions are fixed', () => {
    expect(pinInputShapes([spec('x', [-1, 64])])).toEqual([spec('x', [-1, 64])]);
  });

  it('names the input whose dimension is dynamic and not given, with the flag to give it', () => {
    expect(() => pinInputShapes([spec('x', [-1, 3, -1, -1])])).toThrow(/input x has dynamic non-batch dimensions.*--input-shape 3,H,W/);
    expect(() => pinInputShapes([spec('a', [-1, 2]), spec('b', [-1, -1])], parseInputShapes('a:2'))).toThrow(/input b .*--input-shape b:C/);
  });

  it('refuses a wrong rank, a changed fixed dimension, an unknown input, and the unnamed form for several inputs', () => {
    const x = [spec('x', [-1, 3, -1, -1])];
    expect(() => pinInputShapes(x, parseInputShapes('48,192'))).toThrow(/2 dimension\(s\) for input x, which has 3/);
    expect(() => pinInputShapes(x, parseInputShapes('4,48,192'))).toThrow(/dimension 1 of input x is fixed at 3 by the model, not 4/);
    expect(() => pinInputShapes(x, parseInputShapes('y:3,4,4'))).toThrow(/names input y; the model's inputs are x/);
    expect(() => pinInputShapes([spec('a', [-1, 2]), spec('b', [-1, 2])], parseInputShapes('2'))).toThrow(/2 inputs \(a, b\): name each/);
  });
});

describe('pinModelInputs', () => {
  it('fixes the dimensions in the model itself, which ONNX Runtime then runs at that shape', async () => {
    const bytes = buildDynamicAxisModel(); // seq FP32 [b, n] → total [b, 1]
    const [input] = readOnnxMetadata(bytes).inputs;
    expect(input?.shape).toEqual([-1, -1]);
    const pinned = pinModelInputs(bytes, pinInputShapes(readOnnxMetadata(bytes).inputs, parseInputShapes('5')));
    expect(readOnnxMetadata(pinned).inputs[0]?.shape).toEqual([-1, 5]);
    const session = await ort.InferenceSession.create(pinned);
    try {
      const out = await session.run({ seq: new ort.Tensor('float32', Float32Array.from([1, 2, 3, 4, 5, 1, 1, 1, 1, 1]), [2, 5]) });
      expect(Array.from(out.total?.data as Float32Array)).toEqual([15, 5]);
      await expect(session.run({ seq: new ort.Tensor('float32', new Float32Array(4), [1, 4]) })).rejects.toThrow();
    } finally {
      await session.release();
    }
  });
});
