/**
 * The gRPC conversions on messages as the server receives them: each request is serialized with
 * the published proto's own codec (proto-loader) and decoded as the server decodes it (decode.ts), so the
 * shapes tested (defaults, oneofs, 64-bit strings, Buffers) are the real ones. Converted requests
 * go through the same validation as HTTP bodies.
 */
import { loadSync } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { DATATYPES, GRPC_CONTENTS_FIELDS, grpcContentsField } from '../../infra/contracts/datatypes.ts';
import type { ModelManifest, TensorSpec } from '../../infra/contracts/manifest.ts';
import { validateInferRequest } from '../../infra/contracts/oip-validate.ts';
import { jsonValues, rowsTensor } from '../../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { encodeHalf } from '../../infra/kernel/half-float.ts';
import { fromModelInferRequest, fromParameters, longToJson, toModelInferResponse, toParameters } from './convert.ts';
import { decodeModelInferRequest } from './decode.ts';
import { type ModelInferRequestMessage, type ModelInferResponseMessage, PROTO_LOADER_OPTIONS } from './messages.ts';
import { PROTO_FILE } from './server.ts';

const definition = loadSync(PROTO_FILE, PROTO_LOADER_OPTIONS);
const service = definition['inference.GRPCInferenceService'] as unknown as Record<
  string,
  {
    requestSerialize(v: unknown): Buffer;
    requestDeserialize(b: Buffer): unknown;
    responseSerialize(v: unknown): Buffer;
    responseDeserialize(b: Buffer): unknown;
  }
>;
const infer = service.ModelInfer as NonNullable<(typeof service)['ModelInfer']>;

/** What the server's handler gets for a request a client built as `message` (decode.ts, as service.ts decodes it). */
function received(message: Record<string, unknown>): ModelInferRequestMessage {
  return decodeModelInferRequest(infer.requestSerialize({ model_name: 'm', ...message }));
}

/** What a client gets for the response message the server built. */
function sent(response: ModelInferResponseMessage): ModelInferResponseMessage {
  return infer.responseDeserialize(infer.responseSerialize(response)) as ModelInferResponseMessage;
}

function manifest(inputs: TensorSpec[]): ModelManifest {
  return {
    name: 'm',
    version: '1',
    format: 'onnx',
    sha256: '0'.repeat(64),
    sizeBytes: 1,
    inputs,
    outputs: [{ name: 'out', datatype: 'FP32', shape: [-1, 1] }],
    batching: { maxBatch: 64, warmupBatches: [] },
    createdAt: '2024-01-01T00:00:00.000Z',
    labels: {},
  };
}

function invalid(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected an InvalidInputError');
}

const le = (typed: ArrayBufferView) => Buffer.from(typed.buffer, typed.byteOffset, typed.byteLength);

