/**
 * The Open Inference Protocol's binary tensor data extension over HTTP (Triton's
 * docs/protocol/extension_binary_data.md, KServe's binary tensor data extension): the body is the
 * JSON inference header followed by raw tensor bytes, `Inference-Header-Content-Length` gives the
 * JSON part's length, each binary input says its byte count in `parameters.binary_data_size`,
 * and the bytes follow in the order of the inputs that have one. Outputs come back binary when
 * `outputs[i].parameters.binary_data` or the request's `parameters.binary_data_output` asks.
 *
 * Pure framing, no I/O: `splitBinaryBody` cuts a request into its header and each binary input's
 * bytes (checked as Triton checks them, with Triton's wording, always a 4xx), `binaryOutputs`
 * says which outputs the caller wants binary, and `joinBinaryBody` frames an answer. The bytes'
 * meaning (a tensor's elements) is oip-validate.ts's and packed-tensors.ts's: the layouts are the
 * same as the packed form's, so a binary input reaches the queue with one copy and no
 * per-element pass.
 */
import { InvalidInputError } from '../kernel/errors.ts';

/** The request header that makes a body binary. */
export const INFERENCE_HEADER_LENGTH = 'inference-header-content-length';

export interface SplitBody {
  /** The JSON inference header, parsed. */
  header: unknown;
  /** Each binary input's bytes by input name: views into the body, no copy. */
  tensors: Map<string, Uint8Array>;
}

/**
 * A binary request body cut into its JSON header and input bytes. `headerLength` is the
 * `Inference-Header-Content-Length` value as sent; `parseJson` parses (and bounds) the header's
 * text, so the JSON rules of every other body apply to it.
 */
export function splitBinaryBody(body: Uint8Array, headerLength: string, parseJson: (text: string) => unknown): SplitBody {
  const length = parseHeaderLength(headerLength, body.byteLength);
  const header = parseJson(Buffer.from(body.buffer, body.byteOffset, length).toString('utf8'));
  const tensors = new Map<string, Uint8Array>();
  let at = length;
  const inputs = isObject(header) && Array.isArray(header.inputs) ? header.inputs : [];
  for (let i = 0; i < inputs.length; i++) {
    const input: unknown = inputs[i];
    if (!isObject(input)) continue; // validation names it
    const size = binaryDataSize(input, i);
    if (size === undefined) continue;
    const name = typeof input.name === 'string' ? input.name : `inputs[${i}]`;
    if (input.data !== undefined) {
      fail('invalid_body', `input '${name}' has both "data" and parameters.binary_data_size; send its elements one way`);
    }
    if (tensors.has(name)) fail('duplicate_input', `input "${name}" appears more than once`);
    const left = body.byteLength - at;
    if (size > left) {
      fail(
        'binary_size_mismatch',
        `unexpected size for input '${name}', expecting ${size - left} additional bytes: its binary_data_size is ${size} but only ${left} bytes follow the inference header`,
      );
    }
    tensors.set(name, body.subarray(at, at + size));
    at += size;
  }
  if (at !== body.byteLength) {
    fail(
      'binary_size_mismatch',
      `unexpected additional input data: ${body.byteLength - at} bytes follow the inference header beyond the ${at - length} that the inputs' binary_data_size account for`,
    );
  }
  return { header, tensors };
}

/**
 * Which outputs the caller wants as binary: `all` (the request's `parameters.binary_data_output`
 * is true, overridden per output by `binary_data: false`), or the names whose
 * `outputs[i].parameters.binary_data` is true. Malformed flags are 400s.
 */
export function binaryOutputs(header: unknown): { all: boolean; named: Set<string>; json: Set<string> } {
  const wanted = { all: false, named: new Set<string>(), json: new Set<string>() };
  if (!isObject(header)) return wanted;
  if (isObject(header.parameters) && header.parameters.binary_data_output !== undefined) {
    wanted.all = flag(header.parameters.binary_data_output, 'parameters.binary_data_output');
  }
  if (!Array.isArray(header.outputs)) return wanted;
  header.outputs.forEach((output: unknown, i) => {
    if (!isObject(output) || typeof output.name !== 'string' || !isObject(output.parameters)) return;
    if (output.parameters.binary_data === undefined) return;
    (flag(output.parameters.binary_data, `outputs[${i}].parameters.binary_data`) ? wanted.named : wanted.json).add(output.name);
  });
  return wanted;
}

/** Whether output `name` goes binary under `wanted` (binaryOutputs). */
export function isBinaryOutput(wanted: ReturnType<typeof binaryOutputs>, name: string): boolean {
  return wanted.named.has(name) || (wanted.all && !wanted.json.has(name));
}

/**
 * A binary answer: the JSON header, then each part's bytes in order (the header's outputs that
 * carry `binary_data_size`, in the same order). Returns the body and the header's byte length
 * for `Inference-Header-Content-Length`.
 */
export function joinBinaryBody(header: unknown, parts: readonly Uint8Array[]): { body: Buffer; headerLength: number } {
  const json = Buffer.from(JSON.stringify(header), 'utf8');
  const body = Buffer.allocUnsafe(json.byteLength + parts.reduce((n, p) => n + p.byteLength, 0));
  body.set(json, 0);
  let at = json.byteLength;
  for (const part of parts) {
    body.set(part, at);
    at += part.byteLength;
  }
  return { body, headerLength: json.byteLength };
}

/** Triton's checks: an integer in [0, body length]; the JSON part may not be empty. */
function parseHeaderLength(raw: string, bodyLength: number): number {
  const trimmed = raw.trim();
  const value = /^-?\d+$/.test(trimmed) ? Number(trimmed) : Number.NaN;
  if (!Number.isSafeInteger(value)) {
    fail('invalid_header_length', `Unable to parse Inference-Header-Content-Length, got: ${JSON.stringify(raw.slice(0, 40))}`);
  }
  if (value <= 0 || value > bodyLength) {
    fail(
      'invalid_header_length',
      `inference header size should be in range (0, ${bodyLength}], got: ${value} (Inference-Header-Content-Length gives the length of the JSON part of a ${bodyLength}-byte body)`,
    );
  }
  return value;
}

/** An input's `parameters.binary_data_size`, or undefined when it has none. */
function binaryDataSize(input: Record<string, unknown>, index: number): number | undefined {
  if (!isObject(input.parameters) || input.parameters.binary_data_size === undefined) return undefined;
  const size = input.parameters.binary_data_size;
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) {
    const name = typeof input.name === 'string' ? input.name : `inputs[${index}]`;
    fail(
      'invalid_body',
      `Unable to parse 'binary_data_size' of input '${name}': must be a non-negative integer, got ${JSON.stringify(size)}`,
    );
  }
  return size;
}

function flag(value: unknown, what: string): boolean {
  if (typeof value === 'boolean') return value;
  fail('invalid_body', `Unable to parse '${what}': must be true or false, got ${JSON.stringify(value)}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(code: string, message: string): never {
  throw new InvalidInputError(code, message);
}
