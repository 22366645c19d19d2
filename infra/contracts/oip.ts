/**
 * Open Inference Protocol (KServe v2) tensor types: the form job data and results take
 * (DESIGN §4). Validation of a request against a manifest lives in infra/contracts/oip-validate.ts.
 */
import type { Datatype } from './datatypes.ts';

// The datatypes and everything about them: datatypes.ts, the one table.
export { DATATYPES, type Datatype } from './datatypes.ts';

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
