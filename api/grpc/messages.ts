/**
 * The Open Inference Protocol's gRPC messages (grpc_predict_v2.proto beside this file) as
 * @grpc/proto-loader hands them to the server and takes them back, with PROTO_LOADER_OPTIONS:
 *
 *   keepCase  field names as in the proto (`model_name`, `raw_input_contents`), the names the
 *             OIP's JSON form and Python clients use
 *   longs     String: 64-bit integers (shapes, INT64/UINT64 contents, int64/uint64 parameters)
 *             arrive as decimal strings, never rounded; the conversions turn them into numbers
 *             where they are safe integers (convert.ts), and send strings back
 *   defaults  absent scalars, lists and maps read as '', [], {}; an absent message as null
 *   oneofs    an InferParameter says which value it holds in `parameter_choice`
 *
 * Bytes fields arrive as Buffers (views into the received message, no copy).
 *
 * ModelInferRequest is read by decode.ts instead, into the same shapes, except that a 64-bit
 * integer is a number where it is a safe integer (a decimal string otherwise): the forms below
 * take both.
 */

export const PROTO_LOADER_OPTIONS = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true } as const;

export type ParameterChoice = 'bool_param' | 'int64_param' | 'string_param' | 'double_param' | 'uint64_param';

export interface InferParameterMessage {
  parameter_choice?: ParameterChoice;
  bool_param?: boolean;
  /** Decimal string (longs: String); a number is accepted when sending. */
  int64_param?: string | number;
  string_param?: string;
  double_param?: number;
  uint64_param?: string | number;
}

export type ParameterMap = Record<string, InferParameterMessage>;

/** One repeated field per family of datatypes (the proto's comments say which). */
export interface TensorContentsMessage {
  bool_contents?: boolean[];
  int_contents?: number[];
  int64_contents?: Array<string | number>;
  uint_contents?: number[];
  uint64_contents?: Array<string | number>;
  fp32_contents?: number[];
  fp64_contents?: number[];
  bytes_contents?: Uint8Array[];
}

export type ContentsField = keyof TensorContentsMessage;

export interface InferInputTensorMessage {
  name: string;
  datatype: string;
  shape: Array<string | number>;
  parameters?: ParameterMap;
  contents?: TensorContentsMessage | null;
}

export interface ModelInferRequestMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters?: ParameterMap;
  inputs: InferInputTensorMessage[];
  outputs?: Array<{ name: string; parameters?: ParameterMap }>;
  raw_input_contents?: Uint8Array[];
}

export interface InferOutputTensorMessage {
  name: string;
  datatype: string;
  shape: number[];
  parameters: ParameterMap;
  contents?: TensorContentsMessage;
}

export interface ModelInferResponseMessage {
  model_name: string;
  model_version: string;
  id: string;
  parameters: ParameterMap;
  outputs: InferOutputTensorMessage[];
  raw_output_contents: Uint8Array[];
}

export interface TensorMetadataMessage {
  name: string;
  datatype: string;
  shape: number[];
}

export interface ModelMetadataResponseMessage {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadataMessage[];
  outputs: TensorMetadataMessage[];
}

/** ModelReadyRequest and ModelMetadataRequest. */
export interface ModelRefMessage {
  name: string;
  version: string;
}
