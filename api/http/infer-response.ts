/**
 * Answers that carry output tensors — a sync inference response, a job resource — as JSON, or
 * in the OIP binary tensor extension's form when the caller asked for some outputs binary
 * (infra/contracts/oip-binary.ts): the JSON header with each binary output's `data` replaced by
 * `parameters.binary_data_size`, then those outputs' bytes in the header's order, with
 * `Inference-Header-Content-Length`. The bytes come from the outputs' packed rows
 * (packed-tensors.ts's rowsTensor): no JSON numbers are made for a binary output.
 */
import type { Context } from 'hono';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { type binaryOutputs, isBinaryOutput, joinBinaryBody } from '../../infra/contracts/oip-binary.ts';
import { packedData, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { acceptWeights } from './accept-weights.ts';

export type BinaryWanted = ReturnType<typeof binaryOutputs>;

const OCTET_STREAM = 'application/octet-stream';
const JSON_TYPE = 'application/json';

/** Nothing binary: the default. */
export const JSON_ONLY: BinaryWanted = { all: false, named: new Set(), json: new Set() };

/** Every output binary (a job fetched with Accept: application/octet-stream or ?binary_data_output=true). */
export const ALL_BINARY: BinaryWanted = { all: true, named: new Set(), json: new Set() };

/**
 * `body` answered with status 200; its `outputs` (when present) go binary as `wanted` says. JSON
 * when no output is binary, as Triton answers (no Inference-Header-Content-Length then).
 */
export function tensorResponse<T extends { outputs?: OipTensor[] }>(c: Context, body: T, wanted: BinaryWanted): Response {
  const outputs = body.outputs ?? [];
  if (!outputs.some((t) => isBinaryOutput(wanted, t.name))) return c.json(body, 200);
  const parts: Uint8Array[] = [];
  const header = {
    ...body,
    outputs: outputs.map((t) => {
      if (!isBinaryOutput(wanted, t.name)) return t;
      const bytes = wireBytes(t.datatype, packedData(t));
      parts.push(bytes);
      const parameters = { ...(t.parameters ?? {}), binary_data_size: bytes.byteLength };
      return { name: t.name, datatype: t.datatype, shape: t.shape, parameters };
    }),
  };
  const { body: bytes, headerLength } = joinBinaryBody(header, parts);
  return c.body(new Uint8Array(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength), 200, {
    'Content-Type': 'application/octet-stream',
    'Inference-Header-Content-Length': String(headerLength),
  });
}

/**
 * A job resource read binary: `?binary_data_output=true` (the parameter a sync request would
 * carry), or an Accept header that prefers application/octet-stream to JSON (higher q, or the
 * same q and listed first).
 */
export function wantsBinaryJob(c: Context): BinaryWanted {
  const query = c.req.query('binary_data_output');
  if (query === 'true' || query === '1') return ALL_BINARY;
  const accept = c.req.header('accept');
  if (accept === undefined || !/octet-stream/i.test(accept)) return JSON_ONLY;
  const q = acceptWeights(accept);
  const binary = q.get(OCTET_STREAM) ?? 0;
  const json = q.get(JSON_TYPE) ?? 0;
  if (binary <= 0 || binary < json) return JSON_ONLY;
  if (binary > json) return ALL_BINARY;
  // A tie goes to the type listed first.
  return [...q.keys()].find((t) => t === OCTET_STREAM || t === JSON_TYPE) === OCTET_STREAM ? ALL_BINARY : JSON_ONLY;
}
