/**
 * ModelInferRequest's decoder: the protobuf wire format read straight into the objects messages.ts
 * describes (the forms proto-loader gives with PROTO_LOADER_OPTIONS), without proto-loader's
 * decode-then-toObject passes.
 *
 * Why its own: proto-loader decodes a message into protobufjs objects, then copies it into plain
 * objects, turning every 64-bit integer into a Long and then into a decimal string. That costs
 * about 1 µs per element: an 8 MiB message of one-byte elements (shape dimensions, empty
 * bytes_contents, INT64 contents) held the event loop for seconds (issue 33). Here a packed
 * element costs a varint read and an array store; bytes stay views into the received message
 * (no copy); 64-bit integers become numbers where they are safe integers (what convert.ts makes
 * of them anyway) and decimal strings otherwise. docs/SECURITY.md has the measured figures.
 *
 * Bounded by the caller's `maxElements` (MAX_ELEMENTS_PER_JOB): an input carrying more typed
 * elements than one request may declare is refused as soon as its count passes the limit, before
 * the rest is read (validation would refuse it after the whole decode). A malformed message is an
 * InvalidInputError (`malformed_message`), never a crash.
 */
import { MAX_PARAMETERS_BYTES } from '../../infra/contracts/oip-validate.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type {
  InferInputTensorMessage,
  InferParameterMessage,
  ModelInferRequestMessage,
  ParameterMap,
  TensorContentsMessage,
} from './messages.ts';
import { FIXED32, FIXED64, LENGTH, malformed, Reader, VARINT } from './wire-reader.ts';

export interface DecodeLimits {
  /** Typed elements one input may carry (MAX_ELEMENTS_PER_JOB); unlimited when absent. */
  maxElements?: number;
  /** bytes_contents elements the whole request may carry (MAX_BYTES_ELEMENTS_PER_JOB); unlimited when absent. */
  maxBytesElements?: number;
}

/**
 * Inputs, and requested outputs, one request may name. No served model comes near it, and a
 * request naming inputs its model lacks is refused by validation anyway; the bound only stops a
 * message of a million tiny tensors (~14 bytes each, an object and two strings apiece) before it
 * is built.
 */
export const MAX_TENSORS_PER_REQUEST = 1_024;

/**
 * Entries one parameters map may carry: an entry is at least 4 bytes of JSON (`"":0`), so a map of
 * more cannot pass validation's MAX_PARAMETERS_BYTES.
 */
export const MAX_PARAMETERS_PER_MAP = MAX_PARAMETERS_BYTES / 4;

/** The ModelInferRequest in `buf` (the whole received message). */
export function decodeModelInferRequest(buf: Buffer, limits: DecodeLimits = {}): ModelInferRequestMessage {
  const r = new Reader(buf, 0, buf.length);
  const counts: Counts = { bytesElements: 0 };
  const request: ModelInferRequestMessage = {
    model_name: '',
    model_version: '',
    id: '',
    parameters: {},
    inputs: [],
    outputs: [],
    raw_input_contents: [],
  };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === LENGTH) request.model_name = r.string();
    else if (field === 2 && wire === LENGTH) request.model_version = r.string();
    else if (field === 3 && wire === LENGTH) request.id = r.string();
    else if (field === 4 && wire === LENGTH) mapEntry(r.sub(), request.parameters as ParameterMap, 'the request');
    else if (field === 5 && wire === LENGTH) {
      tensorRoom('inputs', request.inputs.length);
      request.inputs.push(inputTensor(r.sub(), limits, request.inputs.length, counts));
    } else if (field === 6 && wire === LENGTH) {
      tensorRoom('outputs', request.outputs?.length ?? 0);
      request.outputs?.push(outputTensor(r.sub()));
    } else if (field === 7 && wire === LENGTH) request.raw_input_contents?.push(r.bytes());
    else known(field, wire, 7, r);
  }
  return request;
}

/** What the whole request has spent of its limits so far. */
interface Counts {
  bytesElements: number;
}

function tensorRoom(what: 'inputs' | 'outputs', count: number): void {
  if (count < MAX_TENSORS_PER_REQUEST) return;
  throw new InvalidInputError(
    'too_many_tensors',
    `the request names more than ${MAX_TENSORS_PER_REQUEST} ${what}; at most ${MAX_TENSORS_PER_REQUEST} are allowed`,
    { status: 413 },
  );
}

