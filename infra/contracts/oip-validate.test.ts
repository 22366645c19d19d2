import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import type { ModelManifest, TensorSpec } from './manifest.ts';
import type { Datatype } from './oip.ts';
import { MAX_PARAMETERS_BYTES, MAX_REQUEST_ID_LENGTH, shapeExtent, validateInferRequest } from './oip-validate.ts';

function manifest(inputs: TensorSpec[], outputs: TensorSpec[] = [{ name: 'out', datatype: 'FP32', shape: [-1, 1] }]): ModelManifest {
  return {
    name: 'm',
    version: '1',
    format: 'onnx',
    sha256: '0'.repeat(64),
    sizeBytes: 1,
    inputs,
    outputs,
    batching: { maxBatch: 64, warmupBatches: [] },
    createdAt: '2024-01-01T00:00:00.000Z',
    labels: {},
  };
}

// Shaped like scripts/fixtures/onnx-models.ts buildMultiTypeModel: several ranks and dtypes.
const multi = manifest(
  [
    { name: 'x', datatype: 'FP32', shape: [-1, 2, 2] },
    { name: 'ids', datatype: 'INT64', shape: [-1, 3] },
    { name: 'mask', datatype: 'BOOL', shape: [-1, 3] },
  ],
  [
    { name: 'y', datatype: 'FP32', shape: [-1, 2, 3] },
    { name: 'ids_next', datatype: 'INT64', shape: [-1, 3] },
  ],
);

function goodBody(rows = 2) {
  return {
    inputs: [
      { name: 'x', datatype: 'FP32', shape: [rows, 2, 2], data: Array.from({ length: rows * 4 }, (_, i) => i / 2) },
      { name: 'ids', datatype: 'INT64', shape: [rows, 3], data: Array.from({ length: rows * 3 }, (_, i) => i) },
      { name: 'mask', datatype: 'BOOL', shape: [rows, 3], data: Array.from({ length: rows * 3 }, (_, i) => i % 2 === 0) },
    ],
  };
}

function errorOf(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected an InvalidInputError, got none');
}

describe('validateInferRequest: accepted requests', () => {
  it('returns the inputs, the row count, and the optional fields', () => {
    const body = { ...goodBody(3), outputs: [{ name: 'y' }], parameters: { p: 1 }, id: 'req-1' };
    const v = validateInferRequest(body, multi);
    expect(v.rows).toBe(3);
    expect(v.inputs.map((t) => t.name)).toEqual(['x', 'ids', 'mask']);
    expect(v.inputs[0]?.data).toHaveLength(12);
    expect(v.outputs).toEqual([{ name: 'y' }]);
    expect(v.parameters).toEqual({ p: 1 });
    expect(v.id).toBe('req-1');
  });

  it('omits outputs, parameters and id when the request has none', () => {
    const v = validateInferRequest(goodBody(1), multi);
    expect('outputs' in v || 'parameters' in v || 'id' in v).toBe(false);
  });

  it('flattens nested row-major data', () => {
    const body = goodBody(2);
    body.inputs[0] = {
      name: 'x',
      datatype: 'FP32',
      shape: [2, 2, 2],
      data: [
        [
          [1, 2],
          [3, 4],
        ],
        [
          [5, 6],
          [7, 8],
        ],
      ] as never,
    };
    const v = validateInferRequest(body, multi);
    expect(v.inputs[0]?.data).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });

  it('accepts a fixed dimension of the manifest and any value for a dynamic one', () => {
    const m = manifest([{ name: 'seq', datatype: 'FP32', shape: [-1, -1, 4] }]);
    const v = validateInferRequest({ inputs: [{ name: 'seq', datatype: 'FP32', shape: [1, 3, 4], data: new Array(12).fill(0) }] }, m);
    expect(v.inputs[0]?.shape).toEqual([1, 3, 4]);
  });

  it('keeps 100k-value inputs intact', () => {
    const m = manifest([{ name: 'f', datatype: 'FP32', shape: [-1, 64] }]);
    const data = Array.from({ length: 1600 * 64 }, (_, i) => Math.sin(i));
    const v = validateInferRequest({ inputs: [{ name: 'f', datatype: 'FP32', shape: [1600, 64], data }] }, m);
    expect(v.rows).toBe(1600);
    expect(v.inputs[0]?.data).toHaveLength(102_400);
  });
});

