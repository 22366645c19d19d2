/**
 * Answers that carry output tensors — a sync inference response, a job resource — as JSON, or
 * in the OIP binary tensor extension's form when the caller asked for some outputs binary
 * (infra/contracts/oip-binary.ts): the JSON header with each binary output's `data` replaced by
 * `parameters.binary_data_size`, then those outputs' bytes in the header's order, with
 * `Inference-Header-Content-Length`. The bytes come from the outputs' packed rows
 * (packed-tensors.ts's rowsTensor): no JSON numbers are made for a binary output.
 *
 * Bounded before anything is built (issue 33), in this order, from the outputs' shapes alone:
 *   1. the elements that would go as JSON, past MAX_JSON_OUTPUT_ELEMENTS → 413 `output_too_large`,
 *      whose message says how to ask for the binary form (`hint`);
 *   2. the answer's bytes (binary: exact; JSON: each element at its datatype's widest, tensor-json.ts)
 *      past FREE_ANSWER_BYTES are taken from the tenant's byte budget (RATE_LIMIT_BYTES_PER_S, the
 *      bucket request bodies spend) → 429 `rate_limited` with Retry-After when it is spent.
 * Then JSON is written from the packed elements a slice at a time (tensor-json.ts's jsonParts):
 * past one slice the body is a stream whose parts are made one per turn of the event loop, so a
 * 20 MB answer never holds the loop for the whole of it.
 */
import type { Context } from 'hono';
import type { OipTensor } from '../../infra/contracts/oip.ts';
import { type binaryOutputs, isBinaryOutput, joinBinaryBody } from '../../infra/contracts/oip-binary.ts';
import { packedData, wireBytes } from '../../infra/contracts/packed-tensors.ts';
import { JSON_SLICE_ELEMENTS, jsonBytesBound, jsonParts, outputElements } from '../../infra/contracts/tensor-json.ts';
import type { Clock } from '../ports.ts';
import { acceptWeights } from './accept-weights.ts';
import { errorBody } from './error-body.ts';
import { type RateLimitSettings, type RateRefusal, takeByteBudget } from './rate-limit.ts';

export type BinaryWanted = ReturnType<typeof binaryOutputs>;

const OCTET_STREAM = 'application/octet-stream';
const JSON_TYPE = 'application/json';

/**
 * Answer bytes that cost nothing from the byte budget: a job's status, a few thousand outputs.
 * Building 64 KiB of JSON (3,300 FP32 elements) took 0.5 ms on a loaded 2-core machine
 * (scripts/bench/json-output.ts's method), the order of handling the request itself, which the
 * request bucket already pays for; and most answers then skip the byte bucket altogether.
 */
export const FREE_ANSWER_BYTES = 64 * 1024;

/** Nothing binary: the default. */
export const JSON_ONLY: BinaryWanted = { all: false, named: new Set(), json: new Set() };

/** Every output binary (a job fetched with Accept: application/octet-stream or ?binary_data_output=true). */
export const ALL_BINARY: BinaryWanted = { all: true, named: new Set(), json: new Set() };

/** What bounds an answer: the routes get it from the app (answerLimits). */
export interface AnswerLimits {
  /** Output elements one JSON answer may carry (MAX_JSON_OUTPUT_ELEMENTS); unlimited when absent. */
  maxJsonOutputElements?: number;
  /** Takes an answer's bytes from the tenant's byte budget; no charge when absent. */
  charge?: (tenant: string, bytes: number) => Promise<RateRefusal | undefined>;
}

/** The bounds from the app's settings: the rate limit's byte bucket (when set) and MAX_JSON_OUTPUT_ELEMENTS. */
export function answerLimits(rateLimit: RateLimitSettings | undefined, clock: Clock, maxJsonOutputElements?: number): AnswerLimits {
  const limits: AnswerLimits = {};
  if (maxJsonOutputElements !== undefined) limits.maxJsonOutputElements = maxJsonOutputElements;
  if (rateLimit)
    limits.charge = (tenant, bytes) => takeByteBudget(rateLimit, tenant, clock.now(), bytes, 'bytes (request bodies and answers)');
  return limits;
}