function inputTensor(r: Reader, limits: DecodeLimits, index: number, counts: Counts): InferInputTensorMessage {
  const input: InferInputTensorMessage = { name: '', datatype: '', shape: [], parameters: {}, contents: null };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === LENGTH) input.name = r.string();
    else if (field === 2 && wire === LENGTH) input.datatype = r.string();
    else if (field === 3) varints(r, wire, 'int64', input.shape, noLimit);
    else if (field === 4 && wire === LENGTH) mapEntry(r.sub(), input.parameters as ParameterMap, `input ${index}`);
    else if (field === 5 && wire === LENGTH) {
      input.contents ??= emptyContents();
      tensorContents(r.sub(), input.contents, limits, counts, () => input.name || `inputs[${index}]`);
    } else known(field, wire, 5, r);
  }
  return input;
}

const noLimit = (): void => undefined;

function outputTensor(r: Reader): { name: string; parameters: ParameterMap } {
  const output = { name: '', parameters: {} as ParameterMap };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === LENGTH) output.name = r.string();
    else if (field === 2 && wire === LENGTH) mapEntry(r.sub(), output.parameters, `output "${output.name}"`);
    else known(field, wire, 2, r);
  }
  return output;
}

function emptyContents(): TensorContentsMessage {
  return {
    bool_contents: [],
    int_contents: [],
    int64_contents: [],
    uint_contents: [],
    uint64_contents: [],
    fp32_contents: [],
    fp64_contents: [],
    bytes_contents: [],
  };
}

/** Appends to `contents` (a second contents field merges into the first, as protobuf merges messages). */
function tensorContents(r: Reader, contents: TensorContentsMessage, limits: DecodeLimits, counts: Counts, name: () => string): void {
  const c = contents as Required<TensorContentsMessage>;
  const max = limits.maxElements ?? Number.POSITIVE_INFINITY;
  const maxBytes = limits.maxBytesElements ?? Number.POSITIVE_INFINITY;
  // Counted before a run is decoded: one field can hold millions of elements.
  const room = (more: number) => {
    if (elementCount(c) + more <= max) return;
    throw new InvalidInputError(
      'too_many_elements',
      `input "${name()}" carries more than ${max} elements; at most ${max} are allowed in one request (MAX_ELEMENTS_PER_JOB)`,
      { status: 413 },
    );
  };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field >= 1 && field <= 5) {
      varints(r, wire, VARINT_KINDS[field - 1] as VarintKind, c[CONTENTS_FIELDS[field - 1] as VarintField], room);
    } else if (field === 6) fixed(r, wire, 4, c.fp32_contents, room);
    else if (field === 7) fixed(r, wire, 8, c.fp64_contents, room);
    else if (field === 8) {
      if (wire !== LENGTH) malformed(`field 8 of InferTensorContents has wire type ${wire}`);
      room(1);
      if (++counts.bytesElements > maxBytes) {
        throw new InvalidInputError(
          'too_many_bytes_elements',
          `the request carries more than ${maxBytes} BYTES elements; at most ${maxBytes} are allowed in one request (MAX_BYTES_ELEMENTS_PER_JOB)`,
          { status: 413 },
        );
      }
      c.bytes_contents.push(r.bytes());
    } else r.skip(wire, field);
  }
}

type VarintKind = 'bool' | 'int32' | 'int64' | 'uint32' | 'uint64';
const VARINT_KINDS: readonly VarintKind[] = ['bool', 'int32', 'int64', 'uint32', 'uint64'];
const CONTENTS_FIELDS = ['bool_contents', 'int_contents', 'int64_contents', 'uint_contents', 'uint64_contents'] as const;
type VarintField = (typeof CONTENTS_FIELDS)[number];

function elementCount(c: Required<TensorContentsMessage>): number {
  return (
    c.bool_contents.length +
    c.int_contents.length +
    c.int64_contents.length +
    c.uint_contents.length +
    c.uint64_contents.length +
    c.fp32_contents.length +
    c.fp64_contents.length +
    c.bytes_contents.length
  );
}

/** A repeated varint field, packed (one length-delimited run) or one element; `room` hears of the count first. */
function varints(r: Reader, wire: number, kind: VarintKind, into: unknown[], room: (more: number) => void): void {
  if (wire === VARINT) {
    room(1);
    into.push(varint(r, kind));
    return;
  }
  if (wire !== LENGTH) malformed(`a repeated field has wire type ${wire}`);
  const length = r.length();
  const end = r.pos + length;
  const { buf } = r;
  // Each varint ends in one byte below 0x80: the run's element count, without decoding it.
  let count = 0;
  for (let i = r.pos; i < end; i++) if ((buf[i] as number) < 0x80) count++;
  room(count);
  const outer = r.end;
  r.end = end; // a varint cannot run into the next field
  try {
    // Sized once (the count is known): no regrowth of a million-element array while it fills.
    let at = into.length;
    into.length = at + count;
    if (kind === 'bool') {
      // A loop of its own: one store site per element kind keeps V8's arrays monomorphic.
      while (r.pos < end) into[at++] = r.uint32() !== 0;
      return;
    }
    while (r.pos < end) {
      const byte = buf[r.pos] as number;
      // One-byte varints (0–127) skip the general reader.
      if (byte < 0x80) {
        r.pos++;
        into[at++] = byte;
      } else into[at++] = varint(r, kind);
    }
  } finally {
    r.end = outer;
  }
}

