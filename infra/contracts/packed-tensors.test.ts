// Packed tensors: every datatype through pack → bytes → views, an unaligned reply, BYTES, and specs that do not fit their bytes.
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import type { Datatype } from './oip.ts';
import {
  aligned,
  fromJsonData,
  type PackedSpec,
  packedData,
  packedSize,
  packTensors,
  rowBytes,
  rowsTensor,
  type TensorData,
  type TensorToPack,
  tensorData,
  wireBytes,
} from './packed-tensors.ts';

/** Two rows of three elements per datatype, extremes included. */
const SAMPLES: Record<Datatype, TensorData> = {
  BOOL: Uint8Array.from([1, 0, 1, 0, 0, 1]),
  UINT8: Uint8Array.from([0, 1, 255, 7, 8, 9]),
  INT8: Int8Array.from([-128, 0, 127, -1, 2, -3]),
  UINT16: Uint16Array.from([0, 65535, 3, 4, 5, 6]),
  INT16: Int16Array.from([-32768, 32767, 0, -4, 5, 6]),
  // Half bits: 1, -2, 0.5, +0, -0 and 65504.
  FP16: Uint16Array.from([0x3c00, 0xc000, 0x3800, 0x0000, 0x8000, 0x7bff]),
  UINT32: Uint32Array.from([0, 4294967295, 1, 2, 3, 4]),
  INT32: Int32Array.from([-2147483648, 2147483647, 0, -1, 1, 2]),
  FP32: Float32Array.from([0.1, -0, 3.4e38, -1.5, 1e-45, 2]),
  UINT64: BigUint64Array.from([0n, 2n ** 64n - 1n, 2n ** 53n + 1n, 4n, 5n, 6n]),
  INT64: BigInt64Array.from([-(2n ** 63n), 2n ** 63n - 1n, -(2n ** 53n) - 1n, 0n, 1n, -1n]),
  FP64: Float64Array.from([Math.PI, -0, Number.MAX_VALUE, Number.MIN_VALUE, -1e300, 1]),
  BYTES: ['', 'a', 'héllo wörld', '日本', 'x'.repeat(300), '\u0000'],
};

const DATATYPES = Object.keys(SAMPLES) as Datatype[];

function all(): TensorToPack[] {
  return DATATYPES.map((datatype) => ({ name: `t_${datatype}`, datatype, shape: [2, 3], data: SAMPLES[datatype] }));
}

/** `bytes` copied to an odd offset of a larger buffer, as a Redis reply sliced from a socket chunk may be. */
function unaligned(bytes: Buffer): Buffer {
  const host = Buffer.alloc(bytes.byteLength + 16);
  host.set(bytes, 3);
  return host.subarray(3, 3 + bytes.byteLength);
}

