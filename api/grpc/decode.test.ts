/**
 * decode.ts against the published proto's own codec (proto-loader, PROTO_LOADER_OPTIONS): the same
 * messages, serialized by proto-loader, decode to what proto-loader's deserializer gives (its
 * 64-bit strings read as convert.ts reads them); malformed bytes and messages past the limits are
 * refused with their codes.
 */
import { loadSync } from '@grpc/proto-loader';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import { longToJson } from './convert.ts';
import { decodeModelInferRequest, MAX_PARAMETERS_PER_MAP, MAX_TENSORS_PER_REQUEST } from './decode.ts';
import { PROTO_LOADER_OPTIONS } from './messages.ts';
import { PROTO_FILE } from './server.ts';

const definition = loadSync(PROTO_FILE, PROTO_LOADER_OPTIONS);
const infer = (
  definition['inference.GRPCInferenceService'] as unknown as Record<
    string,
    { requestSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown }
  >
).ModelInfer as { requestSerialize(v: unknown): Buffer; requestDeserialize(b: Buffer): unknown };

/** proto-loader's object with its 64-bit decimal strings as numbers where safe (what decode.ts gives). */
function normalised(value: unknown, key = ''): unknown {
  if (Buffer.isBuffer(value)) return [...value];
  if (Array.isArray(value)) {
    const longs = key === 'shape' || key === 'int64_contents' || key === 'uint64_contents';
    return value.map((v) => (longs ? longToJson(v as string) : normalised(v)));
  }
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, normalised(v, k)]));
  }
  return value;
}

const both = (message: object) => {
  const bytes = infer.requestSerialize(message);
  return { ours: normalised(decodeModelInferRequest(bytes)), theirs: normalised(infer.requestDeserialize(bytes)) };
};