export interface TensorAnswer {
  wanted: BinaryWanted;
  limits: AnswerLimits;
  /** How this route's caller asks for the outputs in binary form, as a clause for the 413's message. */
  binaryHint: string;
  /** Extra fields of a refusal's error body (a sync call's job_id). */
  details?: Record<string, unknown>;
}

/**
 * `body` answered with status 200; its `outputs` (when present) go binary as `wanted` says. JSON
 * when no output is binary, as Triton answers (no Inference-Header-Content-Length then). Bounded
 * and charged first (see the header).
 */
export async function tensorResponse<T extends { outputs?: OipTensor[] }>(c: Context, body: T, answer: TensorAnswer): Promise<Response> {
  const { wanted, limits } = answer;
  const outputs = body.outputs ?? [];
  const jsonOutputs = outputs.filter((t) => !isBinaryOutput(wanted, t.name));
  const elements = outputElements(jsonOutputs);
  const max = limits.maxJsonOutputElements;
  if (max !== undefined && elements > max) {
    const message = `the outputs ${jsonOutputs.length < outputs.length ? 'asked for as JSON ' : ''}hold ${elements} elements, more than the ${max} one JSON answer may carry (MAX_JSON_OUTPUT_ELEMENTS); ${answer.binaryHint}`;
    return c.json(errorBody('output_too_large', message, answer.details), 413);
  }
  if (jsonOutputs.length === outputs.length) {
    const refused = await charge(c, limits, jsonBytesBound(body));
    if (refused) return refuse(c, refused, answer.details);
    return jsonResponse(c, body, elements);
  }
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
  const partBytes = parts.reduce((n, p) => n + p.byteLength, 0);
  const refused = await charge(c, limits, jsonBytesBound(header) + partBytes);
  if (refused) return refuse(c, refused, answer.details);
  const { body: bytes, headerLength } = joinBinaryBody(header, parts);
  return c.body(new Uint8Array(bytes.buffer as ArrayBuffer, bytes.byteOffset, bytes.byteLength), 200, {
    'Content-Type': 'application/octet-stream',
    'Inference-Header-Content-Length': String(headerLength),
  });
}

/** One string for an answer of one slice or less; past it, a stream made a slice per turn of the event loop. */
function jsonResponse(c: Context, body: object, elements: number): Response {
  const headers = { 'Content-Type': JSON_TYPE };
  if (elements <= JSON_SLICE_ELEMENTS) return c.body([...jsonParts(body)].join(''), 200, headers);
  const parts = jsonParts(body);
  const encoder = new TextEncoder();
  const stream = new ReadableStream<Uint8Array>({
    async pull(controller) {
      await nextTurn();
      const next = parts.next();
      if (next.done) controller.close();
      else controller.enqueue(encoder.encode(next.value));
    },
    cancel() {
      parts.return(undefined);
    },
  });
  return c.body(stream, 200, headers);
}

/** Resolves on the event loop's next turn, after the I/O that is waiting (setImmediate; a timer where there is none). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => (typeof setImmediate === 'function' ? setImmediate(resolve) : setTimeout(resolve, 0)));
}

async function charge(c: Context, limits: AnswerLimits, bytes: number): Promise<(RateRefusal & { bytes: number }) | undefined> {
  if (!limits.charge || bytes <= FREE_ANSWER_BYTES) return undefined;
  const refused = await limits.charge(c.get('tenant') as string, bytes - FREE_ANSWER_BYTES);
  return refused ? { ...refused, bytes } : undefined;
}

function refuse(c: Context, refused: RateRefusal & { bytes: number }, details: Record<string, unknown> | undefined): Response {
  const seconds = Math.max(1, Math.ceil(refused.retryAfterMs / 1000));
  const message = `this answer is up to ${refused.bytes} bytes, more than the tenant's byte budget has left (the limit is ${refused.limit}; the first ${FREE_ANSWER_BYTES} bytes of an answer are free); retry in ${seconds} s, or ask for fewer outputs, or for them in binary form (smaller, and charged at their exact size)`;
  return c.json(errorBody('rate_limited', message, details), 429, { 'Retry-After': String(seconds) });
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
