import { describe, expect, it } from 'vitest';
import { DATATYPES, type Datatype, type OipTensor } from '../../infra/contracts/oip.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { EngineTensor } from './engine.ts';
import {
  concatRows,
  datatypeToDtype,
  decodeHalf,
  dtypeToDatatype,
  encodeHalf,
  engineToOip,
  forTransfer,
  oipToEngine,
  sliceRows,
  splitRows,
} from './tensor-codec.ts';

/** Representative values for each datatype, including each type's extremes. */
const SAMPLES: Record<Datatype, OipTensor['data']> = {
  BOOL: [true, false, false, true],
  UINT8: [0, 1, 254, 255],
  UINT16: [0, 1, 65534, 65535],
  UINT32: [0, 7, 4294967294, 4294967295],
  UINT64: [0, 9007199254740991, '9007199254740993', '18446744073709551615'],
  INT8: [-128, -1, 0, 127],
  INT16: [-32768, -1, 0, 32767],
  INT32: [-2147483648, -5, 0, 2147483647],
  INT64: ['-9223372036854775808', -9007199254740991, 42, '9223372036854775807'],
  FP16: [0, -0, 1.5, 65504],
  FP32: [0.5, -1.25, 3.4028234663852886e38, 2 ** -149],
  FP64: [Math.PI, -Number.MAX_VALUE, Number.MIN_VALUE, 0],
  BYTES: ['a', '', 'héllo', '0'],
};

const tensor = (datatype: Datatype, data: OipTensor['data'], shape = [2, data.length / 2]): OipTensor => ({
  name: 't',
  shape,
  datatype,
  data,
});

describe('datatype mapping', () => {
  it('maps every OIP datatype to an engine dtype and back', () => {
    for (const d of DATATYPES) expect(dtypeToDatatype(datatypeToDtype(d))).toBe(d);
    expect(datatypeToDtype('FP16')).toBe('float16');
    expect(datatypeToDtype('BYTES')).toBe('string');
  });
});

describe('oipToEngine / engineToOip', () => {
  it.each(DATATYPES.map((d) => [d]))('round-trips %s', (datatype) => {
    const input = tensor(datatype, SAMPLES[datatype]);
    const engine = oipToEngine(input);
    expect(engine.dims).toEqual([2, 2]);
    expect(engine.data.length).toBe(4);
    const back = engineToOip('out', engine);
    expect(back).toEqual({ ...input, name: 'out' });
  });

  it('gives int64 beyond 2^53 as decimal strings and small ones as numbers', () => {
    const engine = oipToEngine(tensor('INT64', [1, '9007199254740993'], [2]));
    expect(engine.data).toEqual(new BigInt64Array([1n, 9007199254740993n]));
    expect(engineToOip('x', engine).data).toEqual([1, '9007199254740993']);
  });

  it('accepts 0/1 for BOOL and stores 0/1 bytes', () => {
    const engine = oipToEngine(tensor('BOOL', [1, 0, true, false], [4]));
    expect(engine.data).toEqual(new Uint8Array([1, 0, 1, 0]));
    expect(engineToOip('b', engine).data).toEqual([true, false, true, false]);
  });

  it.each<[Datatype, unknown]>([
    ['INT8', 128],
    ['UINT8', -1],
    ['INT32', 1.5],
    ['UINT32', 2 ** 32],
    ['INT64', 1.5],
    ['INT64', '9223372036854775808'],
    ['INT64', '12abc'],
    ['UINT64', '-1'],
    ['BOOL', 2],
    ['BOOL', 'true'],
    ['FP32', '1.0'],
    ['FP16', true],
    ['BYTES', 3],
  ])('refuses %s element %j', (datatype, value) => {
    expect(() => oipToEngine(tensor(datatype, [value as number], [1]))).toThrow(InvalidInputError);
  });

  it('refuses data whose length does not match the shape', () => {
    expect(() => oipToEngine(tensor('FP32', [1, 2, 3], [2, 2]))).toThrow(/holds 4 elements, data has 3/);
    expect(() => oipToEngine(tensor('FP32', [1], [-1]))).toThrow(InvalidInputError);
  });

  it('refuses an engine tensor whose data does not fit its type or dims', () => {
    expect(() => engineToOip('x', { type: 'int64', dims: [1], data: new Float32Array(1) })).toThrow(/not the array for int64/);
    expect(() => engineToOip('x', { type: 'float32', dims: [3], data: new Float32Array(2) })).toThrow(/hold 3 elements/);
  });
});

