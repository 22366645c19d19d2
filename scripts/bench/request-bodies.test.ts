import { describe, expect, it } from 'vitest';
import type { TensorSpec } from '../../infra/contracts/manifest.ts';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { fromJsonData, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { benchInputs } from './bench-models.ts';
import { binaryRequestBodies, HEAD_VALUES, requestBodies } from './request-bodies.ts';

const spec = (name: string, datatype: TensorSpec['datatype'], shape: number[]): TensorSpec => ({ name, datatype, shape });
const parse = (body: string) => (JSON.parse(body) as { inputs: OipTensor[] }).inputs;

describe('requestBodies', () => {
  it('makes OIP request bodies of the input shapes, every input, `rows` rows', () => {
    const manifest = { inputs: [spec('image', 'FP32', [-1, 3, 4, 4]), spec('ids', 'INT64', [-1, 30]), spec('mask', 'BOOL', [-1, 2])] };
    const [image, ids, mask] = parse(requestBodies(manifest, 2)(7));
    expect(image).toMatchObject({ name: 'image', datatype: 'FP32', shape: [2, 3, 4, 4] });
    expect(image?.data).toHaveLength(96);
    expect(ids?.data).toHaveLength(60);
    expect(mask?.data.every((v) => typeof v === 'boolean')).toBe(true);
  });

  it('starts each row as benchInputs does for the same seed: what makes rows distinct', () => {
    const manifest = { inputs: [spec('x', 'FP32', [-1, 64]), spec('n', 'INT32', [-1, 24])] };
    const body = parse(requestBodies(manifest, 3)(1234));
    const expected = benchInputs(manifest, 3, 1234);
    for (const [t, tensor] of body.entries()) {
      const width = t === 0 ? 64 : 24;
      for (let r = 0; r < 3; r++) {
        const head = (d: OipTensor['data'] | undefined) => d?.slice(r * width, r * width + HEAD_VALUES);
        expect(head(tensor.data)).toEqual(head(expected[t]?.data));
      }
    }
  });

  it('gives every seed distinct rows though the tails come from a pool much smaller than the run', () => {
    for (const datatype of ['FP32', 'INT64', 'BOOL'] as const) {
      const body = requestBodies({ inputs: [spec('x', datatype, [-1, 40])] }, 1, 4);
      const rows = new Set<string>();
      for (let seed = 0; seed < 300; seed++) rows.add(JSON.stringify(parse(body(seed))[0]?.data));
      expect(rows.size, datatype).toBe(300);
    }
  });

  it('cycles the pool: two seeds a pool apart share a tail, not a head', () => {
    const body = requestBodies({ inputs: [spec('x', 'FP32', [-1, 50])] }, 1, 8);
    const [a, b] = [parse(body(3))[0]?.data ?? [], parse(body(11))[0]?.data ?? []];
    expect(a.slice(HEAD_VALUES)).toEqual(b.slice(HEAD_VALUES));
    expect(a.slice(0, HEAD_VALUES)).not.toEqual(b.slice(0, HEAD_VALUES));
  });

  it('handles rows shorter than the head (all head, no tail)', () => {
    const [t] = parse(requestBodies({ inputs: [spec('x', 'FP32', [-1, 3])] }, 2)(5));
    expect(t?.data).toEqual(benchInputs({ inputs: [spec('x', 'FP32', [-1, 3])] }, 2, 5)[0]?.data);
  });
});

describe('binaryRequestBodies', () => {
  it('holds exactly the elements of the JSON body for the same seed, framed as the binary extension', () => {
    const manifest = { inputs: [spec('x', 'FP32', [-1, 40]), spec('n', 'INT64', [-1, 3]), spec('m', 'BOOL', [-1, 25])] };
    const json = parse(requestBodies(manifest, 2)(4321));
    const { headerLength, body } = binaryRequestBodies(manifest, 2);
    const bytes = body(4321);
    const header = JSON.parse(bytes.subarray(0, headerLength).toString()) as {
      inputs: Array<{ name: string; parameters: { binary_data_size: number } }>;
    };
    expect(header.inputs.map((i) => [i.name, i.parameters.binary_data_size])).toEqual([
      ['x', 2 * 40 * 4],
      ['n', 2 * 3 * 8],
      ['m', 2 * 25],
    ]);
    let at = headerLength;
    for (const [t, tensor] of json.entries()) {
      const size = header.inputs[t]?.parameters.binary_data_size as number;
      const expected = Buffer.from(wireBytes(tensor.datatype, fromJsonData(tensor.datatype, tensor.data)));
      expect(bytes.subarray(at, at + size).equals(expected), tensor.name).toBe(true);
      at += size;
    }
    expect(at).toBe(bytes.byteLength);
    expect(body(4322).equals(bytes)).toBe(false);
  });
});