describe('validateInferRequest: error codes', () => {
  it.each([null, 3, 'x', [1]])('invalid_body when the body is %j', (body) => {
    expect(errorOf(() => validateInferRequest(body, multi)).code).toBe('invalid_body');
  });

  it('invalid_body when inputs is missing, empty or not an array, or a tensor is not an object', () => {
    for (const body of [{}, { inputs: [] }, { inputs: {} }, { inputs: [3] }, { inputs: [{ datatype: 'FP32' }] }]) {
      expect(errorOf(() => validateInferRequest(body, multi)).code).toBe('invalid_body');
    }
  });

  it('invalid_body when data is not an array, or parameters / id have the wrong type', () => {
    const noData = goodBody();
    (noData.inputs[0] as Record<string, unknown>).data = 'abc';
    expect(errorOf(() => validateInferRequest(noData, multi)).message).toContain('"x"');
    expect(errorOf(() => validateInferRequest({ ...goodBody(), parameters: [1] }, multi)).code).toBe('invalid_body');
    expect(errorOf(() => validateInferRequest({ ...goodBody(), id: 7 }, multi)).code).toBe('invalid_body');
  });

  it('unknown_input names the tensor and lists the expected names', () => {
    const body = goodBody();
    body.inputs[0] = { ...body.inputs[0]!, name: 'features' };
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('unknown_input');
    expect(err.status).toBe(400);
    expect(err.message).toContain('"features"');
    expect(err.message).toContain('"x", "ids", "mask"');
  });

  it('missing_input names what is missing', () => {
    const body = goodBody();
    body.inputs.splice(1, 1);
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('missing_input');
    expect(err.message).toContain('"ids"');
  });

  it('duplicate_input', () => {
    const body = goodBody();
    body.inputs.push(body.inputs[0]!);
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('duplicate_input');
    expect(err.message).toContain('"x"');
  });

  it('datatype_mismatch says expected and got', () => {
    const body = goodBody();
    body.inputs[0] = { ...body.inputs[0]!, datatype: 'FP64' };
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('datatype_mismatch');
    expect(err.message).toMatch(/"x".*FP32.*FP64/);
  });

  it('shape_mismatch on rank, on a fixed axis (naming it), and on a bad row count', () => {
    const cases: Array<[unknown, RegExp]> = [
      [[2, 4], /rank 3.*rank 2/],
      [[2, 2, 3], /axis 2 must be 2/],
      [[0, 2, 2], /shape\[0\].*>= 1/],
      [[1.5, 2, 2], /shape\[0\]/],
      [['2', 2, 2], /shape\[0\]/],
      [[2, -2, 2], /shape\[1\]/],
      ['2,2,2', /array/],
    ];
    for (const [shape, message] of cases) {
      const body = goodBody();
      body.inputs[0] = { ...body.inputs[0]!, shape: shape as number[] };
      const err = errorOf(() => validateInferRequest(body, multi));
      expect(err.code).toBe('shape_mismatch');
      expect(err.message).toContain('"x"');
      expect(err.message).toMatch(message);
    }
  });

  it('shape_mismatch when inputs disagree on the number of rows', () => {
    const body = goodBody(2);
    body.inputs[1] = { name: 'ids', datatype: 'INT64', shape: [3, 3], data: new Array(9).fill(1) };
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('shape_mismatch');
    expect(err.message).toMatch(/"ids".*3.*"x".*2/);
  });

  it('data_length_mismatch says how many values the shape needs', () => {
    const body = goodBody(2);
    body.inputs[0] = { ...body.inputs[0]!, data: [1, 2, 3] };
    const err = errorOf(() => validateInferRequest(body, multi));
    expect(err.code).toBe('data_length_mismatch');
    expect(err.message).toMatch(/"x".*\[2, 2, 2\].*8.*3/);
  });

  it('data_length_mismatch counts nested data after flattening', () => {
    const body = goodBody(2);
    body.inputs[0] = {
      ...body.inputs[0]!,
      data: [
        [1, 2, 3, 4],
        [5, 6, 7],
      ] as never,
    };
    expect(errorOf(() => validateInferRequest(body, multi)).code).toBe('data_length_mismatch');
  });

  it('unknown_output lists the outputs the model has', () => {
    const err = errorOf(() => validateInferRequest({ ...goodBody(), outputs: [{ name: 'score' }] }, multi));
    expect(err.code).toBe('unknown_output');
    expect(err.message).toContain('"score"');
    expect(err.message).toContain('"y", "ids_next"');
    expect(errorOf(() => validateInferRequest({ ...goodBody(), outputs: 'y' }, multi)).code).toBe('invalid_body');
  });

  it('too_many_rows over limits.maxRows, with status 413', () => {
    expect(validateInferRequest(goodBody(4), multi, { maxRows: 4 }).rows).toBe(4);
    const err = errorOf(() => validateInferRequest(goodBody(5), multi, { maxRows: 4 }));
    expect(err.code).toBe('too_many_rows');
    expect(err.status).toBe(413);
  });
});

