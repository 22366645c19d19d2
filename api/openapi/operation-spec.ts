/**
 * The shape of the operation table (operations.ts) and the pieces its entries share: the
 * responses most routes can give (401, 429, 413, 415, 500, 503), the error codes of a bad
 * inference request, the OIP binary tensor data forms of inference bodies and answers, the path
 * parameters, and the demo model the examples use.
 */
import type { z } from 'zod';
import * as S from './schemas.ts';

export type HttpMethod = 'get' | 'post' | 'put' | 'delete';

export interface ResponseSpec {
  description: string;
  /** Absent: no body worth describing. */
  schema?: z.ZodType;
  /** Default application/json. */
  contentType?: string;
  /** Error codes this status carries here (listed in the description). */
  codes?: readonly string[];
  /** Response headers worth naming: name → description. */
  headers?: Record<string, string>;
  /** The answer may come as binary tensor data instead (application/octet-stream, with Inference-Header-Content-Length). */
  binary?: BinaryForm;
}

/**
 * The OIP binary tensor data form of a body (infra/contracts/oip-binary.ts): a JSON header, then
 * tensor bytes. document.ts publishes it as `application/octet-stream` content beside the JSON,
 * with the header's schema under `x-inference-header`, and adds the Inference-Header-Content-Length
 * header it comes with.
 */
export interface BinaryForm {
  /** The JSON part at the start of the body. */
  header: z.ZodType;
  /** When this form is used, and how the bytes follow the header. */
  description: string;
}

export interface OperationExample {
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: unknown;
  /** The body's request as binary tensor data: its JSON header (the tensors' bytes are the body's `data`, encoded). */
  binaryHeader?: unknown;
  /** The status this example gets on a server where the example's model is deployed and served. */
  status: number;
}

export interface OperationSpec {
  operationId: string;
  method: HttpMethod;
  /** hono syntax: `/v1/jobs/:id`. */
  path: string;
  tag: string;
  summary: string;
  description?: string;
  /** Bearer API key required (and rate-limited). */
  auth: boolean;
  params?: Record<string, z.ZodType>;
  query?: z.ZodObject;
  headers?: Record<string, z.ZodType>;
  /** Every body may be compressed (Content-Encoding, added by document.ts); `binary`: it may be binary tensor data instead of JSON. */
  body?: { schema: z.ZodType; required: boolean; binary?: BinaryForm };
  responses: Record<number, ResponseSpec>;
  example?: OperationExample;
}

export const DEMO_MODEL = 'demo-scorer';
const DEMO_FEATURES = 64;

/** A demo-scorer input row: 64 values in [0, 1). */
export function demoRow(seed = 1): number[] {
  return Array.from({ length: DEMO_FEATURES }, (_, i) => Math.round(((i * 37 + seed * 11) % 100) * 10) / 1000);
}

export const demoInputs = [{ name: 'features', shape: [1, DEMO_FEATURES], datatype: 'FP32', data: demoRow() }];
/** demoInputs as binary tensor data: the header's inputs; 64 FP32 = 256 bytes follow the header. */
export const demoBinaryInputs = demoInputs.map(({ data, ...input }) => ({ ...input, parameters: { binary_data_size: data.length * 4 } }));

/** How binary tensor bytes are laid out, as each binary form's description says it. */
const TENSOR_BYTES =
  'Elements are little-endian and row-major: BOOL one byte each, FP16 IEEE half-precision bits, BYTES a 4-byte ' +
  'little-endian length and then the bytes, per element.';

/** An inference request sent as binary tensor data (the OIP binary tensor data extension). */
export function binaryRequest(header: z.ZodType): BinaryForm {
  return {
    header,
    description:
      'Binary tensor data (Open Inference Protocol extension `binary_tensor_data`): the JSON header (schema under ' +
      '`x-inference-header`), then the bytes of each input that has `parameters.binary_data_size` instead of `data`, ' +
      'in input order, each that many bytes. Send `Inference-Header-Content-Length: <bytes of the JSON header>`: with it ' +
      'the body is read this way whatever its Content-Type (`application/octet-stream` is usual; tritonclient sends none). ' +
      `${TENSOR_BYTES} Sizes that do not add up to the body, or do not fit an input's shape, are a 400 \`binary_size_mismatch\`.`,
  };
}

/** An answer carrying output tensors, as binary tensor data when `when` holds. */
export function binaryResponse(header: z.ZodType, when: string): BinaryForm {
  return {
    header,
    description:
      `${when}: binary tensor data. The JSON header (schema under \`x-inference-header\`, \`Inference-Header-Content-Length\` ` +
      'bytes long), then the bytes of each output that has `parameters.binary_data_size` instead of `data`, in output ' +
      `order. ${TENSOR_BYTES}`,
  };
}

