/**
 * The one place warmpool's errors become gRPC statuses, as api/http/errors.ts is for HTTP. The
 * status's message is warmpool's message; warmpool's error code travels in the trailing metadata
 * `warmpool-error-code` (a client that branches on it needs no message parsing), a sync
 * timeout's or a failed inference's job in `warmpool-job-id`, and a retry hint in
 * `warmpool-retry-after-s`.
 *
 *   InvalidInputError 400/413/415/422  INVALID_ARGUMENT     the request is wrong; do not retry it
 *                     404              NOT_FOUND
 *                     409              FAILED_PRECONDITION  the state it needs is not there
 *                     429              RESOURCE_EXHAUSTED   a limit (open jobs, rate)
 *                     403              PERMISSION_DENIED
 *   NotFoundError                      NOT_FOUND
 *   UnauthorizedError                  UNAUTHENTICATED
 *   OverloadedError                    UNAVAILABLE          with its retry time
 *   Redis or S3 unreachable            UNAVAILABLE          as HTTP's 503 `unavailable`
 *   sync inference timed out           DEADLINE_EXCEEDED    naming the job to poll over HTTP
 *   inference failed                   INTERNAL, or INVALID_ARGUMENT when the worker found the input bad
 *   anything else                      INTERNAL             logged whole, answered without internals
 *
 * 413 is INVALID_ARGUMENT, not RESOURCE_EXHAUSTED: a request over a size limit fails the same way
 * every time, and clients commonly retry RESOURCE_EXHAUSTED.
 */
import { Metadata, type StatusObject, status } from '@grpc/grpc-js';
import { errorMessage, InvalidInputError, NotFoundError, OverloadedError, UnauthorizedError } from '../../infra/kernel/errors.ts';
import type { Log } from '../../infra/kernel/log.ts';
import { isStorageFullError, isUnavailableError } from '../../infra/redis/client.ts';
import { STORAGE_FULL_MESSAGE, STORAGE_FULL_RETRY_AFTER_S, UNAVAILABLE_RETRY_AFTER_S } from '../http/errors.ts';

export const ERROR_CODE_KEY = 'warmpool-error-code';
export const JOB_ID_KEY = 'warmpool-job-id';
export const RETRY_AFTER_KEY = 'warmpool-retry-after-s';

/** What a unary handler's callback takes as its error. */
export type GrpcStatus = Pick<StatusObject, 'code' | 'details' | 'metadata'>;

/** A status to answer with as it is, thrown by a handler (a timeout, a failed inference, a rate limit). */
export class StatusError extends Error {
  constructor(readonly status: GrpcStatus) {
    super(status.details);
    this.name = 'StatusError';
  }
}

const BY_HTTP_STATUS: Record<number, status> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  403: status.PERMISSION_DENIED,
  404: status.NOT_FOUND,
  409: status.FAILED_PRECONDITION,
  413: status.INVALID_ARGUMENT,
  415: status.INVALID_ARGUMENT,
  422: status.INVALID_ARGUMENT,
  429: status.RESOURCE_EXHAUSTED,
};

/** A status with warmpool's error code (and any other entries) in its trailing metadata. */
export function grpcStatus(code: status, errorCode: string, message: string, extra: Record<string, string> = {}): GrpcStatus {
  const metadata = new Metadata();
  metadata.set(ERROR_CODE_KEY, errorCode);
  for (const [key, value] of Object.entries(extra)) metadata.set(key, value);
  return { code, details: message, metadata };
}

/** Any thrown value as the status to answer with; `log` hears of the ones that are warmpool's fault. */
export function toGrpcStatus(err: unknown, log?: Log): GrpcStatus {
  if (err instanceof StatusError) return err.status;
  if (err instanceof InvalidInputError || err instanceof NotFoundError || err instanceof UnauthorizedError) {
    const retry: Record<string, string> =
      err instanceof InvalidInputError && err.retryAfterS !== undefined ? { [RETRY_AFTER_KEY]: String(err.retryAfterS) } : {};
    return grpcStatus(BY_HTTP_STATUS[err.status] ?? status.INVALID_ARGUMENT, err.code, err.message, retry);
  }
  if (err instanceof OverloadedError) {
    return grpcStatus(status.UNAVAILABLE, err.code, `${err.message}; retry in ${err.retryAfterS} s`, {
      [RETRY_AFTER_KEY]: String(err.retryAfterS),
    });
  }
  if (isStorageFullError(err)) {
    log?.error({ err: errorMessage(err), transport: 'grpc' }, 'redis is full (maxmemory): new work refused');
    return grpcStatus(status.UNAVAILABLE, 'storage_full', STORAGE_FULL_MESSAGE, { [RETRY_AFTER_KEY]: String(STORAGE_FULL_RETRY_AFTER_S) });
  }
  if (isUnavailableError(err)) {
    log?.error({ err: err instanceof Error ? err.message : String(err), transport: 'grpc' }, 'backing store unavailable');
    return grpcStatus(status.UNAVAILABLE, 'unavailable', 'a backing store (Redis or S3) is unreachable; retry shortly', {
      [RETRY_AFTER_KEY]: String(UNAVAILABLE_RETRY_AFTER_S),
    });
  }
  log?.error({ err, transport: 'grpc' }, 'request failed');
  return grpcStatus(status.INTERNAL, 'internal', 'internal error; the server has logged it');
}

/** A sync inference that did not finish in time: DEADLINE_EXCEEDED naming the job to poll. */
export function timedOut(jobId: string, syncTimeoutMs: number, reason?: string): GrpcStatus {
  const why = reason ? `: ${reason}` : '';
  return grpcStatus(
    status.DEADLINE_EXCEEDED,
    'timeout',
    `inference did not finish within ${syncTimeoutMs} ms${why}; poll /v1/jobs/${jobId} over HTTP`,
    { [JOB_ID_KEY]: jobId },
  );
}

/** A failed inference: the worker's message; INVALID_ARGUMENT when it found the input bad (what validation cannot see). */
export function inferenceFailed(jobId: string, error: { code: string; message: string }): GrpcStatus {
  if (error.code === 'invalid_input') return grpcStatus(status.INVALID_ARGUMENT, 'invalid_input', error.message, { [JOB_ID_KEY]: jobId });
  return grpcStatus(status.INTERNAL, 'inference_failed', error.message, { [JOB_ID_KEY]: jobId });
}

/** Over a per-tenant (or per-address) bucket: RESOURCE_EXHAUSTED with the wait in whole seconds, as HTTP's 429. */
export function rateLimited(retryAfterMs: number, what: string): GrpcStatus {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1000));
  return grpcStatus(status.RESOURCE_EXHAUSTED, 'rate_limited', `${what}; retry in ${seconds} s`, { [RETRY_AFTER_KEY]: String(seconds) });
}