describe('validateInferRequest: bounded work', () => {
  // A dynamic non-batch axis, like scripts/fixtures/onnx-models.ts buildDynamicAxisModel.
  const dynamic = manifest([{ name: 'seq', datatype: 'FP32', shape: [-1, -1] }]);
  const seq = (shape: unknown[], data: unknown[] = [], extra: Record<string, unknown> = {}) => ({
    inputs: [{ name: 'seq', datatype: 'FP32', shape, data }],
    ...extra,
  });
  const limits = { maxRows: 10_000, maxElements: 4_194_304 };

  it('a zero-length axis declares no rows it does not carry: [1e9, 0] with no data is too_many_rows (413)', () => {
    const err = errorOf(() => validateInferRequest(seq([1e9, 0]), dynamic, limits));
    expect(err.code).toBe('too_many_rows');
    expect(err.status).toBe(413);
    expect(err.message).toContain('"seq"');
    expect(err.message).toContain('10000');
  });

  it('a zero-length axis counts as 1 in the element bound, so huge axes beside it are refused', () => {
    const threeD = manifest([{ name: 'seq', datatype: 'FP32', shape: [-1, -1, -1] }]);
    const err = errorOf(() => validateInferRequest(seq([10, 0, 1e9]), threeD, limits));
    expect(err.code).toBe('too_many_elements');
    expect(err.status).toBe(413);
    expect(err.message).toContain('4194304');
  });

  it('an empty axis within the bounds is accepted; its element count (0) must match the data', () => {
    expect(validateInferRequest(seq([3, 0]), dynamic, limits).rows).toBe(3);
    expect(validateInferRequest(seq([2, 0], [[], []]), dynamic, limits).rows).toBe(2);
    expect(errorOf(() => validateInferRequest(seq([3, 0], [1]), dynamic, limits)).code).toBe('data_length_mismatch');
  });

  it('too_many_elements when a shape declares more elements than allowed, before its data is read', () => {
    const err = errorOf(() => validateInferRequest(seq([2, 3]), dynamic, { maxElements: 5 }));
    expect(err.code).toBe('too_many_elements');
    expect(validateInferRequest(seq([1, 5], [1, 2, 3, 4, 5]), dynamic, { maxElements: 5 }).rows).toBe(1);
  });

  it('too_many_elements (413) when the BYTES inputs together declare more strings than MAX_BYTES_ELEMENTS_PER_JOB, counted from the shapes before any string is read', () => {
    const two = manifest([
      { name: 'a', datatype: 'BYTES', shape: [-1, -1] },
      { name: 'b', datatype: 'BYTES', shape: [-1] },
      { name: 'x', datatype: 'FP32', shape: [-1, -1] },
    ]);
    const body = (a: number) => ({
      inputs: [
        { name: 'a', datatype: 'BYTES', shape: [1, a], parameters: { binary_data_size: 4 * a } },
        { name: 'b', datatype: 'BYTES', shape: [1], data: ['z'] },
        // Numbers do not count: only strings are work per element beyond their bytes.
        { name: 'x', datatype: 'FP32', shape: [1, 100], data: Array.from({ length: 100 }, () => 0) },
      ],
    });
    const limits = { maxBytesElements: 10 };
    // 9 + 1 strings: within the bound, and decoded.
    const ok = validateInferRequest(body(9), two, limits, new Map([['a', new Uint8Array(36)]]));
    expect(ok.inputs[0]?.data).toEqual(Array.from({ length: 9 }, () => ''));
    // 2 Mi empty strings (8 MiB of zero lengths, as attack 7 sent) and, to show nothing was read,
    // bytes that hold none of them: both refused by the count alone, the same way.
    const twoMi = 2 * 1024 * 1024;
    for (const bytes of [new Uint8Array(4 * twoMi), new Uint8Array(0)]) {
      const err = errorOf(() => validateInferRequest(body(twoMi), two, limits, new Map([['a', bytes]])));
      expect(err.code).toBe('too_many_elements');
      expect(err.status).toBe(413);
      expect(err.message).toContain(`declare ${twoMi} BYTES elements`);
      expect(err.message).toContain('at most 10');
      expect(err.message).toContain('MAX_BYTES_ELEMENTS_PER_JOB');
    }
    // Counted over the inputs: 10 in "a" and 1 in "b" is one too many, named at "b".
    const over = errorOf(() => validateInferRequest(body(10), two, limits, new Map([['a', new Uint8Array(40)]])));
    expect(over.code).toBe('too_many_elements');
    expect(over.message).toMatch(/through "b"\) declare 11 BYTES elements/);
    // Unbounded when absent.
    expect(validateInferRequest(body(10), two, {}, new Map([['a', new Uint8Array(40)]])).rows).toBe(1);
  });

  it('every dimension is a non-negative safe integer: no overflow, no precision loss', () => {
    for (const shape of [
      [2 ** 53, 0],
      [1, 2 ** 60],
      [1, 1e300],
      [1, -1],
      [1, 0.5],
    ]) {
      expect(errorOf(() => validateInferRequest(seq(shape), dynamic)).code).toBe('shape_mismatch');
    }
  });

  it("parameters of at most 4 KiB (the request's, a tensor's, an output's); larger is parameters_too_large (413)", () => {
    const small = { content_type: 'x'.repeat(100) };
    const big = { blob: 'x'.repeat(MAX_PARAMETERS_BYTES) };
    const ok = validateInferRequest({ ...goodBody(), parameters: small }, multi);
    expect(ok.parameters).toEqual(small);
    const top = errorOf(() => validateInferRequest({ ...goodBody(), parameters: big }, multi));
    expect([top.code, top.status]).toEqual(['parameters_too_large', 413]);
    expect(top.message).toContain(String(MAX_PARAMETERS_BYTES));
    const tensor = goodBody();
    (tensor.inputs[0] as Record<string, unknown>).parameters = big;
    expect(errorOf(() => validateInferRequest(tensor, multi)).message).toContain('input "x"');
    const output = errorOf(() => validateInferRequest({ ...goodBody(), outputs: [{ name: 'y', parameters: big }] }, multi));
    expect(output.code).toBe('parameters_too_large');
  });

  it('tensor and output parameters are checked, then dropped: no worker reads them', () => {
    const body = { ...goodBody(), outputs: [{ name: 'y', parameters: { p: 1 } }] };
    (body.inputs[0] as Record<string, unknown>).parameters = { content_type: 'np' };
    const v = validateInferRequest(body, multi);
    expect(v.outputs).toEqual([{ name: 'y' }]);
    expect(v.inputs.every((t) => !('parameters' in t))).toBe(true);
  });

  it('an id of at most 256 characters; longer is id_too_long (413)', () => {
    expect(validateInferRequest({ ...goodBody(), id: 'r'.repeat(MAX_REQUEST_ID_LENGTH) }, multi).id).toHaveLength(256);
    const err = errorOf(() => validateInferRequest({ ...goodBody(), id: 'r'.repeat(MAX_REQUEST_ID_LENGTH + 1) }, multi));
    expect([err.code, err.status]).toEqual(['id_too_long', 413]);
  });

  it('each output at most once (the list is stored with the job)', () => {
    const err = errorOf(() => validateInferRequest({ ...goodBody(), outputs: [{ name: 'y' }, { name: 'y' }] }, multi));
    expect(err.code).toBe('duplicate_output');
  });

  it('shapeExtent counts a zero-length axis as 1 and stops past its cap', () => {
    expect(shapeExtent([3, 0, 4])).toBe(12);
    expect(shapeExtent([1e9, 1e9, 1e9], 100)).toBeGreaterThan(100);
    expect(Number.isFinite(shapeExtent([1e9, 1e9, 1e9, 1e9], 100))).toBe(true);
  });
});