describe('packTensors / tensorData', () => {
  it('packedSize is the packed buffer’s length, without packing', () => {
    expect(packedSize(all())).toBe(packTensors(all()).bytes.length);
    const odd: TensorToPack[] = [
      { name: 'a', datatype: 'BYTES', shape: [2], data: ['é', ''] },
      { name: 'b', datatype: 'UINT8', shape: [3], data: new Uint8Array(3) },
    ];
    expect(packedSize(odd)).toBe(packTensors(odd).bytes.length);
    expect(packedSize([])).toBe(0);
  });

  it('round-trips every datatype, each tensor at an 8-byte aligned offset', () => {
    const { specs, bytes } = packTensors(all());
    expect(bytes.byteOffset % 8).toBe(0);
    expect(bytes.byteLength % 8).toBe(0);
    for (const [i, spec] of specs.entries()) {
      const datatype = DATATYPES[i] as Datatype;
      expect(spec).toMatchObject({ name: `t_${datatype}`, datatype, shape: [2, 3] });
      expect(spec.offset % 8).toBe(0);
      const back = tensorData(spec, bytes);
      expect(datatype === 'BYTES' ? back : Array.from(back as ArrayLike<unknown>)).toEqual(
        datatype === 'BYTES' ? SAMPLES.BYTES : Array.from(SAMPLES[datatype] as ArrayLike<unknown>),
      );
    }
    // -0 survives (JSON would have made it 0).
    expect(Object.is((tensorData(specs[DATATYPES.indexOf('FP32')] as PackedSpec, bytes) as Float32Array)[1], -0)).toBe(true);
  });

  it('gives views over the bytes, not copies', () => {
    const { specs, bytes } = packTensors(all());
    const spec = specs[DATATYPES.indexOf('INT32')] as PackedSpec;
    const view = tensorData(spec, bytes) as Int32Array;
    expect(view.buffer).toBe(bytes.buffer);
    bytes.writeInt32LE(42, spec.offset);
    expect(view[0]).toBe(42);
  });

  it('refuses unaligned bytes until aligned() copies them once; aligned bytes pass through untouched', () => {
    const packed = packTensors(all());
    const reply = unaligned(packed.bytes);
    const fp64 = packed.specs[DATATYPES.indexOf('FP64')] as PackedSpec;
    expect(() => tensorData(fp64, reply)).toThrow(/unaligned/);
    const fixed = aligned(reply);
    expect(fixed.byteOffset % 8).toBe(0);
    expect(fixed.equals(packed.bytes)).toBe(true);
    expect(Array.from(tensorData(fp64, fixed) as Float64Array)).toEqual(Array.from(SAMPLES.FP64 as Float64Array));
    expect(aligned(packed.bytes)).toBe(packed.bytes);
  });

  it('packs BYTES as a 4-byte little-endian length then UTF-8, per element', () => {
    const { specs, bytes } = packTensors([{ name: 's', datatype: 'BYTES', shape: [1, 2], data: ['é', 'ab'] }]);
    const spec = specs[0] as PackedSpec;
    expect([...bytes.subarray(spec.offset, spec.offset + spec.length)]).toEqual([2, 0, 0, 0, 0xc3, 0xa9, 2, 0, 0, 0, 0x61, 0x62]);
  });

  it('packs tensors with no elements (a zero-length axis) and scalars', () => {
    const { specs, bytes } = packTensors([
      { name: 'empty', datatype: 'FP32', shape: [2, 0], data: new Float32Array(0) },
      { name: 'one', datatype: 'INT16', shape: [], data: Int16Array.from([-7]) },
    ]);
    expect(Array.from(tensorData(specs[0] as PackedSpec, bytes) as Float32Array)).toEqual([]);
    expect(Array.from(tensorData(specs[1] as PackedSpec, bytes) as Int16Array)).toEqual([-7]);
  });
});

describe('specs that do not fit their bytes', () => {
  const { specs, bytes } = packTensors(all());
  const spec = (datatype: Datatype) => specs[DATATYPES.indexOf(datatype)] as PackedSpec;
  it.each<[string, PackedSpec]>([
    ['bytes past the end', { ...spec('FP32'), offset: bytes.byteLength - 8 }],
    ['a negative offset', { ...spec('FP32'), offset: -8 }],
    ['a fractional offset', { ...spec('FP32'), offset: 0.5 }],
    ['a shape needing more bytes than its length', { ...spec('FP32'), shape: [3, 3] }],
    ['a length that is not the shape’s', { ...spec('INT64'), length: 40 }],
    ['BYTES data holding fewer elements than the shape', { ...spec('BYTES'), shape: [2, 4] }],
    ['BYTES data with bytes left over', { ...spec('BYTES'), shape: [1, 3] }],
    ['BYTES lengths running past the data', { ...spec('BYTES'), length: 20 }],
    ['an unknown datatype', { ...spec('FP32'), datatype: 'FP8' as Datatype }],
  ])('%s is invalid input', (_name, bad) => {
    expect(() => tensorData(bad, bytes)).toThrow(InvalidInputError);
  });
});

