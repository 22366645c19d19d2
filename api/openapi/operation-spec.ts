/**
 * The shape of the operation table (operations.ts) and the pieces its entries share: the
 * responses most routes can give (401, 429, 413, 415, 500, 503), the error codes of a bad
 * inference request, the path parameters, and the demo model the examples use.
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
}

export interface OperationExample {
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: unknown;
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
  body?: { schema: z.ZodType; required: boolean };
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
  description: 'Request too large',
  schema: S.ErrorBody,
  codes: ['body_too_large', ...extra],
});
export const jsonBody = {
  415: { description: 'Body not sent as application/json', schema: S.ErrorBody, codes: ['unsupported_media_type'] },
};
export const backlogFull: ResponseSpec = {
  description: 'The deployment backlog is at its bound (send `"degradable": true` to queue at low priority)',
  schema: S.ErrorBody,
  codes: ['backlog_full'],
  headers: { 'Retry-After': 'Seconds to wait' },
};
export const invalidRequestCodes = [
  'malformed_json',
  'invalid_body',
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
/** A request over the bounds on the work one request may ask for (docs/SECURITY.md). */
export const overBounds = ['too_many_rows', 'too_many_elements', 'parameters_too_large', 'id_too_long'] as const;
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
