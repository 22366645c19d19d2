/** The manifest's warm-up shape hints: what a publish may record for a model's inputs. */
import { describe, expect, it } from 'vitest';
import type { TensorSpec } from './manifest.ts';
import { normaliseWarmupShapes, warmupShapesProblem } from './warmup-shapes.ts';

const INPUTS: TensorSpec[] = [
  { name: 'x', datatype: 'FP32', shape: [-1, 3, -1, -1] },
  { name: 'mask', datatype: 'BOOL', shape: [-1, -1] },
];

describe('warmupShapesProblem', () => {
  it.each<[string, unknown]>([
    ['a dynamic image size', { x: [3, 48, 192] }],
    ['several inputs', { x: [3, 32, 32], mask: [16] }],
    ['none', {}],
  ])('accepts %s', (_, shapes) => {
    expect(warmupShapesProblem(INPUTS, shapes)).toBeUndefined();
  });

  it.each<[string, unknown, RegExp]>([
    ['an unknown input', { y: [3, 4, 4] }, /for y: the model has no such input \(its inputs: x, mask\)/],
    ['the wrong rank', { x: [48, 192] }, /gives 2 dimension\(s\); the input has 3 after the batch axis \(shape \[-1, 3, -1, -1\]\)/],
    ['a changed fixed dimension', { x: [1, 48, 192] }, /dimension 1 is fixed at 3 by the model, not 1/],
    ['zero', { x: [3, 0, 192] }, /positive integers/],
    ['a fraction', { x: [3, 4.5, 192] }, /positive integers/],
    ['a string', { x: '3,48,192' }, /positive integers/],
    ['a list', [[3, 48, 192]], /an object of dimension lists by input name/],
    ['null', null, /an object of dimension lists by input name/],
  ])('refuses %s', (_, shapes, message) => {
    expect(warmupShapesProblem(INPUTS, shapes)).toMatch(message);
  });
});

describe('normaliseWarmupShapes', () => {
  it("orders the hints as the model's inputs and copies them", () => {
    const given = { mask: [16], x: [3, 48, 192] };
    const out = normaliseWarmupShapes(INPUTS, given);
    expect(Object.keys(out)).toEqual(['x', 'mask']);
    expect(out).toEqual(given);
    expect(out.x).not.toBe(given.x);
  });

  it('keeps an input named __proto__ as an input', () => {
    const inputs: TensorSpec[] = [{ name: '__proto__', datatype: 'FP32', shape: [-1, -1] }];
    const given = JSON.parse('{"__proto__": [8]}') as Record<string, number[]>;
    const out = normaliseWarmupShapes(inputs, given);
    expect(Object.hasOwn(out, '__proto__')).toBe(true);
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
  });
});