describe('FP16', () => {
  it.each<[number, number]>([
    [0, 0x0000],
    [-0, 0x8000],
    [1, 0x3c00],
    [-2, 0xc000],
    [0.5, 0x3800],
    [65504, 0x7bff], // largest finite half
    [65519.99, 0x7bff], // just under the rounding boundary to infinity
    [65520, 0x7c00], // the tie rounds to even: infinity
    [1e6, 0x7c00],
    [-Infinity, 0xfc00],
    [2 ** -14, 0x0400], // smallest normal
    [2 ** -24, 0x0001], // smallest subnormal
    [2 ** -25, 0x0000], // tie between 0 and the smallest subnormal: even is 0
    [2 ** -25 * 1.0001, 0x0001], // just above the tie
    [3 * 2 ** -25, 0x0002], // tie between 1 and 2 subnormal units: even is 2
    [2 ** -14 - 2 ** -25, 0x0400], // the largest subnormal's upper tie carries into the smallest normal
    [1 + 2 ** -11, 0x3c00], // tie between 1 and 1+2^-10: even is 1
    [1 + 3 * 2 ** -11, 0x3c02], // tie between 1+2^-10 and 1+2^-9: even is 0x3c02
    [1 + 2 ** -11 + 2 ** -40, 0x3c01], // above the tie by less than float32 can see: must round up
    [0.1, 0x2e66],
  ])('encodes %d as %s', (value, bits) => {
    expect(encodeHalf(value)).toBe(bits);
  });

  it('encodes NaN as a NaN and decodes it back', () => {
    const bits = encodeHalf(NaN);
    expect(bits & 0x7c00).toBe(0x7c00);
    expect(bits & 0x3ff).not.toBe(0);
    expect(decodeHalf(bits)).toBeNaN();
  });

  it('decodes special values', () => {
    expect(decodeHalf(0x7c00)).toBe(Infinity);
    expect(decodeHalf(0xfc00)).toBe(-Infinity);
    expect(Object.is(decodeHalf(0x8000), -0)).toBe(true);
    expect(decodeHalf(0x0001)).toBe(2 ** -24);
    expect(decodeHalf(0x03ff)).toBe(1023 * 2 ** -24);
    expect(decodeHalf(0x7bff)).toBe(65504);
  });

  it('round-trips every finite half exactly', () => {
    for (let bits = 0; bits < 0x10000; bits++) {
      if ((bits & 0x7c00) === 0x7c00) continue;
      expect(encodeHalf(decodeHalf(bits))).toBe(bits);
    }
  });

  it('rounds FP16 input values to the nearest half through the OIP codec, and refuses those that round to infinity', () => {
    const engine = oipToEngine(tensor('FP16', [0.1, 65519], [2]));
    expect(engineToOip('h', engine).data).toEqual([decodeHalf(0x2e66), 65504]);
    expect(() => oipToEngine(tensor('FP16', [0.1, 1e9], [2]))).toThrow(InvalidInputError);
  });
});

