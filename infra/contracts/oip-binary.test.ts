import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../kernel/errors.ts';
import { binaryOutputs, isBinaryOutput, joinBinaryBody, splitBinaryBody } from './oip-binary.ts';

/**
 * The extension document's example request (triton-inference-server/server
 * docs/protocol/extension_binary_data.md, "Examples"; the same in KServe's binary tensor data
 * extension page): input0 UINT32 [2, 2] as 16 bytes, input1 BOOL [3] as 3 bytes, output0 asked
 * binary. The JSON header is the document's, byte for byte.
 */
const SPEC_HEADER = `{
  "model_name" : "mymodel",
  "inputs" : [
    {
      "name" : "input0",
      "shape" : [ 2, 2 ],
      "datatype" : "UINT32",
      "parameters" : {
        "binary_data_size" : 16
      }
    },
    {
      "name" : "input1",
      "shape" : [ 3 ],
      "datatype" : "BOOL",
      "parameters" : {
        "binary_data_size" : 3
      }
    }
  ],
  "outputs" : [
    {
      "name" : "output0",
      "parameters" : {
        "binary_data" : true
      }
    }
  ]
}`;

const input0 = new Uint8Array(Uint32Array.from([1, 2, 3, 4]).buffer);
const input1 = Uint8Array.from([1, 0, 1]);

function body(header: string, ...parts: Uint8Array[]): Uint8Array {
  return Buffer.concat([Buffer.from(header, 'utf8'), ...parts]);
}

function refusal(fn: () => unknown): InvalidInputError {
  try {
    fn();
  } catch (err) {
    if (err instanceof InvalidInputError) return err;
    throw err;
  }
  throw new Error('expected a refusal');
}

describe('splitBinaryBody', () => {
  it('cuts the extension document’s example into its header and both inputs’ bytes (19 bytes after the JSON)', () => {
    const bytes = body(SPEC_HEADER, input0, input1);
    expect(bytes.byteLength).toBe(Buffer.byteLength(SPEC_HEADER) + 19);
    const { header, tensors } = splitBinaryBody(bytes, String(Buffer.byteLength(SPEC_HEADER)), JSON.parse);
    expect(header).toEqual(JSON.parse(SPEC_HEADER));
    expect(Array.from(new Uint32Array(new Uint8Array(tensors.get('input0') ?? []).buffer))).toEqual([1, 2, 3, 4]);
    expect(Array.from(tensors.get('input1') ?? [])).toEqual([1, 0, 1]);
    expect(isBinaryOutput(binaryOutputs(header), 'output0')).toBe(true);
  });

  it('takes JSON inputs beside binary ones, and a zero-byte binary input', () => {
    const header = JSON.stringify({
      inputs: [
        { name: 'a', datatype: 'FP32', shape: [1, 0], parameters: { binary_data_size: 0 } },
        { name: 'b', datatype: 'FP32', shape: [1, 1], data: [1] },
        { name: 'c', datatype: 'UINT8', shape: [1, 2], parameters: { binary_data_size: 2 } },
      ],
    });
    const { tensors } = splitBinaryBody(body(header, Uint8Array.from([7, 8])), String(Buffer.byteLength(header)), JSON.parse);
    expect(tensors.get('a')?.byteLength).toBe(0);
    expect(tensors.has('b')).toBe(false);
    expect(Array.from(tensors.get('c') ?? [])).toEqual([7, 8]);
  });

  const length = String(Buffer.byteLength(SPEC_HEADER));
  it.each([
    ['-1', /inference header size should be in range \(0, \d+\], got: -1/],
    ['0', /inference header size should be in range/],
    ['100000', /got: 100000/],
    ['12abc', /Unable to parse Inference-Header-Content-Length/],
    ['', /Unable to parse Inference-Header-Content-Length/],
  ])('refuses a header length of %j', (value, message) => {
    const err = refusal(() => splitBinaryBody(body(SPEC_HEADER, input0, input1), value, JSON.parse));
    expect(err.status).toBe(400);
    expect(err.code).toBe('invalid_header_length');
    expect(err.message).toMatch(message);
  });

  it('refuses sizes that do not add up, in Triton’s words', () => {
    const short = refusal(() => splitBinaryBody(body(SPEC_HEADER, input0, input1.subarray(0, 2)), length, JSON.parse));
    expect(short.code).toBe('binary_size_mismatch');
    expect(short.message).toMatch(/unexpected size for input 'input1', expecting 1 additional bytes/);
    const trailing = refusal(() => splitBinaryBody(body(SPEC_HEADER, input0, input1, Uint8Array.from([9])), length, JSON.parse));
    expect(trailing.message).toMatch(/unexpected additional input data: 1 bytes/);
    // No binary_data_size anywhere: every byte after the header is unaccounted for.
    const plain = JSON.stringify({ inputs: [{ name: 'input0', datatype: 'UINT32', shape: [1, 2], data: [1, 2] }] });
    expect(refusal(() => splitBinaryBody(body(plain, input0), String(Buffer.byteLength(plain)), JSON.parse)).message).toMatch(
      /unexpected additional input data: 16 bytes/,
    );
  });

  it('refuses a malformed binary_data_size, and data sent both ways', () => {
    const bad = (size: unknown) => JSON.stringify({ inputs: [{ name: 'x', parameters: { binary_data_size: size } }] });
    for (const size of [-1, 1.5, '4', null]) {
      const header = bad(size);
      expect(refusal(() => splitBinaryBody(body(header), String(Buffer.byteLength(header)), JSON.parse)).message).toMatch(
        /Unable to parse 'binary_data_size' of input 'x'/,
      );
    }
    const both = JSON.stringify({ inputs: [{ name: 'x', data: [1], parameters: { binary_data_size: 4 } }] });
    expect(refusal(() => splitBinaryBody(body(both, input1), String(Buffer.byteLength(both)), JSON.parse)).message).toMatch(
      /both "data" and parameters.binary_data_size/,
    );
  });

  it('parses the header with the caller’s JSON rules (their errors pass through)', () => {
    const header = '{"inputs": [';
    const parse = () => {
      throw new InvalidInputError('malformed_json', 'request body is not valid JSON');
    };
    expect(refusal(() => splitBinaryBody(body(header), String(header.length), parse)).code).toBe('malformed_json');
  });
});

