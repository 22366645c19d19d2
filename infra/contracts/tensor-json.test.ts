// Output tensors as JSON text from their packed elements: the same text as JSON.stringify of the same body, slice by slice, and a byte bound that holds.
import { describe, expect, it } from 'vitest';
import { DATATYPES, type Datatype } from './datatypes.ts';
import type { OipTensor } from './oip.ts';
import { rowsTensor, type TensorData } from './packed-tensors.ts';
import { jsonBytesBound, jsonParts, maxJsonElementBytes, outputElements } from './tensor-json.ts';

/** Six elements per datatype, extremes, NaN and ±inf among the floats. */
const SAMPLES: Record<Datatype, TensorData> = {
  BOOL: Uint8Array.from([1, 0, 1, 0, 0, 1]),
  UINT8: Uint8Array.from([0, 1, 255, 7, 8, 9]),
  INT8: Int8Array.from([-128, 0, 127, -1, 2, -3]),
  UINT16: Uint16Array.from([0, 65535, 3, 4, 5, 6]),
  INT16: Int16Array.from([-32768, 32767, 0, -4, 5, 6]),
  // Half bits: 1, -2, the smallest subnormal, -0, +inf and NaN.
  FP16: Uint16Array.from([0x3c00, 0xc000, 0x0001, 0x8000, 0x7c00, 0x7e00]),
  UINT32: Uint32Array.from([0, 4294967295, 1, 2, 3, 4]),
  INT32: Int32Array.from([-2147483648, 2147483647, 0, -1, 1, 2]),
  FP32: Float32Array.from([0.1, -0, -3.4e38, Number.NaN, -1.1754943508222875e-38, Number.NEGATIVE_INFINITY]),
  UINT64: BigUint64Array.from([0n, 2n ** 64n - 1n, 2n ** 53n + 1n, 4n, 5n, 6n]),
  INT64: BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n, -(2n ** 53n) - 1n, 0n, 1n, -1n]),
  FP64: Float64Array.from([Math.PI, -0, -Number.MAX_VALUE, -2.2250738585072014e-308, Number.POSITIVE_INFINITY, 1]),
  BYTES: ['', 'a', 'héllo "wörld"', '日本\\', '\u0001\u001f', '\ud800'],
};

function resource(outputs: OipTensor[]) {
  return {
    id: 'job_1',
    model: 'm',
    version: '1',
    status: 'succeeded',
    outputs,
    createdAt: '2020-01-01T00:00:00.000Z',
    timings: { queueMs: 1 },
  };
}

const text = (body: object, slice?: number) => [...jsonParts(body, slice)].join('');

describe('jsonParts', () => {
  it.each(DATATYPES)('%s: the same text as JSON.stringify, whatever the slice', (datatype) => {
    const body = resource([rowsTensor(`t_${datatype}`, datatype, [2, 3], SAMPLES[datatype])]);
    const expected = JSON.stringify(body);
    for (const slice of [1, 2, 4, 6, 100]) expect(text(body, slice)).toBe(expected);
  });

  it('rows of a tensor, several outputs, plain JSON tensors (a tombstone) and bodies without outputs, as JSON.stringify writes them', () => {
    const body = {
      model_name: 'm',
      id: 'r',
      outputs: [
        rowsTensor('a', 'FP32', [3, 2], Float32Array.from([1, 2, 3, 4, 5, 6]), 1, 3),
        { name: 'plain', datatype: 'INT64', shape: [2], data: [1, '18446744073709551615'], parameters: { p: 1 } } as OipTensor,
        rowsTensor('empty', 'FP32', [0, 4], new Float32Array(0)),
      ],
    };
    expect(text(body, 1)).toBe(JSON.stringify(body));
    const bare = { id: 'x', status: 'queued', outputs: undefined, error: { code: 'c', message: 'm' } };
    expect(text(bare)).toBe(JSON.stringify(bare));
    expect(text({})).toBe('{}');
  });

  it('never builds the JSON array a rowsTensor makes when its data is read', () => {
    const t = rowsTensor('y', 'FP32', [1, 4], Float32Array.from([1, 2, 3, 4]));
    let read = false;
    const data = Object.getOwnPropertyDescriptor(t, 'data')?.get;
    Object.defineProperty(t, 'data', {
      enumerable: true,
      get: () => {
        read = true;
        return data?.();
      },
    });
    expect(text(resource([t]))).toContain('"data":[1,2,3,4]');
    expect(read).toBe(false);
  });
});

describe('jsonBytesBound', () => {
  it.each(DATATYPES)("%s: at least the JSON's bytes, from the shapes and widths alone", (datatype) => {
    const body = resource([rowsTensor('t', datatype, [2, 3], SAMPLES[datatype])]);
    expect(jsonBytesBound(body)).toBeGreaterThanOrEqual(Buffer.byteLength(JSON.stringify(body)));
  });

  it('the widest element of each datatype fits its width', () => {
    const widest: Record<Exclude<Datatype, 'BYTES'>, unknown> = {
      BOOL: false,
      UINT8: 255,
      INT8: -128,
      UINT16: 65535,
      INT16: -32768,
      UINT32: 4294967295,
      INT32: -2147483648,
      UINT64: '18446744073709551615',
      INT64: '-9223372036854775808',
      // The smallest subnormal half, the smallest normal float and double: the longest digits, with an exponent.
      FP16: -(2 ** -24),
      FP32: -(2 ** -126),
      FP64: -(2 ** -1022),
    };
    for (const [datatype, value] of Object.entries(widest)) {
      expect(`${JSON.stringify(value)},`.length).toBeLessThanOrEqual(maxJsonElementBytes(datatype as Exclude<Datatype, 'BYTES'>));
    }
  });

  it("counts the elements of every output's shape, and skips outputs a binary answer's header carries without data", () => {
    const outputs = [rowsTensor('a', 'FP32', [2, 3], new Float32Array(6)), rowsTensor('b', 'BOOL', [4], new Uint8Array(4))];
    expect(outputElements(outputs)).toBe(10);
    const header = { outputs: [{ name: 'a', datatype: 'FP32', shape: [1_000_000], parameters: { binary_data_size: 4_000_000 } }] };
    expect(jsonBytesBound(header)).toBe(Buffer.byteLength(JSON.stringify(header)));
  });
});
