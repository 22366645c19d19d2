// An entry's layout checks and row selection, without Redis or ONNX Runtime.
import { describe, expect, it } from 'vitest';
import type { EntryData } from '../infra/contracts/entry.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { type PackedSpec, packTensors, type TensorToPack } from '../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { EngineTensor } from './engine/engine.ts';
import { forTransfer } from './engine/tensor-codec.ts';
import { checkEntry, type OpenedInput, openInputs, selectRows } from './entry-inputs.ts';

const manifest = {
  name: 'm',
  version: '1',
  inputs: [
    { name: 'seq', datatype: 'FP32', shape: [-1, -1, 2] },
    { name: 'word', datatype: 'BYTES', shape: [-1, 1] },
  ],
  outputs: [{ name: 'y', datatype: 'FP32', shape: [-1, 1] }],
} as ModelManifest;
const bounds = { maxRows: 10, maxElements: 50, maxBytesElements: 2 };

/** Three members of 1, 2 and 1 rows; `seq` [4, 3, 2] (its second axis dynamic), `word` [4, 1]. */
function entry(over: { seq?: Partial<PackedSpec>; rows?: number[]; outputs?: string[] } = {}): { data: EntryData; bytes: Buffer } {
  const rows = over.rows ?? [1, 2, 1];
  const total = rows.reduce((a, b) => a + b, 0);
  const tensors: TensorToPack[] = [
    { name: 'seq', datatype: 'FP32', shape: [total, 3, 2], data: Float32Array.from({ length: total * 6 }, (_, k) => k) },
    { name: 'word', datatype: 'BYTES', shape: [total, 1], data: Array.from({ length: total }, (_, k) => `w${k}`) },
  ];
  const { specs, bytes } = packTensors(tensors);
  const data: EntryData = {
    entry: 1,
    tenant: 't',
    model: 'm',
    version: '1',
    submittedAt: 0,
    members: rows.map((n, i) => ({ id: `job_${i}`, rows: n, submittedAt: 0 })),
    inputs: [{ ...(specs[0] as PackedSpec), ...over.seq }, specs[1] as PackedSpec],
    ...(over.outputs ? { outputs: over.outputs.map((name) => ({ name })) } : {}),
  };
  return { data, bytes };
}

describe('checkEntry', () => {
  it('accepts any length on a dynamic axis', () => {
    expect(() => checkEntry(entry().data, manifest, bounds)).not.toThrow();
  });

  it.each<[string, Parameters<typeof entry>[0], RegExp]>([
    ['a fixed axis of another size', { seq: { shape: [4, 3, 3] } }, /axis 2/],
    ['a negative dynamic axis', { seq: { shape: [4, -3, 2] } }, /axis 1/],
    ['another rank', { seq: { shape: [4, 6] } }, /rank/],
    ['rows other than the members’ sum', { seq: { shape: [5, 3, 2] } }, /shape\[0\]/],
    ['another datatype', { seq: { datatype: 'FP16' } }, /datatype/],
    ['another name', { seq: { name: 'other' } }, /missing input "seq"/],
    ['a member with no rows', { rows: [1, 0, 3] }, /rows must be/],
    ['a member past the row bound', { rows: [11] }, /at most 10/],
    ['a member past the element bound', { rows: [2, 9] }, /more than 50 elements/],
    // `word` is one string a row: 3 rows are 3 strings, counted from the shape (nothing decoded).
    ['a member past the BYTES element bound', { rows: [1, 3] }, /request job_1: its BYTES inputs declare 3 BYTES elements .*at most 2/],
    ['an output the model lacks', { outputs: ['z'] }, /unknown output/],
  ])('refuses %s', (_name, over, message) => {
    const { data } = entry(over);
    expect(() => checkEntry(data, manifest, bounds)).toThrow(InvalidInputError);
    expect(() => checkEntry(data, manifest, bounds)).toThrow(message);
  });

  it('refuses an input given twice, or one the model does not have', () => {
    const { data } = entry();
    expect(() => checkEntry({ ...data, inputs: [...data.inputs, data.inputs[0] as PackedSpec] }, manifest, bounds)).toThrow(
      /more than once/,
    );
    expect(() =>
      checkEntry({ ...data, inputs: [...data.inputs, { ...(data.inputs[0] as PackedSpec), name: 'extra' }] }, manifest, bounds),
    ).toThrow(/unknown input "extra"/);
  });
});

describe('selectRows', () => {
  it('hands every row over as the views themselves', () => {
    const { data, bytes } = entry();
    const inputs = openInputs(data.inputs, bytes);
    const all = selectRows(inputs, [{ start: 0, end: 4 }], false);
    expect(all.seq).toMatchObject({ type: 'float32', dims: [4, 3, 2] });
    expect(((all.seq as EngineTensor).data as Float32Array).buffer).toBe(bytes.buffer);
    expect(all.word).toEqual({ type: 'string', dims: [4, 1], data: ['w0', 'w1', 'w2', 'w3'] });
  });

  it('copies the rows of some members, numeric and strings alike', () => {
    const { data, bytes } = entry();
    const some = selectRows(
      openInputs(data.inputs, bytes),
      [
        { start: 0, end: 1 },
        { start: 3, end: 4 },
      ],
      false,
    );
    expect(some.seq?.dims).toEqual([2, 3, 2]);
    expect(Array.from(some.seq?.data as Float32Array)).toEqual([0, 1, 2, 3, 4, 5, 18, 19, 20, 21, 22, 23]);
    expect(((some.seq as EngineTensor).data as Float32Array).buffer).not.toBe(bytes.buffer);
    expect(some.word?.data).toEqual(['w0', 'w3']);
  });

  it('marks a view kept when the bytes must outlive the run, so the engine copies rather than takes its buffer', () => {
    const { specs, bytes } = packTensors([{ name: 'x', datatype: 'INT32', shape: [2, 2], data: Int32Array.from([1, 2, 3, 4]) }]);
    const inputs = openInputs(specs, bytes);
    const taken = forTransfer(selectRows(inputs, [{ start: 0, end: 2 }], false));
    expect(((taken.tensors.x as EngineTensor).data as Int32Array).buffer).toBe(bytes.buffer);
    const fresh = Buffer.alloc(bytes.byteLength);
    fresh.set(bytes);
    const again = openInputs(specs, fresh);
    expect(((again[0] as OpenedInput).data as Int32Array).buffer).toBe(fresh.buffer);
    const kept = forTransfer(selectRows(again, [{ start: 0, end: 2 }], true));
    const sent = (kept.tensors.x as EngineTensor).data as Int32Array;
    expect(sent.buffer).not.toBe(((again[0] as OpenedInput).data as Int32Array).buffer);
    expect(kept.transfer).toEqual([sent.buffer]);
    expect(Array.from(sent)).toEqual([1, 2, 3, 4]);
  });
});