describe('fromModelInferRequest: typed contents', () => {
  it('gives the OIP JSON header with each input`s elements as `data`, and JSON parameters', () => {
    const call = fromModelInferRequest(
      received({
        model_version: '2',
        id: 'req-1',
        parameters: { priority: { int64_param: 1 }, tag: { string_param: 'a' }, flag: { bool_param: true }, ratio: { double_param: 0.5 } },
        inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2], contents: { fp32_contents: [0.5, 1, -2, 3.25] } }],
        outputs: [{ name: 'out' }],
      }),
    );
    expect(call).toEqual({
      model: 'm',
      version: '2',
      body: {
        id: 'req-1',
        parameters: { priority: 1, tag: 'a', flag: true, ratio: 0.5 },
        inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2], data: [0.5, 1, -2, 3.25] }],
        outputs: [{ name: 'out' }],
      },
      rawOutputs: false,
    });
  });

  it('takes each datatype`s elements from its own field; 64-bit values past 2^53 stay decimal strings', () => {
    const call = fromModelInferRequest(
      received({
        inputs: [
          { name: 'i8', datatype: 'INT8', shape: [1, 2], contents: { int_contents: [-3, 4] } },
          { name: 'i64', datatype: 'INT64', shape: [1, 2], contents: { int64_contents: ['-9223372036854775808', 7] } },
          { name: 'u64', datatype: 'UINT64', shape: [1, 1], contents: { uint64_contents: ['18446744073709551615'] } },
          { name: 'u16', datatype: 'UINT16', shape: [1, 1], contents: { uint_contents: [65535] } },
          { name: 'b', datatype: 'BOOL', shape: [1, 2], contents: { bool_contents: [true, false] } },
          { name: 'd', datatype: 'FP64', shape: [1, 1], contents: { fp64_contents: [0.1] } },
          { name: 's', datatype: 'BYTES', shape: [1, 2], contents: { bytes_contents: [Buffer.from('héllo'), Buffer.alloc(0)] } },
        ],
      }),
    );
    expect(call.body.inputs.map((t) => t.data)).toEqual([
      [-3, 4],
      ['-9223372036854775808', 7],
      ['18446744073709551615'],
      [65535],
      [true, false],
      [0.1],
      ['héllo', ''],
    ]);
  });

  it('refuses elements in another datatype`s field, naming both fields', () => {
    const err = invalid(() =>
      fromModelInferRequest(received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 2], contents: { int_contents: [1, 2] } }] })),
    );
    expect(err.message).toBe('input "x": datatype FP32 takes its elements in contents.fp32_contents, not contents.int_contents');
    expect(err.status).toBe(400);
  });

  it('refuses typed FP16: it has no field and must be raw', () => {
    const err = invalid(() =>
      fromModelInferRequest(received({ inputs: [{ name: 'h', datatype: 'FP16', shape: [1, 1], contents: { fp32_contents: [1] } }] })),
    );
    expect(err.message).toMatch(/^input "h": FP16 has no typed contents field; send its elements in raw_input_contents$/);
  });

  it('leaves an unknown datatype`s elements out, so validation names the datatype as it does for JSON', () => {
    const call = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'FLOAT', shape: [1, 2], contents: { fp32_contents: [1, 2] } }] }),
    );
    const err = invalid(() => validateInferRequest(call.body, manifest([{ name: 'x', datatype: 'FP32', shape: [-1, 2] }])));
    expect(err.message).toBe('input "x": expected datatype FP32, got FLOAT');
  });

  it('is checked by validation exactly as JSON: an INT8 element out of range is refused by index', () => {
    const call = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'INT8', shape: [1, 2], contents: { int_contents: [1, 300] } }] }),
    );
    const asJson = { inputs: [{ name: 'x', datatype: 'INT8', shape: [1, 2], data: [1, 300] }] };
    const m = manifest([{ name: 'x', datatype: 'INT8', shape: [-1, 2] }]);
    const fromGrpc = invalid(() => validateInferRequest(call.body, m));
    expect(fromGrpc.code).toBe('invalid_value');
    expect(fromGrpc.message).toBe(invalid(() => validateInferRequest(asJson, m)).message);
  });

  it('refuses a shape dimension that is not a safe integer', () => {
    const err = invalid(() =>
      fromModelInferRequest(
        received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, '9007199254740993'], contents: { fp32_contents: [1] } }] }),
      ),
    );
    expect(err.message).toBe('input "x": shape[1] is 9007199254740993, not a usable size');
  });
});

