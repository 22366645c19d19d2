import { describe, expect, it } from 'vitest';
import { BINARY_ITEM_BYTES, type BinaryDatatype, encodeBinaryTensor, isBinaryTensor } from '../../infra/contracts/binary-tensor.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { decodeBinaryTensor, oipToEngine } from './tensor-codec.ts';

/** Per packed datatype: extremes, and for floats values that round (FP16 ties included). */
const SAMPLES: Record<BinaryDatatype, OipTensor['data']> = {
  BOOL: [true, false, 0, 1],
  UINT8: [0, 1, 254, 255],
  UINT16: [0, 1, 65534, 65535],
  UINT32: [0, 7, 4294967294, 4294967295],
  UINT64: [0, 9007199254740991, '9007199254740993', '18446744073709551615'],
  INT8: [-128, -1, 0, 127],
  INT16: [-32768, -1, 0, 32767],
  INT32: [-2147483648, -5, 0, 2147483647],
  INT64: ['-9223372036854775808', -9007199254740991, 42, '9223372036854775807'],
  FP16: [0.1, -0, 1 + 2 ** -11, 65504],
  FP32: [0.1, -1.25, 3.4028234663852886e38, 2 ** -149],
  FP64: [Math.PI, -Number.MAX_VALUE, Number.MIN_VALUE, -0],
};

const DATATYPES = Object.keys(SAMPLES) as BinaryDatatype[];

describe('binary tensors (bulk chunk inputs)', () => {
  it.each(DATATYPES)('%s: packed and decoded equals the JSON path, element for element', (datatype) => {
    const data = SAMPLES[datatype];
    const packed = encodeBinaryTensor('t', datatype, [2, 2], [data.slice(0, 2), data.slice(2)]);
    expect(isBinaryTensor(packed)).toBe(true);
    expect(typeof packed.data).toBe('string');
    expect(Buffer.from(packed.data, 'base64').byteLength).toBe(4 * BINARY_ITEM_BYTES[datatype]);
    const decoded = decodeBinaryTensor(packed);
    const viaJson = oipToEngine({ name: 't', datatype, shape: [2, 2], data });
    expect(decoded.type).toBe(viaJson.type);
    expect(decoded.dims).toEqual([2, 2]);
    expect(decoded.data.constructor).toBe(viaJson.data.constructor);
    expect(Array.from(decoded.data as ArrayLike<unknown>)).toEqual(Array.from(viaJson.data as ArrayLike<unknown>));
  });

  it('FP16 rounds like the JSON path: 1 + 2^-11 is a tie that goes to even (1.0)', () => {
    const decoded = decodeBinaryTensor(encodeBinaryTensor('h', 'FP16', [2], [[1 + 2 ** -11, 0.1]]));
    expect(Array.from(decoded.data as Uint16Array)).toEqual([0x3c00, 0x2e66]);
  });

  it('is little-endian on the wire', () => {
    const packed = encodeBinaryTensor('t', 'INT32', [1], [[0x01020304]]);
    expect([...Buffer.from(packed.data, 'base64')]).toEqual([4, 3, 2, 1]);
  });

  it('refuses bytes that do not fit the shape as invalid input', () => {
    const packed = encodeBinaryTensor(
      't',
      'FP32',
      [2, 3],
      [
        [1, 2, 3],
        [4, 5, 6],
      ],
    );
    const short = { ...packed, shape: [2, 4] };
    expect(() => decodeBinaryTensor(short)).toThrow(InvalidInputError);
    expect(() => decodeBinaryTensor(short)).toThrow(/needs 32 bytes, the base64 data holds 24/);
    expect(() => decodeBinaryTensor({ ...packed, data: packed.data.slice(0, 8) })).toThrow(InvalidInputError);
  });

  it('refuses a BOOL byte other than 0/1 and non-finite floats, like a JSON request', () => {
    const bool = { ...encodeBinaryTensor('b', 'BOOL', [2], [[true, false]]), data: Buffer.from([1, 2]).toString('base64') };
    expect(() => decodeBinaryTensor(bool)).toThrow(/element 1 is not a valid BOOL/);
    const nan = {
      ...encodeBinaryTensor('f', 'FP32', [1], [[0]]),
      data: Buffer.from(new Float32Array([Number.NaN]).buffer).toString('base64'),
    };
    expect(() => decodeBinaryTensor(nan)).toThrow(InvalidInputError);
    const inf = { ...encodeBinaryTensor('h', 'FP16', [1], [[0]]), data: Buffer.from(new Uint16Array([0x7c00]).buffer).toString('base64') };
    expect(() => decodeBinaryTensor(inf)).toThrow(InvalidInputError);
  });

  it('refuses values that do not fill the shape when packing', () => {
    expect(() => encodeBinaryTensor('t', 'FP32', [2, 2], [[1, 2, 3]])).toThrow(/holds 4 elements, got 3/);
    expect(() => encodeBinaryTensor('t', 'FP32', [1, 2], [[1, 2, 3]])).toThrow(/holds 2 elements/);
  });

  it('decodes into an aligned buffer of its own', () => {
    const decoded = decodeBinaryTensor(encodeBinaryTensor('d', 'FP64', [3], [[1, 2, 3]]));
    const data = decoded.data as Float64Array;
    expect(data.byteOffset).toBe(0);
    expect(data.buffer.byteLength).toBe(24);
  });
});
