/**
 * The model manifest (DESIGN §3), stored beside `model.onnx` as `manifest.json` under
 * `models/<name>/<version>/`. Input and output metadata are read from the model itself.
 */
import type { BatchAxis } from './batch-axes.ts';
import type { Datatype } from './oip.ts';

export interface TensorSpec {
  name: string;
  datatype: Datatype;
  /**
   * OIP convention: -1 marks a dynamic dimension. In warmpool's row layout: the first axis is
   * the batch axis (the rows), always -1, wherever the model keeps it (`batchAxis`).
   */
  shape: number[];
  /**
   * Where the model keeps the rows (batch-axes.ts): an axis ≥ 1, or `'none'` for a tensor with no
   * batch axis. Absent: axis 0, the row layout itself (every model whose inputs and outputs all
   * batch on their first axis; their manifests carry no such field).
   */
  batchAxis?: BatchAxis;
}

export interface BatchingHints {
  /** Largest number of rows in one forward pass. */
  maxBatch: number;
  /** Batch sizes a worker runs during warm-up; empty means powers of two up to maxBatch. */
  warmupBatches: number[];
  /**
   * The non-batch dimensions warm-up gives an input whose shape has dynamic ones, by input name
   * (`{ x: [3, 48, 192] }`): the size the model serves, so the batch profile measures real
   * requests. Absent (or an input left out): warm-up tries sizes until one runs (worker/warmup.ts).
   * Checked at publish by warmupShapesProblem (infra/contracts/warmup-shapes.ts).
   */
  warmupShapes?: Record<string, number[]>;
  /**
   * The model fixes its batch dimension at this size (an export with a batch of 1, read at publish
   * by infra/registry/onnx-metadata.ts): every forward pass carries exactly that many rows, so
   * maxBatch is it too, and a request of several rows runs as several passes. Absent: the batch
   * axis is dynamic.
   */
  fixedBatch?: number;
}

export interface ModelManifest {
  name: string;
  version: string;
  format: 'onnx';
  sha256: string;
  sizeBytes: number;
  inputs: TensorSpec[];
  outputs: TensorSpec[];
  batching: BatchingHints;
  opset?: number;
  producer?: string;
  createdAt: string;
  labels: Record<string, string>;
}

/** Model and version names: safe in S3 keys, queue names and URLs. */
export const MODEL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
export const VERSION_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