function varint(r: Reader, kind: VarintKind): number | string | boolean {
  switch (kind) {
    case 'bool':
      return r.uint32() !== 0;
    case 'int32':
      return r.uint32() | 0;
    case 'uint32':
      return r.uint32();
    case 'int64':
      return r.int64(true);
    case 'uint64':
      return r.int64(false);
  }
}

/** A repeated float (4) or double (8), packed or one element; a packed run is copied once, aligned, and read as a typed array. */
function fixed(r: Reader, wire: number, size: 4 | 8, into: number[], room: (more: number) => void): void {
  if (wire === (size === 4 ? FIXED32 : FIXED64)) {
    room(1);
    into.push(size === 4 ? r.float() : r.double());
    return;
  }
  if (wire !== LENGTH) malformed(`a repeated field has wire type ${wire}`);
  const length = r.length();
  if (length % size !== 0) malformed(`a packed run of ${length} bytes is not whole ${size}-byte elements`);
  room(length / size);
  const copy = new Uint8Array(length);
  copy.set(r.buf.subarray(r.pos, r.pos + length));
  r.pos += length;
  // Typed arrays read in the platform's byte order: little-endian on every platform Node serves (x64, arm64).
  const values = size === 4 ? new Float32Array(copy.buffer) : new Float64Array(copy.buffer);
  const at = into.length;
  into.length = at + values.length;
  for (let i = 0; i < values.length; i++) into[at + i] = values[i] as number;
}

/** Entries read into each map so far (a map on the wire is one field per entry). */
const mapSizes = new WeakMap<ParameterMap, number>();

/** A map<string, InferParameter> entry (key 1, value 2); a `__proto__` key stays a key. */
function mapEntry(r: Reader, map: ParameterMap, owner: string): void {
  const entries = (mapSizes.get(map) ?? 0) + 1;
  if (entries > MAX_PARAMETERS_PER_MAP) {
    throw new InvalidInputError(
      'parameters_too_large',
      `the parameters of ${owner} have more than ${MAX_PARAMETERS_PER_MAP} entries; they cannot fit the ${MAX_PARAMETERS_BYTES} bytes allowed`,
      { status: 413 },
    );
  }
  mapSizes.set(map, entries);
  let key = '';
  let value: InferParameterMessage = {};
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === LENGTH) key = r.string();
    else if (field === 2 && wire === LENGTH) value = parameter(r.sub());
    else known(field, wire, 2, r);
  }
  Object.defineProperty(map, key, { value, enumerable: true, writable: true, configurable: true });
}

function parameter(r: Reader): InferParameterMessage {
  const p: InferParameterMessage = {};
  const choose = (choice: NonNullable<InferParameterMessage['parameter_choice']>, value: unknown) => {
    // A oneof holds its last member set.
    for (const k of ['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'] as const) delete p[k];
    p.parameter_choice = choice;
    (p as Record<string, unknown>)[choice] = value;
  };
  while (r.pos < r.end) {
    const tag = r.uint32();
    const field = tag >>> 3;
    const wire = tag & 7;
    if (field === 1 && wire === VARINT) choose('bool_param', r.uint32() !== 0);
    else if (field === 2 && wire === VARINT) choose('int64_param', String(r.int64(true)));
    else if (field === 3 && wire === LENGTH) choose('string_param', r.string());
    else if (field === 4 && wire === FIXED64) choose('double_param', r.double());
    else if (field === 5 && wire === VARINT) choose('uint64_param', String(r.int64(false)));
    else known(field, wire, 5, r);
  }
  return p;
}

/** A field this decoder does not take: a known field number with the wrong wire type is malformed; an unknown one is skipped. */
function known(field: number, wire: number, lastField: number, r: Reader): void {
  if (field === 0) malformed('field number 0');
  if (field <= lastField) malformed(`field ${field} has wire type ${wire}`);
  r.skip(wire, field);
}