function refusal(run: () => unknown): { code: string; message: string; status: number } {
  try {
    run();
  } catch (err) {
    if (err instanceof InvalidInputError) return { code: err.code, message: err.message, status: err.status };
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('decodeModelInferRequest', () => {
  it('gives what proto-loader gives, for every field, packed and 64-bit extremes', () => {
    const messages = [
      {},
      { model_name: 'm', model_version: '3', id: 'req-1' },
      {
        model_name: 'm',
        parameters: {
          flag: { bool_param: true },
          n: { int64_param: '-9223372036854775808' },
          u: { uint64_param: '18446744073709551615' },
          s: { string_param: 'é' },
          d: { double_param: 0.25 },
          __proto__: { int64_param: '7' },
        },
        inputs: [
          {
            name: 'a',
            datatype: 'INT64',
            shape: ['2', '9007199254740993'],
            parameters: { k: { int64_param: '5' } },
            contents: { int64_contents: ['-1', '0', '9007199254740991', '-9007199254740993', '9223372036854775807'] },
          },
          { name: 'b', datatype: 'INT32', shape: [3], contents: { int_contents: [-2147483648, -1, 2147483647] } },
          {
            name: 'c',
            datatype: 'UINT32',
            shape: [2],
            contents: { uint_contents: [0, 4294967295], uint64_contents: ['18446744073709551615', '1'] },
          },
          { name: 'd', datatype: 'FP32', shape: [3], contents: { fp32_contents: [1.5, -0, 3.4e38], fp64_contents: [Math.PI, -1e308] } },
          { name: 'e', datatype: 'BOOL', shape: [3], contents: { bool_contents: [true, false, true] } },
          { name: 'f', datatype: 'BYTES', shape: [2], contents: { bytes_contents: [Buffer.from('héllo'), Buffer.alloc(0)] } },
          { name: 'g', datatype: 'FP32', shape: [] },
        ],
        outputs: [{ name: 'o', parameters: { binary_data: { bool_param: true } } }, { name: 'p' }],
        raw_input_contents: [Buffer.from([1, 2, 3]), Buffer.alloc(0)],
      },
    ];
    for (const message of messages) {
      const { ours, theirs } = both(message);
      expect(ours).toEqual(theirs);
    }
  });

  it('keeps raw contents as views into the message (no copy)', () => {
    const bytes = infer.requestSerialize({ raw_input_contents: [Buffer.alloc(1024, 7)] });
    const raw = decodeModelInferRequest(bytes).raw_input_contents?.[0] as Buffer;
    expect(raw.buffer).toBe(bytes.buffer);
    expect(raw.length).toBe(1024);
  });

  it('reads repeated scalars sent unpacked, and skips unknown fields', () => {
    // inputs { name "x" shape 2 (unpacked) shape 3 (unpacked) } ; field 15 varint 1 (unknown)
    const input = Buffer.from([0x0a, 0x01, 0x78, 0x18, 0x02, 0x18, 0x03]);
    const bytes = Buffer.concat([Buffer.from([0x2a, input.length]), input, Buffer.from([0x78, 0x01])]);
    const request = decodeModelInferRequest(bytes);
    expect(request.inputs[0]?.name).toBe('x');
    expect(request.inputs[0]?.shape).toEqual([2, 3]);
  });

  it('refuses malformed bytes with malformed_message (INVALID_ARGUMENT, not a crash)', () => {
    for (const bytes of [
      [0xff, 0xff], // a tag whose varint runs off the end
      [0x0a, 0x05, 0x61], // a string longer than the message
      [0x2a, 0x02, 0x1a, 0x05], // a packed run longer than its input
      [0x08, 0x01], // model_name (field 1) as a varint
      [0x00], // field number 0
      [0x2a, 0x03, 0x2a, 0x01, 0x35], // contents: fp32 run of 1 byte ... inside an input
    ]) {
      expect(refusal(() => decodeModelInferRequest(Buffer.from(bytes)))).toMatchObject({ code: 'malformed_message', status: 400 });
    }
  });

  it('refuses an input with more typed elements than maxElements before reading the rest', () => {
    const bytes = infer.requestSerialize({
      inputs: [{ name: 'big', datatype: 'FP32', shape: [5], contents: { fp32_contents: [1, 2, 3, 4, 5] } }],
    });
    expect(decodeModelInferRequest(bytes, { maxElements: 5 }).inputs[0]?.contents?.fp32_contents).toEqual([1, 2, 3, 4, 5]);
    expect(refusal(() => decodeModelInferRequest(bytes, { maxElements: 4 }))).toEqual({
      code: 'too_many_elements',
      status: 413,
      message: 'input "big" carries more than 4 elements; at most 4 are allowed in one request (MAX_ELEMENTS_PER_JOB)',
    });
    const varints = infer.requestSerialize({ inputs: [{ name: 'v', contents: { int64_contents: ['300', '1', '2'] } }] });
    expect(refusal(() => decodeModelInferRequest(varints, { maxElements: 2 })).code).toBe('too_many_elements');
  });

  it('refuses more BYTES elements than maxBytesElements over the whole request', () => {
    const input = (name: string) => ({
      name,
      datatype: 'BYTES',
      shape: [2],
      contents: { bytes_contents: [Buffer.from('a'), Buffer.from('b')] },
    });
    const bytes = infer.requestSerialize({ inputs: [input('x'), input('y')] });
    expect(decodeModelInferRequest(bytes, { maxBytesElements: 4 }).inputs).toHaveLength(2);
    expect(refusal(() => decodeModelInferRequest(bytes, { maxBytesElements: 3 }))).toMatchObject({
      code: 'too_many_bytes_elements',
      status: 413,
    });
  });

  it('refuses more tensors, or parameters, than a request can use', () => {
    const inputs = Array.from({ length: MAX_TENSORS_PER_REQUEST + 1 }, () => ({ name: 'x' }));
    expect(decodeModelInferRequest(infer.requestSerialize({ inputs: inputs.slice(1) })).inputs).toHaveLength(MAX_TENSORS_PER_REQUEST);
    expect(refusal(() => decodeModelInferRequest(infer.requestSerialize({ inputs }))).code).toBe('too_many_tensors');
    expect(refusal(() => decodeModelInferRequest(infer.requestSerialize({ outputs: inputs }))).code).toBe('too_many_tensors');
    const parameters = Object.fromEntries(Array.from({ length: MAX_PARAMETERS_PER_MAP + 1 }, (_, i) => [`k${i}`, { bool_param: true }]));
    expect(refusal(() => decodeModelInferRequest(infer.requestSerialize({ parameters }))).code).toBe('parameters_too_large');
  });
});
