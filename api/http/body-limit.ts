/**
 * The request-body size bound (BODY_LIMIT_BYTES), checked without touching the body.
 *
 * hono's own bodyLimit reads `c.req.raw.body` first, and on @hono/node-server that one getter
 * builds a whole WHATWG Request for the Node request: a ReadableStream over the socket, an
 * AbortController, undici's header checks — about a tenth of the API's CPU per submit
 * (docs/BENCHMARKS.md, issue 15). A body with a Content-Length is judged by its header alone, as
 * hono does, and then read later by `c.req.text()`, which node-server serves straight from the
 * socket. Only a chunked body (no length to judge by) goes through hono's bodyLimit, which
 * counts while it reads. On node-server a request with neither header has no body (HTTP/1.1);
 * elsewhere (Lambda's adapter, `app.request` in tests) such a Request may still carry one, so
 * it is counted too.
 */
import type { Context, MiddlewareHandler } from 'hono';
import { bodyLimit as countingBodyLimit } from 'hono/body-limit';

declare module 'hono' {
  interface ContextVariableMap {
    /** BODY_LIMIT_BYTES, for readers that decompress a body (the limit holds for what they decompress). */
    bodyLimitBytes: number;
  }
}

/**
 * The body limit the request is under, for readers of a compressed body (content-encoding.ts):
 * the compressed bytes were judged here, the decompressed ones are judged as they are inflated.
 */
export function bodyLimitOf(c: Context): number {
  return c.get('bodyLimitBytes') ?? DEFAULT_BODY_LIMIT_BYTES;
}

/** What bodyLimitOf answers where no bodyLimit middleware ran (an app built without one, in tests). */
const DEFAULT_BODY_LIMIT_BYTES = 8 * 1024 * 1024;

export function bodyLimit(maxSize: number, onError: (c: Context) => Response | Promise<Response>): MiddlewareHandler {
  const counting = countingBodyLimit({ maxSize, onError });
  return async (c, next) => {
    c.set('bodyLimitBytes', maxSize);
    const length = c.req.header('content-length');
    const chunked = c.req.header('transfer-encoding') !== undefined;
    if (length !== undefined && !chunked) {
      if (Number.parseInt(length, 10) > maxSize) return onError(c);
      await next();
      return;
    }
    if (!chunked && isNodeRequest(c)) {
      await next();
      return;
    }
    return counting(c, next);
  };
}

/** Served by @hono/node-server: its bindings carry the Node request. */
function isNodeRequest(c: Context): boolean {
  const env = c.env as { incoming?: unknown } | undefined;
  return typeof env === 'object' && env !== null && typeof env.incoming === 'object' && env.incoming !== null;
}