describe('fromModelInferRequest: raw contents', () => {
  const features = new Float32Array([0.5, 1, -2, 3.25]);

  it('hands each raw entry to validation as its input`s binary data, and answers raw', () => {
    const call = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2] }], raw_input_contents: [le(features)] }),
    );
    expect(call.body.inputs).toEqual([{ name: 'x', datatype: 'FP32', shape: [2, 2] }]);
    expect(call.rawOutputs).toBe(true);
    const validated = validateInferRequest(call.body, manifest([{ name: 'x', datatype: 'FP32', shape: [-1, 2] }]), {}, call.binary);
    expect(Array.from(validated.inputs[0]?.data as Float32Array)).toEqual([0.5, 1, -2, 3.25]);
  });

  it('validates raw and typed contents of the same rows to the same tensor', () => {
    const m = manifest([{ name: 'x', datatype: 'FP32', shape: [-1, 2] }]);
    const raw = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2] }], raw_input_contents: [le(features)] }),
    );
    const typed = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2], contents: { fp32_contents: Array.from(features) } }] }),
    );
    const a = validateInferRequest(raw.body, m, {}, raw.binary).inputs[0];
    const b = validateInferRequest(typed.body, m, {}, typed.binary).inputs[0];
    expect(jsonValues('FP32', a?.data as Float32Array)).toEqual(b?.data);
  });

  it('refuses short raw bytes with the byte counts', () => {
    const call = fromModelInferRequest(
      received({ inputs: [{ name: 'x', datatype: 'FP32', shape: [2, 2] }], raw_input_contents: [le(features).subarray(0, 12)] }),
    );
    const err = invalid(() =>
      validateInferRequest(call.body, manifest([{ name: 'x', datatype: 'FP32', shape: [-1, 2] }]), {}, call.binary),
    );
    expect(err.code).toBe('binary_size_mismatch');
    expect(err.message).toContain('needs 16 bytes');
  });

  it('refuses raw contents and typed contents together, as Triton does', () => {
    const err = invalid(() =>
      fromModelInferRequest(
        received({
          inputs: [
            { name: 'x', datatype: 'FP32', shape: [1, 2] },
            { name: 'y', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } },
          ],
          raw_input_contents: [le(new Float32Array([1, 2])), Buffer.alloc(4)],
        }),
      ),
    );
    expect(err.message).toBe('input "y" has typed contents but the request also sends raw_input_contents; send every input one way');
  });

  it('refuses a count of raw entries other than the inputs`', () => {
    const err = invalid(() =>
      fromModelInferRequest(
        received({
          inputs: [
            { name: 'x', datatype: 'FP32', shape: [1, 2] },
            { name: 'y', datatype: 'FP32', shape: [1, 1] },
          ],
          raw_input_contents: [le(new Float32Array([1, 2]))],
        }),
      ),
    );
    expect(err.code).toBe('raw_input_mismatch');
    expect(err.message).toBe('raw_input_contents has 1 entries but the request has 2 inputs; send one per input, in the order of inputs');
  });

  it('answers raw when typed inputs ask for binary outputs', () => {
    const typed = { inputs: [{ name: 'x', datatype: 'FP32', shape: [1, 1], contents: { fp32_contents: [1] } }] };
    expect(fromModelInferRequest(received({ ...typed, parameters: { binary_data_output: { bool_param: true } } })).rawOutputs).toBe(true);
    expect(
      fromModelInferRequest(received({ ...typed, outputs: [{ name: 'out', parameters: { binary_data: { bool_param: true } } }] }))
        .rawOutputs,
    ).toBe(true);
    expect(() => fromModelInferRequest(received({ ...typed, parameters: { binary_data_output: { string_param: 'yes' } } }))).toThrow(
      InvalidInputError,
    );
  });
});