describe('concatRows / sliceRows / splitRows', () => {
  const f32 = (rows: number, cols: number, start: number): EngineTensor => ({
    type: 'float32',
    dims: [rows, cols],
    data: Float32Array.from({ length: rows * cols }, (_, i) => start + i),
  });

  it('concatenates along axis 0 without touching the parts', () => {
    const a = f32(1, 3, 0);
    const b = f32(2, 3, 3);
    const joined = concatRows([a, b]);
    expect(joined.dims).toEqual([3, 3]);
    expect(Array.from(joined.data as Float32Array)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(joined.data).not.toBe(a.data);
    expect(a.data.length).toBe(3);
  });

  it('concatenates views that sit at an offset in a larger buffer', () => {
    const backing = new BigInt64Array([9n, 1n, 2n, 9n]);
    const view: EngineTensor = { type: 'int64', dims: [2, 1], data: new BigInt64Array(backing.buffer, 8, 2) };
    const joined = concatRows([view, { type: 'int64', dims: [1, 1], data: new BigInt64Array([3n]) }]);
    expect(Array.from(joined.data as BigInt64Array)).toEqual([1n, 2n, 3n]);
  });

  it('concatenates strings and bools', () => {
    expect(
      concatRows([
        { type: 'string', dims: [1], data: ['a'] },
        { type: 'string', dims: [2], data: ['b', 'c'] },
      ]).data,
    ).toEqual(['a', 'b', 'c']);
    const bools = concatRows([
      { type: 'bool', dims: [1, 2], data: new Uint8Array([1, 0]) },
      { type: 'bool', dims: [1, 2], data: new Uint8Array([0, 1]) },
    ]);
    expect(bools).toEqual({ type: 'bool', dims: [2, 2], data: new Uint8Array([1, 0, 0, 1]) });
  });

  it('refuses parts of different dtypes or trailing dims, and no parts', () => {
    expect(() => concatRows([f32(1, 3, 0), { type: 'float64', dims: [1, 3], data: new Float64Array(3) }])).toThrow(/float64/);
    expect(() => concatRows([f32(1, 3, 0), f32(1, 2, 0)])).toThrow(/dims/);
    expect(() => concatRows([f32(1, 3, 0), { type: 'float32', dims: [3], data: new Float32Array(3) }])).toThrow(/dims/);
    expect(() => concatRows([])).toThrow(/no parts/);
  });

  it('splits back into the parts that were joined', () => {
    const parts = [f32(2, 2, 0), f32(1, 2, 4), f32(3, 2, 6)];
    const split = splitRows(concatRows(parts), [2, 1, 3]);
    expect(split).toEqual(parts);
  });

  it('slices rows of a rank-3 tensor and allows empty slices', () => {
    const t: EngineTensor = { type: 'int32', dims: [3, 2, 2], data: Int32Array.from({ length: 12 }, (_, i) => i) };
    expect(sliceRows(t, 1, 2)).toEqual({ type: 'int32', dims: [1, 2, 2], data: new Int32Array([4, 5, 6, 7]) });
    expect(sliceRows(t, 3, 3).dims).toEqual([0, 2, 2]);
    expect(() => sliceRows(t, 2, 4)).toThrow(/outside/);
    expect(() => splitRows(t, [1, 1])).toThrow(/sum to 2/);
  });
});

describe('forTransfer', () => {
  it('passes whole buffers as they are and copies views on larger buffers', () => {
    const whole = new Float32Array([1, 2]);
    const backing = new Float32Array([0, 7, 8, 0]);
    const view = new Float32Array(backing.buffer, 4, 2);
    const { tensors, transfer } = forTransfer({
      a: { type: 'float32', dims: [2], data: whole },
      b: { type: 'float32', dims: [2], data: view },
      s: { type: 'string', dims: [1], data: ['x'] },
    });
    expect(tensors.a?.data).toBe(whole);
    expect(tensors.b?.data).not.toBe(view);
    expect(Array.from(tensors.b?.data as Float32Array)).toEqual([7, 8]);
    expect(transfer).toEqual([whole.buffer, (tensors.b!.data as Float32Array).buffer]);
  });

  it('lists a buffer once when two tensors share it', () => {
    const shared = new Int32Array([1, 2]);
    const { transfer, tensors } = forTransfer({
      a: { type: 'int32', dims: [2], data: shared },
      b: { type: 'int32', dims: [2], data: shared },
    });
    expect(new Set(transfer).size).toBe(transfer.length);
    expect(tensors.b?.data).toEqual(shared);
  });
});