describe('validateInferRequest: invalid_value per datatype', () => {
  const cases: Array<{ datatype: Datatype; good: unknown[]; bad: unknown[] }> = [
    { datatype: 'FP32', good: [0, -1.5, 3e38], bad: ['1', NaN, Infinity, null, true] },
    { datatype: 'FP64', good: [1e300, -0.25], bad: ['x', NaN, -Infinity, {}] },
    { datatype: 'FP16', good: [0.5, -2], bad: ['0.5', NaN] },
    { datatype: 'INT8', good: [-128, 127, 0], bad: [128, -129, 1.5, '1'] },
    { datatype: 'UINT8', good: [0, 255], bad: [-1, 256, 0.5, false] },
    { datatype: 'INT16', good: [-32768, 32767], bad: [32768, -32769] },
    { datatype: 'UINT16', good: [0, 65535], bad: [65536, -1] },
    { datatype: 'INT32', good: [-2147483648, 2147483647], bad: [2147483648, 1.1, '5'] },
    { datatype: 'UINT32', good: [0, 4294967295], bad: [4294967296, -1] },
    {
      datatype: 'INT64',
      good: [0, -5, Number.MAX_SAFE_INTEGER, '9223372036854775807', '-9223372036854775808'],
      bad: [1.5, 2 ** 60, '9223372036854775808', '12a', '1e3', '', true],
    },
    { datatype: 'UINT64', good: [0, '18446744073709551615'], bad: [-1, '-1', '18446744073709551616'] },
    { datatype: 'BOOL', good: [true, false, 0, 1], bad: [2, 'true', null, 0.5] },
    { datatype: 'BYTES', good: ['hello', ''], bad: [1, null, true] },
  ];

  for (const { datatype, good, bad } of cases) {
    const m = manifest([{ name: 't', datatype, shape: [-1, -1] }]);
    const body = (data: unknown[]) => ({ inputs: [{ name: 't', datatype, shape: [1, data.length], data }] });

    it(`${datatype}: accepts ${JSON.stringify(good)}`, () => {
      expect(validateInferRequest(body(good), m).inputs[0]?.data).toEqual(good);
    });

    it(`${datatype}: rejects each bad value, reporting the first bad index`, () => {
      for (const value of bad) {
        const err = errorOf(() => validateInferRequest(body([...good, value, value]), m));
        expect(err.code).toBe('invalid_value');
        expect(err.message).toContain(`"t": data[${good.length}]`);
        expect(err.message).toContain(datatype);
      }
    });
  }
});