describe('binaryOutputs', () => {
  it('binary_data_output sets the default; binary_data on an output overrides it', () => {
    const all = binaryOutputs({ parameters: { binary_data_output: true }, outputs: [{ name: 'a', parameters: { binary_data: false } }] });
    expect(isBinaryOutput(all, 'a')).toBe(false);
    expect(isBinaryOutput(all, 'b')).toBe(true);
    const one = binaryOutputs({ outputs: [{ name: 'a', parameters: { binary_data: true } }, { name: 'b' }] });
    expect([isBinaryOutput(one, 'a'), isBinaryOutput(one, 'b')]).toEqual([true, false]);
    expect(isBinaryOutput(binaryOutputs({ inputs: [] }), 'a')).toBe(false);
  });

  it('a flag that is not a boolean is a 400', () => {
    expect(refusal(() => binaryOutputs({ parameters: { binary_data_output: 'yes' } })).message).toMatch(
      /Unable to parse 'parameters.binary_data_output'/,
    );
    expect(refusal(() => binaryOutputs({ outputs: [{ name: 'a', parameters: { binary_data: 1 } }] })).code).toBe('invalid_body');
  });
});

describe('joinBinaryBody', () => {
  it('frames the document’s example response: the JSON header, then output0’s 24 bytes', () => {
    const output0 = new Uint8Array(Float32Array.from([1, 1.1, 2, 2.1, 3, 3.1]).buffer);
    const header = { outputs: [{ name: 'output0', shape: [3, 2], datatype: 'FP32', parameters: { binary_data_size: 24 } }] };
    const { body: framed, headerLength } = joinBinaryBody(header, [output0]);
    expect(framed.byteLength).toBe(headerLength + 24);
    expect(JSON.parse(framed.subarray(0, headerLength).toString('utf8'))).toEqual(header);
    expect(Array.from(new Float32Array(new Uint8Array(framed.subarray(headerLength)).buffer))).toEqual(
      Array.from(Float32Array.from([1, 1.1, 2, 2.1, 3, 3.1])),
    );
  });
});
