/**
 * Open Inference Protocol (KServe v2) tensor types: the form job data and results take
 * (DESIGN §4). Validation of a request against a manifest lives in infra/contracts/oip-validate.ts.
 */
export const DATATYPES = [
  'BOOL',
  'UINT8',
  'UINT16',
  'UINT32',
  'UINT64',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BYTES',
] as const;
export type Datatype = (typeof DATATYPES)[number];

/** A tensor as it travels in JSON. `data` is flat, row-major (nested arrays are flattened on input). */
export interface OipTensor {
  name: string;
  shape: number[];
  datatype: Datatype;
  data: Array<number | boolean | string>;
  parameters?: Record<string, unknown>;
}

export interface OipRequestedOutput {
  name: string;
  parameters?: Record<string, unknown>;
}

export interface InferRequest {
  id?: string;
  inputs: OipTensor[];
  outputs?: OipRequestedOutput[];
  parameters?: Record<string, unknown>;
}

export interface InferResponse {
  model_name: string;
  model_version: string;
  id?: string;
  outputs: OipTensor[];
  parameters?: Record<string, unknown>;
}