describe('validateInferRequest: binary tensor data', () => {
  const texts = manifest([
    { name: 'x', datatype: 'FP32', shape: [-1, 2, 2] },
    { name: 's', datatype: 'BYTES', shape: [-1] },
    { name: 'mask', datatype: 'BOOL', shape: [-1, 3] },
  ]);
  const header = (rows = 1) => ({
    inputs: [
      { name: 'x', datatype: 'FP32', shape: [rows, 2, 2], parameters: { binary_data_size: rows * 16 } },
      { name: 's', datatype: 'BYTES', shape: [rows], parameters: { binary_data_size: 0 } },
      { name: 'mask', datatype: 'BOOL', shape: [rows, 3], data: Array.from({ length: rows * 3 }, () => true) },
    ],
  });
  const strings = (...values: string[]) => {
    const parts = values.map((v) => Buffer.from(v, 'utf8'));
    return Buffer.concat(parts.flatMap((p) => [Buffer.from(Uint32Array.from([p.byteLength]).buffer), p]));
  };

  it('turns each binary input into typed elements (one copy, any alignment), BYTES into strings, beside JSON inputs', () => {
    const floats = Float32Array.from([1, -2, 3.5, 4]);
    const unaligned = Buffer.concat([Buffer.from([0]), Buffer.from(floats.buffer)]).subarray(1);
    const v = validateInferRequest(
      header(),
      texts,
      {},
      new Map([
        ['x', unaligned],
        ['s', strings('日本')],
      ]),
    );
    expect(v.inputs[0]?.data).toBeInstanceOf(Float32Array);
    expect(Array.from(v.inputs[0]?.data as Float32Array)).toEqual([1, -2, 3.5, 4]);
    expect(v.inputs[1]?.data).toEqual(['日本']);
    expect(v.inputs[2]?.data).toEqual([true, true, true]);
    expect(v.rows).toBe(1);
  });

  it('refuses bytes that do not fit the shape, BOOL bytes other than 0/1, and BYTES that do not hold the shape’s count', () => {
    const short = errorOf(() =>
      validateInferRequest(
        header(),
        texts,
        {},
        new Map([
          ['x', new Uint8Array(12)],
          ['s', strings('a')],
        ]),
      ),
    );
    expect(short.code).toBe('binary_size_mismatch');
    expect(short.message).toMatch(
      /input byte size mismatch for input 'x': shape \[1, 2, 2\] of FP32 needs 16 bytes, binary_data_size is 12/,
    );
    const twoStrings = errorOf(() =>
      validateInferRequest(
        header(),
        texts,
        {},
        new Map([
          ['x', new Uint8Array(16)],
          ['s', strings('a', 'b')],
        ]),
      ),
    );
    expect(twoStrings.code).toBe('data_length_mismatch');
    const bools = manifest([{ name: 'b', datatype: 'BOOL', shape: [-1] }]);
    const body = { inputs: [{ name: 'b', datatype: 'BOOL', shape: [3], parameters: { binary_data_size: 3 } }] };
    const two = errorOf(() => validateInferRequest(body, bools, {}, new Map([['b', Uint8Array.from([1, 0, 2])]])));
    expect(two.message).toMatch(/element 2 must be true, false, 0 or 1 for BOOL, got 2/);
  });

  it('binary_data_size on a body that carries no binary data says how to send it', () => {
    const err = errorOf(() => validateInferRequest(header(), texts));
    expect(err.code).toBe('invalid_body');
    expect(err.message).toMatch(/Inference-Header-Content-Length/);
  });

  it('bounds a binary input’s shape before its bytes are read', () => {
    const err = errorOf(() => validateInferRequest(header(5), texts, { maxRows: 4 }, new Map([['x', new Uint8Array(80)]])));
    expect(err.code).toBe('too_many_rows');
  });
});