describe('toModelInferResponse', () => {
  const response = {
    model_name: 'm',
    model_version: '1',
    id: 'req-1',
    outputs: [
      rowsTensor('y', 'FP32', [2, 2], new Float32Array([1.5, 2, 3, 4])),
      rowsTensor('ids', 'INT64', [2, 1], new BigInt64Array([2n ** 60n, -1n])),
      rowsTensor('ok', 'BOOL', [2, 1], new Uint8Array([1, 0])),
      rowsTensor('label', 'BYTES', [2, 1], ['a', 'bé']),
      rowsTensor('u', 'UINT8', [2, 1], new Uint8Array([0, 255])),
    ],
  };

  it('typed: each output`s elements in its datatype`s field, 64-bit ones as decimal strings', () => {
    const message = sent(toModelInferResponse(response, false));
    expect(message).toMatchObject({ model_name: 'm', model_version: '1', id: 'req-1', raw_output_contents: [] });
    expect(message.outputs.map((o) => [o.name, o.datatype, o.shape])).toEqual([
      ['y', 'FP32', ['2', '2']],
      ['ids', 'INT64', ['2', '1']],
      ['ok', 'BOOL', ['2', '1']],
      ['label', 'BYTES', ['2', '1']],
      ['u', 'UINT8', ['2', '1']],
    ]);
    const [y, ids, ok, label, u] = message.outputs.map((o) => o.contents);
    expect(y?.fp32_contents).toEqual([1.5, 2, 3, 4]);
    expect(ids?.int64_contents).toEqual([(2n ** 60n).toString(), '-1']);
    expect(ok?.bool_contents).toEqual([true, false]);
    expect(label?.bytes_contents?.map((b) => Buffer.from(b).toString('utf8'))).toEqual(['a', 'bé']);
    expect(u?.uint_contents).toEqual([0, 255]);
  });

  it('raw: each output`s little-endian bytes in raw_output_contents, no typed contents', () => {
    const message = sent(toModelInferResponse(response, true));
    expect(message.outputs.every((o) => o.contents === null)).toBe(true);
    const [y, ids, ok, label, u] = message.raw_output_contents;
    expect(Buffer.from(y as Uint8Array)).toEqual(le(new Float32Array([1.5, 2, 3, 4])));
    expect(Buffer.from(ids as Uint8Array)).toEqual(le(new BigInt64Array([2n ** 60n, -1n])));
    expect([...(ok as Uint8Array)]).toEqual([1, 0]);
    expect(Buffer.from(label as Uint8Array)).toEqual(Buffer.from([1, 0, 0, 0, 0x61, 3, 0, 0, 0, 0x62, 0xc3, 0xa9]));
    expect([...(u as Uint8Array)]).toEqual([0, 255]);
  });

  it('goes raw for every output when one is FP16 (no typed field; the proto forbids mixing)', () => {
    const half = new Uint16Array([encodeHalf(1.5)]);
    const message = sent(
      toModelInferResponse(
        { model_name: 'm', model_version: '1', outputs: [response.outputs[0], rowsTensor('h', 'FP16', [1, 1], half)] } as never,
        false,
      ),
    );
    expect(message.outputs.every((o) => o.contents === null)).toBe(true);
    expect(Buffer.from(message.raw_output_contents[1] as Uint8Array)).toEqual(le(half));
  });

  it('reads outputs that went through JSON (no packed view) the same way', () => {
    const plain = { name: 'y', datatype: 'FP32' as const, shape: [1, 2], data: [0.25, -1] };
    const message = sent(toModelInferResponse({ model_name: 'm', model_version: '1', outputs: [plain] }, true));
    expect(Buffer.from(message.raw_output_contents[0] as Uint8Array)).toEqual(le(new Float32Array([0.25, -1])));
  });
});

describe('parameters', () => {
  it('gives JSON values: int64/uint64 as numbers when safe, else decimal strings; a parameter with no value is left out', () => {
    const message = received({
      parameters: {
        priority: { uint64_param: 3 },
        big: { int64_param: '-9007199254740993' },
        huge: { uint64_param: '18446744073709551615' },
        empty: {},
      },
    });
    expect(fromParameters(message.parameters)).toEqual({ priority: 3, big: '-9007199254740993', huge: '18446744073709551615' });
    expect(fromParameters(received({}).parameters)).toBeUndefined();
  });

  it('turns JSON values back into InferParameters', () => {
    expect(toParameters({ a: true, b: 'x', c: 7, d: 0.5, e: null })).toEqual({
      a: { bool_param: true },
      b: { string_param: 'x' },
      c: { int64_param: '7' },
      d: { double_param: 0.5 },
    });
  });

  it('longToJson', () => {
    expect(longToJson('42')).toBe(42);
    expect(longToJson(-5)).toBe(-5);
    expect(longToJson('9007199254740993')).toBe('9007199254740993');
  });
});

it('the datatype table names a contents field for every datatype but FP16, and every field of InferTensorContents', () => {
  expect(DATATYPES.filter((d) => grpcContentsField(d) === undefined)).toEqual(['FP16']);
  const contents = definition['inference.InferTensorContents'] as unknown as { type: { field: Array<{ name: string }> } };
  const fields = contents.type.field.map((f) => f.name);
  expect(new Set(DATATYPES.map(grpcContentsField).filter(Boolean))).toEqual(new Set(fields));
  expect(new Set(GRPC_CONTENTS_FIELDS)).toEqual(new Set(fields));
});