describe('rows and the JSON edge', () => {
  it('locates the bytes of a row range of a numeric tensor', () => {
    const { specs, bytes } = packTensors(all());
    const spec = specs[DATATYPES.indexOf('INT16')] as PackedSpec;
    const { offset, length } = rowBytes(spec, 1, 2);
    expect(Array.from(new Int16Array(bytes.buffer, bytes.byteOffset + offset, length / 2))).toEqual([-4, 5, 6]);
    expect(() => rowBytes(specs[DATATYPES.indexOf('BYTES')] as PackedSpec, 0, 1)).toThrow(/BYTES/);
  });

  it('turns JSON data into packed data and rows back into JSON tensors', () => {
    expect(Array.from(fromJsonData('FP16', [1, -2, 0.5]) as Uint16Array)).toEqual([0x3c00, 0xc000, 0x3800]);
    expect(Array.from(fromJsonData('BOOL', [true, false, 1, 0]) as Uint8Array)).toEqual([1, 0, 1, 0]);
    expect(Array.from(fromJsonData('INT64', [1, '-9223372036854775808']) as BigInt64Array)).toEqual([1n, -(2n ** 63n)]);
    const { specs, bytes } = packTensors(all());
    const json = (datatype: Datatype) => {
      const s = specs[DATATYPES.indexOf(datatype)] as PackedSpec;
      return rowsTensor(s.name, datatype, s.shape, tensorData(s, bytes), 1, 2);
    };
    expect(json('BOOL')).toEqual({ name: 't_BOOL', datatype: 'BOOL', shape: [1, 3], data: [false, false, true] });
    expect(json('FP16').data).toEqual([0, -0, 65504]);
    expect(json('INT64').data).toEqual([0, 1, -1]);
    expect(json('UINT64').data).toEqual([4, 5, 6]);
    expect(rowsTensor('u', 'UINT64', [1, 2], BigUint64Array.from([2n ** 64n - 1n, 1n])).data).toEqual(['18446744073709551615', 1]);
    expect(json('BYTES').data).toEqual(['日本', 'x'.repeat(300), '\u0000']);
  });

  it("keeps an output's rows as a view for binary answers, and its JSON form for everything else", () => {
    const whole = Float32Array.from([1, 2, 3, 4, 5, 6]);
    const t = rowsTensor('y', 'FP32', [3, 2], whole, 1, 3);
    const view = packedData(t) as Float32Array;
    expect(view.buffer).toBe(whole.buffer); // no copy
    expect(Array.from(view)).toEqual([3, 4, 5, 6]);
    expect(Array.from(wireBytes('FP32', view))).toEqual(Array.from(new Uint8Array(whole.buffer, 8, 16)));
    // JSON sees a plain tensor; a spread copy too; the view never leaks into JSON.
    expect(JSON.parse(JSON.stringify(t))).toEqual({ name: 'y', datatype: 'FP32', shape: [2, 2], data: [3, 4, 5, 6] });
    expect({ ...t }).toEqual({ name: 'y', datatype: 'FP32', shape: [2, 2], data: [3, 4, 5, 6] });
    // A tensor that went through JSON is converted back once.
    expect(Array.from(packedData({ datatype: 'FP16', data: [1, 0.5] }) as Uint16Array)).toEqual([0x3c00, 0x3800]);
    expect(Array.from(wireBytes('BYTES', ['ab', '']))).toEqual([2, 0, 0, 0, 97, 98, 0, 0, 0, 0]);
  });
});

describe('BYTES in the 4-byte-length layout', () => {
  it('packs strings of every width in one pass, as Buffer.from would encode each, and reads them back', () => {
    const values = ['', 'a', 'héllo', '日本', '😀', '\ud800 lone', '\u0000', 'x'.repeat(1000)];
    const expected = Buffer.concat(values.flatMap((v) => [Buffer.from(Uint32Array.from([Buffer.byteLength(v)]).buffer), Buffer.from(v)]));
    const bytes = wireBytes('BYTES', values);
    expect(Buffer.from(bytes).equals(expected)).toBe(true);
    const back = tensorData({ name: 's', datatype: 'BYTES', shape: [values.length], offset: 0, length: bytes.byteLength }, bytes);
    expect(back).toEqual(values.map((v) => Buffer.from(v).toString('utf8')));
  });

  it('refuses a shape that declares more strings than 4 bytes each could hold, before reading any', () => {
    const spec: PackedSpec = { name: 's', datatype: 'BYTES', shape: [1_000_000_000], offset: 0, length: 8 };
    expect(() => tensorData(spec, new Uint8Array(8))).toThrow(/does not hold the 1000000000 elements/);
  });
});

describe('rowsTensor for a model that keeps its rows elsewhere', () => {
  it("shows a member's rows in the model's layout", () => {
    // Row layout [3 rows, 2 layers, 1]: row r = [r, 10 + r]; the model's state is [2, N, 1].
    const data = Float32Array.from([0, 10, 1, 11, 2, 12]);
    const t = rowsTensor('stateN', 'FP32', [3, 2, 1], data, 1, 3, 1);
    expect(t.shape).toEqual([2, 2, 1]);
    expect(t.data).toEqual([1, 2, 11, 12]);
    expect(Array.from(packedData(t) as Float32Array)).toEqual([1, 2, 11, 12]);
  });

  it('shows an output with no batch axis once', () => {
    const t = rowsTensor('y', 'FP32', [1, 3], Float32Array.from([1, 2, 3]), 0, 1, 'none');
    expect(t.shape).toEqual([3]);
    expect(t.data).toEqual([1, 2, 3]);
  });
});