describe('validateInferRequest: a model that keeps its rows elsewhere (batch-axes.ts)', () => {
  // A VAD: input [N, 2], state [2, N, 1] (rows on axis 1), sr a scalar; stored in row layout.
  const vad = manifest([
    { name: 'input', datatype: 'FP32', shape: [-1, 2] },
    { name: 'state', datatype: 'FP32', shape: [-1, 2, 1], batchAxis: 1 },
    { name: 'sr', datatype: 'INT64', shape: [-1], batchAxis: 'none' },
  ]);
  const body = (stateShape: number[], srShape: number[] = []) => ({
    inputs: [
      { name: 'input', datatype: 'FP32', shape: [3, 2], data: [1, 2, 3, 4, 5, 6] },
      { name: 'state', datatype: 'FP32', shape: stateShape, data: [0, 1, 2, 10, 11, 12] },
      { name: 'sr', datatype: 'INT64', shape: srShape, data: [16000] },
    ],
  });

  it('checks the model layout and hands on row layout: rows first, the scalar once a row', () => {
    const r = validateInferRequest(body([2, 3, 1]), vad);
    expect(r.rows).toBe(3);
    const [input, state, sr] = r.inputs;
    expect(input?.shape).toEqual([3, 2]);
    expect(state?.shape).toEqual([3, 2, 1]);
    expect(state?.data).toEqual([0, 10, 1, 11, 2, 12]);
    expect(sr?.shape).toEqual([3]);
    expect(sr?.data).toEqual([16000, 16000, 16000]);
  });

  it('names the batch axis when the rows disagree, and the model shape when an axis is wrong', () => {
    expect(() =>
      validateInferRequest(
        { inputs: [body([2, 3, 1]).inputs[0], { ...body([2, 2, 1]).inputs[1], data: [0, 1, 2, 3] }, body([]).inputs[2]] },
        vad,
      ),
    ).toThrow(/input "state": shape\[1\] is 2 but "input" has 3 \(its shape\[0\]\)/);
    expect(() => validateInferRequest(body([3, 2, 1]), vad)).toThrow(/input "state": axis 0 must be 2 \(shape \[2, -1, 1\]\), got 3/);
    expect(() => validateInferRequest(body([2, 3, 1], [1]), vad)).toThrow(/input "sr": expected rank 0 \(shape \[\]\), got rank 1/);
  });

  it('takes a model with no batch axis at all as one row of its exact shape', () => {
    const fixed = manifest([{ name: 'x', datatype: 'FP32', shape: [-1, 2, 3], batchAxis: 'none' }]);
    const r = validateInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 3], data: [1, 2, 3, 4, 5, 6] }] }, fixed);
    expect(r.rows).toBe(1);
    expect(r.inputs[0]?.shape).toEqual([1, 2, 3]);
    expect(() =>
      validateInferRequest({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2, 3], data: [1, 2, 3, 4, 5, 6] }] }, fixed),
    ).toThrow(/expected rank 2 \(shape \[2, 3\]\)/);
  });
});
