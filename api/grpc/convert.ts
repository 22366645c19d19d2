/**
 * Between the Open Inference Protocol's gRPC messages (messages.ts) and the forms warmpool's use
 * cases take: a ModelInferRequest becomes the OIP JSON request header plus the raw bytes of its
 * inputs (exactly what the HTTP routes hand inferSync), and an InferResponse becomes a
 * ModelInferResponse. Pure, no I/O, no gRPC library.
 *
 * Inputs. Raw contents (`raw_input_contents[i]` for input i, what tritonclient.grpc always sends)
 * are the OIP binary layout as they stand, so they go to validation as binary tensor data: one
 * copy, no per-element pass. Typed contents become the input's JSON `data`, so validation checks
 * every element's range exactly as it checks an HTTP JSON body (int_contents carries int32s for an
 * INT8 input; validation refuses 300 there), with the same messages. Each datatype's elements
 * travel in one field (the datatype table's `grpc`, contracts/datatypes.ts, from the proto's
 * comments); FP16 has none and must be raw.
 * A request with raw contents and typed contents at once is refused, as Triton does.
 *
 * Outputs. Raw (`raw_output_contents`, the bytes of packedData: a view of the worker's output, no
 * per-element pass) when the request sent raw inputs, asked for binary outputs
 * (`binary_data_output`, an output's `binary_data`), or an output is FP16 (no typed field, and the
 * proto forbids mixing raw and typed outputs); typed `contents` otherwise.
 *
 * 64-bit integers: proto-loader gives them as decimal strings (messages.ts); a shape, a parameter
 * or an element becomes a number where it is a safe integer and stays a string otherwise (the
 * JSON form validation takes for INT64/UINT64), and goes back as a string.
 */
