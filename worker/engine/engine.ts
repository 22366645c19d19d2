/**
 * InferenceEngine: the narrow interface the worker has over ONNX Runtime. The real one
 * (thread-engine.ts) keeps the session in a worker thread, because ORT's `run` blocks the
 * thread that calls it for the whole forward pass; tensors cross as transferable buffers.
 */

import type { OnnxTypeName, PackedArray } from '../../infra/contracts/datatypes.ts';

/** ONNX Runtime's tensor type names that warmpool supports: the datatype table's (infra/contracts/datatypes.ts). */
export type EngineDtype = OnnxTypeName;

export type EngineData = PackedArray | string[];

/** float16 data is the raw IEEE half bits in a Uint16Array; bool is a Uint8Array of 0/1. */
export interface EngineTensor {
  type: EngineDtype;
  dims: number[];
  data: EngineData;
}

export interface EngineLoadOptions {
  /** e.g. ['cuda', 'cpu']: tried in order by ONNX Runtime. */
  executionProviders: string[];
  /** 0 = ONNX Runtime's default. */
  intraOpThreads: number;
}

export interface EngineInfo {
  inputNames: string[];
  outputNames: string[];
  loadMs: number;
}

export interface InferenceEngine {
  /** Loads (or reloads, e.g. with another thread count) the model at `modelPath`. */
  load(modelPath: string, options: EngineLoadOptions): Promise<EngineInfo>;
  /** One forward pass. Input buffers may be transferred (detached) by the call. */
  run(inputs: Record<string, EngineTensor>, outputNames?: string[]): Promise<Record<string, EngineTensor>>;
  /** Idempotent. */
  close(): Promise<void>;
}

/**
 * ONNX Runtime answered this call with an error (bad values for the model, an unsupported op):
 * the engine itself is fine and serves the next call. Any other rejection (the thread died, the
 * engine is closed) means the engine is gone, which is transient for the job: retry elsewhere.
 */
export class EngineRejectedError extends Error {}
