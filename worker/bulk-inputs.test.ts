import { describe, expect, it } from 'vitest';
import { encodeBinaryTensor } from '../infra/contracts/binary-tensor.ts';
import type { ModelManifest, TensorSpec } from '../infra/contracts/manifest.ts';
import { validateInferRequest } from '../infra/contracts/oip-validate.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { decodeBulkInputs, hasBinaryInputs } from './bulk-inputs.ts';

const manifest: { inputs: TensorSpec[] } = {
  inputs: [
    { name: 'x', datatype: 'FP32', shape: [-1, 2] },
    { name: 's', datatype: 'BYTES', shape: [-1] },
  ],
};
const x = encodeBinaryTensor(
  'x',
  'FP32',
  [2, 2],
  [
    [1, 2],
    [3, 4],
  ],
);
const s = { name: 's', datatype: 'BYTES' as const, shape: [2], data: ['a', 'b'] };
const bulk = { runId: 'r', chunk: 0, ids: [1, 2], output: { bucket: 'b', prefix: 'p/' } };

describe('bulk chunk inputs', () => {
  it('decodes packed and JSON inputs together', () => {
    const { tensors, rows } = decodeBulkInputs([s, x], manifest);
    expect(rows).toBe(2);
    expect(tensors.x?.data).toEqual(new Float32Array([1, 2, 3, 4]));
    expect(tensors.s?.data).toEqual(['a', 'b']);
  });

  it('takes the packed path only for bulk chunks', () => {
    expect(hasBinaryInputs({ inputs: [x, s], bulk })).toBe(true);
    expect(hasBinaryInputs({ inputs: [x, s] })).toBe(false);
    expect(hasBinaryInputs({ inputs: [s], bulk })).toBe(false);
  });

  it('is refused by the OIP validator that API requests and other jobs go through', () => {
    // The validator reads only inputs and outputs; the rest of a manifest does not matter here.
    const model = { ...manifest, name: 'm', version: '1', outputs: [] } as unknown as ModelManifest;
    expect(() => validateInferRequest({ inputs: [x, s] }, model)).toThrow(/"data" must be an array/);
  });

  it.each([
    ['a missing input', [x]],
    ['a repeated input', [x, x]],
    ['a wrong datatype', [{ ...x, datatype: 'FP64' as const }, s]],
    ['a wrong fixed dim', [encodeBinaryTensor('x', 'FP32', [1, 4], [[1, 2, 3, 4]]), { ...s, shape: [1], data: ['a'] }]],
    ['zero rows', [encodeBinaryTensor('x', 'FP32', [0, 2], []), { ...s, shape: [0], data: [] }]],
    ['rows that disagree', [x, { ...s, shape: [1], data: ['a'] }]],
    [
      'bytes that do not fit',
      [
        { ...x, shape: [3, 2] },
        { ...s, shape: [3], data: ['a', 'b', 'c'] },
      ],
    ],
  ])('refuses %s as invalid input', (_, inputs) => {
    expect(() => decodeBulkInputs(inputs, manifest)).toThrow(InvalidInputError);
  });
});