import {
  DATATYPE_INFO,
  type Datatype,
  GRPC_CONTENTS_FIELDS,
  grpcContentsField,
  type PackedArray,
} from '../../infra/contracts/datatypes.ts';
import type { InferRequest, InferResponse, OipTensor } from '../../infra/contracts/oip.ts';
import { binaryOutputs } from '../../infra/contracts/oip-binary.ts';
import { packedData, type TensorData, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../../infra/kernel/errors.ts';
import type { ModelMetadata } from '../use-cases/model-status.ts';
import type {
  ContentsField,
  InferInputTensorMessage,
  InferOutputTensorMessage,
  InferParameterMessage,
  ModelInferRequestMessage,
  ModelInferResponseMessage,
  ModelMetadataResponseMessage,
  ParameterMap,
  TensorContentsMessage,
} from './messages.ts';

/** What inferSync takes from a ModelInferRequest, and how its outputs go back. */
export interface InferCall {
  model: string;
  /** Undefined when the request names none (the deployment picks). */
  version: string | undefined;
  /** The OIP JSON request header: raw inputs have no `data`. */
  body: InferRequest;
  /** Raw inputs' bytes by input name; absent when the request sent none. */
  binary?: Map<string, Uint8Array>;
  /** Whether the response's outputs go as raw_output_contents (before looking at their datatypes). */
  rawOutputs: boolean;
}

export function fromModelInferRequest(request: ModelInferRequestMessage): InferCall {
  const raw = request.raw_input_contents ?? [];
  const inputs = request.inputs ?? [];
  if (raw.length > 0 && raw.length !== inputs.length) {
    fail(
      'raw_input_mismatch',
      `raw_input_contents has ${raw.length} entries but the request has ${inputs.length} inputs; send one per input, in the order of inputs`,
    );
  }
  const binary = raw.length > 0 ? new Map<string, Uint8Array>() : undefined;
  const body: InferRequest = {
    inputs: inputs.map((input, i) => {
      const tensor = inputHeader(input, i);
      const bytes = raw[i];
      if (binary && bytes) {
        if (typedField(input.contents) !== undefined) {
          fail(
            'invalid_body',
            `input "${tensor.name}" has typed contents but the request also sends raw_input_contents; send every input one way`,
          );
        }
        binary.set(tensor.name, bytes);
      } else {
        tensor.data = typedData(tensor.name, input.datatype, input.contents);
      }
      return tensor;
    }),
  };
  if (request.id) body.id = request.id;
  const parameters = fromParameters(request.parameters);
  if (parameters) body.parameters = parameters;
  if (request.outputs && request.outputs.length > 0) {
    body.outputs = request.outputs.map((o) => {
      const p = fromParameters(o.parameters);
      return p ? { name: o.name, parameters: p } : { name: o.name };
    });
  }
  const wanted = binaryOutputs(body);
  return {
    model: request.model_name,
    version: request.model_version || undefined,
    body,
    ...(binary ? { binary } : {}),
    rawOutputs: binary !== undefined || wanted.all || wanted.named.size > 0,
  };
}

/** A ModelInferResponse for `response`: raw contents when `raw` or when an output is FP16 (no typed field). */
export function toModelInferResponse(response: InferResponse, raw: boolean): ModelInferResponseMessage {
  const allRaw = raw || response.outputs.some((t) => grpcContentsField(t.datatype) === undefined);
  const rawContents: Uint8Array[] = [];
  const outputs = response.outputs.map((t): InferOutputTensorMessage => {
    const out: InferOutputTensorMessage = {
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      parameters: toParameters(t.parameters),
    };
    const data = packedData(t);
    if (allRaw) rawContents.push(wireBytes(t.datatype, data));
    else out.contents = typedContents(t.datatype, data);
    return out;
  });
  return {
    model_name: response.model_name,
    model_version: response.model_version,
    id: response.id ?? '',
    parameters: toParameters(response.parameters),
    outputs,
    raw_output_contents: rawContents,
  };
}

export function toModelMetadataResponse(metadata: ModelMetadata): ModelMetadataResponseMessage {
  const tensor = (t: ModelMetadata['inputs'][number]) => ({ name: t.name, datatype: t.datatype, shape: [...t.shape] });
  return {
    name: metadata.name,
    versions: metadata.versions,
    platform: metadata.platform,
    inputs: metadata.inputs.map(tensor),
    outputs: metadata.outputs.map(tensor),
  };
}

/** A parameter map as plain JSON values (what `parameters` holds in the OIP's JSON form); undefined when empty. */
export function fromParameters(map: ParameterMap | undefined): Record<string, unknown> | undefined {
  if (!map) return undefined;
  const out: Record<string, unknown> = {};
  for (const [name, p] of Object.entries(map)) {
    const value = parameterValue(p);
    if (value !== undefined) out[name] = value;
  }
  return Object.keys(out).length > 0 ? out : undefined;
}

/** JSON values as InferParameters: booleans, strings, safe integers (int64), other numbers (double); anything else is left out. */
export function toParameters(values: Record<string, unknown> | undefined): ParameterMap {
  const out: ParameterMap = {};
  for (const [name, v] of Object.entries(values ?? {})) {
    if (typeof v === 'boolean') out[name] = { bool_param: v };
    else if (typeof v === 'string') out[name] = { string_param: v };
    else if (typeof v === 'number' && Number.isSafeInteger(v)) out[name] = { int64_param: String(v) };
    else if (typeof v === 'number') out[name] = { double_param: v };
  }
  return out;
}

/** A 64-bit integer as proto-loader gives it: a number when it is a safe integer, else its decimal string. */
export function longToJson(value: string | number): number | string {
  const n = Number(value);
  return Number.isSafeInteger(n) ? n : String(value);
}

function parameterValue(p: InferParameterMessage): unknown {
  switch (p.parameter_choice) {
    case 'bool_param':
      return p.bool_param;
    case 'string_param':
      return p.string_param;
    case 'double_param':
      return p.double_param;
    case 'int64_param':
      return p.int64_param === undefined ? undefined : longToJson(p.int64_param);
    case 'uint64_param':
      return p.uint64_param === undefined ? undefined : longToJson(p.uint64_param);
    default:
      return undefined; // a parameter with no value set says nothing
  }
}

/** The input's header: name, datatype, shape (as numbers) and parameters; `data` is added by the caller. */
function inputHeader(input: InferInputTensorMessage, index: number): OipTensor {
  const name = input.name || `inputs[${index}]`;
  const shape = (input.shape ?? []).map((d, axis) => {
    const n = Number(d);
    if (!Number.isSafeInteger(n)) fail('shape_mismatch', `input "${name}": shape[${axis}] is ${String(d)}, not a usable size`);
    return n;
  });
  const tensor = { name: input.name, datatype: input.datatype, shape } as OipTensor;
  const parameters = fromParameters(input.parameters);
  if (parameters) tensor.parameters = parameters;
  return tensor;
}

/**
 * A typed input's elements as JSON values, from the field for its datatype. Elements in any other
 * field are refused; an unknown datatype gives no elements (validation then names the datatype).
 */
function typedData(name: string, datatype: string, contents: TensorContentsMessage | null | undefined): OipTensor['data'] {
  const known = Object.hasOwn(DATATYPE_INFO, datatype);
  const field = known ? grpcContentsField(datatype as Datatype) : undefined;
  const sent = typedField(contents);
  if (known && field === undefined) {
    fail('invalid_body', `input "${name}": ${datatype} has no typed contents field; send its elements in raw_input_contents`);
  }
  if (sent !== undefined && field !== undefined && sent !== field) {
    fail('invalid_body', `input "${name}": datatype ${datatype} takes its elements in contents.${field}, not contents.${sent}`);
  }
  const values = field === undefined ? undefined : contents?.[field];
  if (!values) return [];
  if (field === 'bytes_contents')
    return (values as Uint8Array[]).map((b) => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('utf8'));
  if (field === 'int64_contents' || field === 'uint64_contents') return (values as Array<string | number>).map(longToJson);
  return values as Array<number | boolean>;
}

/** The first contents field holding elements; undefined when none does. */
function typedField(contents: TensorContentsMessage | null | undefined): ContentsField | undefined {
  if (!contents) return undefined;
  return GRPC_CONTENTS_FIELDS.find((f) => (contents[f]?.length ?? 0) > 0);
}

/** An output's elements in the typed field for its datatype (never FP16: it goes raw). */
function typedContents(datatype: Datatype, data: TensorData): TensorContentsMessage {
  const field = grpcContentsField(datatype) as ContentsField;
  if (field === 'bytes_contents') return { bytes_contents: (data as readonly string[]).map((s) => Buffer.from(s, 'utf8')) };
  const typed = data as PackedArray;
  if (typed instanceof BigInt64Array || typed instanceof BigUint64Array) {
    return { [field]: Array.from(typed, (v) => v.toString()) };
  }
  if (field === 'bool_contents') return { bool_contents: Array.from(typed as Uint8Array, (v) => v !== 0) };
  return { [field]: Array.from(typed as Float32Array) };
}

function fail(code: string, message: string): never {
  throw new InvalidInputError(code, message);
}
