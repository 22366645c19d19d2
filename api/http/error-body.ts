/**
 * The `{ error: { code, message } }` body (DESIGN §5) and the answer to each of the kernel's
 * error classes (infra/kernel/errors.ts), with no I/O behind it: shared by the regional API's
 * error handler (errors.ts, which adds the backing stores' errors) and the edge gateway
 * (api/edge/), which holds no Redis connection and must answer the same refusals the same way.
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { InvalidInputError, NotFoundError, OverloadedError, UnauthorizedError } from '../../infra/kernel/errors.ts';

export interface ErrorBody {
  error: { code: string; message: string; [extra: string]: unknown };
}

export function errorBody(code: string, message: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: { code, message, ...extra } };
}

/** The response a kernel error class decides; undefined for any other error. */
export function decisionResponse(err: Error, c: Context): Response | undefined {
  if (err instanceof InvalidInputError && err.retryAfterS !== undefined) {
    c.header('Retry-After', String(err.retryAfterS));
    return c.json(errorBody(err.code, err.message, { retry_after_s: err.retryAfterS }), err.status as ContentfulStatusCode);
  }
  if (err instanceof InvalidInputError || err instanceof NotFoundError) {
    return c.json(errorBody(err.code, err.message), err.status as ContentfulStatusCode);
  }
  if (err instanceof OverloadedError) {
    c.header('Retry-After', String(err.retryAfterS));
    return c.json(errorBody(err.code, err.message, { retry_after_s: err.retryAfterS }), 503);
  }
  if (err instanceof UnauthorizedError) {
    c.header('WWW-Authenticate', 'Bearer');
    return c.json(errorBody(err.code, err.message), 401);
  }
  return undefined;
}
