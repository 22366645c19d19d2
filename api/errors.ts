/**
 * The one place warmpool errors become HTTP responses (hono `onError`), plus the JSON 404 for
 * unknown routes. Every error body is `{ error: { code, message } }` (DESIGN §5).
 */
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { InvalidInputError, NotFoundError, OverloadedError, UnauthorizedError } from '../infra/errors.ts';

/** The slice of a pino logger the API uses. */
export interface ErrorLog {
  error(obj: object, msg?: string): void;
}

export interface ErrorBody {
  error: { code: string; message: string; [extra: string]: unknown };
}

export function errorBody(code: string, message: string, extra: Record<string, unknown> = {}): ErrorBody {
  return { error: { code, message, ...extra } };
}

export function errorHandler(log: ErrorLog | undefined) {
  return (err: Error, c: Context): Response => {
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
    // Anything else is ours, not the caller's: log it whole, answer without internals.
    log?.error({ err, method: c.req.method, path: c.req.path }, 'request failed');
    return c.json(errorBody('internal', 'internal error; the server has logged it'), 500);
  };
}

export function notFoundHandler(c: Context): Response {
  return c.json(errorBody('route_not_found', `no route for ${c.req.method} ${c.req.path}`), 404);
}