// Responses most routes share.
const unauthorized: ResponseSpec = {
  description: 'Missing or unknown API key',
  schema: S.ErrorBody,
  codes: ['unauthorized'],
  headers: { 'WWW-Authenticate': 'Bearer' },
};
const rateLimited: ResponseSpec = {
  description: "Over the tenant's rate limit, or too many wrong keys from the caller's address (AUTH_FAILURE_LIMIT_PER_MIN)",
  schema: S.ErrorBody,
  codes: ['rate_limited'],
  headers: { 'Retry-After': 'Seconds to wait' },
};
const internal: ResponseSpec = { description: 'Server fault (logged)', schema: S.ErrorBody, codes: ['internal'] };
export const authed = { 401: unauthorized, 429: rateLimited, 500: internal };
export const tooLarge = (extra: readonly string[] = []): ResponseSpec => ({
  description: 'Request too large (a compressed body counts once decompressed)',
  schema: S.ErrorBody,
  codes: ['body_too_large', ...extra],
});
/** Every body is read through the same Content-Encoding decoder (api/http/content-encoding.ts). */
const unsupportedCoding = 'unsupported_content_encoding';
export const jsonBody = {
  415: {
    description: 'Body not sent as application/json, or compressed with a coding other than gzip or deflate',
    schema: S.ErrorBody,
    codes: ['unsupported_media_type', unsupportedCoding],
  },
};
/** The inference routes take JSON (any JSON type, or none) or binary tensor data (api/http/infer-body.ts). */
export const inferBody = {
  415: {
    description:
      'Body neither JSON (a JSON type, application/octet-stream, or no Content-Type) nor binary tensor data (Inference-Header-Content-Length), ' +
      'or compressed with a coding other than gzip or deflate',
    schema: S.ErrorBody,
    codes: ['unsupported_media_type', unsupportedCoding],
  },
};
export const backlogFull: ResponseSpec = {
  description: 'The deployment backlog is at its bound (send `"degradable": true` to queue at low priority)',
  schema: S.ErrorBody,
  codes: ['backlog_full'],
  headers: { 'Retry-After': 'Seconds to wait' },
};
/** A body that does not decompress (Content-Encoding), or is not JSON. */
export const malformedBody = ['malformed_json', 'malformed_body'] as const;
export const invalidRequestCodes = [
  ...malformedBody,
  'invalid_body',
  'unknown_field',
  'unknown_input',
  'missing_input',
  'duplicate_input',
  'datatype_mismatch',
  'shape_mismatch',
  'data_length_mismatch',
  'invalid_value',
  'unknown_output',
  'duplicate_output',
] as const;
/** A binary tensor body whose framing is wrong (infra/contracts/oip-binary.ts). */
export const binaryBodyCodes = ['invalid_header_length', 'binary_size_mismatch'] as const;
/** A request over the bounds on the work one request may ask for (docs/SECURITY.md). */
export const overBounds = ['too_many_rows', 'too_many_elements', 'parameters_too_large', 'id_too_long'] as const;
/** Outputs past MAX_JSON_OUTPUT_ELEMENTS for a JSON answer (api/http/infer-response.ts); `binary`: how to read them instead. */
export const outputTooLarge = (binary: string): ResponseSpec => ({
  description: `The outputs hold more than MAX_JSON_OUTPUT_ELEMENTS elements for a JSON answer: ${binary}`,
  schema: S.ErrorBody,
  codes: ['output_too_large'],
});
/** An answer with outputs is charged to the tenant's byte budget (RATE_LIMIT_BYTES_PER_S) before it is built. */
export const answerRateLimited: ResponseSpec = {
  ...rateLimited,
  description: `${rateLimited.description}, or the answer's bytes (past the first 64 KiB) are more than the tenant's byte budget has left`,
};
/** Rate limited, or the tenant holds MAX_OPEN_JOBS_PER_TENANT queued or running jobs already. */
export const rateLimitedOrTooManyJobs: ResponseSpec = {
  ...rateLimited,
  description: "Over the tenant's rate limit, or it has MAX_OPEN_JOBS_PER_TENANT jobs queued or running",
  codes: ['rate_limited', 'too_many_open_jobs'],
  headers: { 'Retry-After': 'Seconds to wait (rate_limited)' },
};
export const webhookOrFallback: ResponseSpec = {
  description: 'Webhook refused, or the backlog is full and the fallback model does not accept this request',
  schema: S.ErrorBody,
  codes: ['invalid_webhook', 'webhook_url_blocked', 'fallback_incompatible'],
};
/** A published model version that no deployment lists and no worker serves (api/use-cases/serving-check.ts). */
export const notDeployedModel: ResponseSpec = {
  description:
    'The model (or the version asked for) is published but not deployed, and no worker serves it: the message names the fix (`warmpool deploy M`, or PUT /v1/deployments/M)',
  schema: S.ErrorBody,
  codes: ['model_not_deployed'],
};
export const modelNotFound: ResponseSpec = {
  description: 'No such model or version',
  schema: S.ErrorBody,
  codes: ['model_not_found', 'version_not_found'],
};

export const model = { model: S.ModelName };
export const modelAndVersion = { model: S.ModelName, version: S.VersionName };
export const jobId = { id: S.JobId };

export function notFoundJob(): ResponseSpec {
  return { description: 'No such job for this tenant', schema: S.ErrorBody, codes: ['job_not_found'] };
}

export function notDeployed(): ResponseSpec {
  return { description: 'Not deployed', schema: S.ErrorBody, codes: ['deployment_not_found'] };
}
