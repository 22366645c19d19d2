/**
 * Compressed bodies both ways, as Triton's HTTP server handles them: tritonclient and other
 * clients may send a request body as gzip or deflate (`Content-Encoding`) and accept a compressed
 * response (`Accept-Encoding`).
 *
 * Requests: `readBody` decodes one coding (gzip, x-gzip, deflate in zlib or raw form) through a
 * zlib stream, counting the bytes as they come out. Two bounds stop it the moment they are
 * crossed, so what a body costs is judged by what it inflates to, not by what was sent (issue 33):
 * - the body limit: a zip bomb (64 MiB of zeros is 64 KiB gzipped) stops one zlib chunk (16 KiB)
 *   past it instead of filling memory: 413 `body_too_large`;
 * - the tenant's byte budget (RATE_LIMIT_BYTES_PER_S/BURST, rate-limit.ts): the middleware took
 *   the compressed length before the body was read; each chunk that takes the inflated size past
 *   what was paid takes the difference from the bucket, through the process's lease on it (mostly
 *   a subtraction, rate-lease.ts). Refused: 429 `rate_limited` with Retry-After, and nothing more
 *   is inflated. Without it a tenant sent 300 bodies of 8 KB that each inflated to 8 MiB and were
 *   parsed, uncharged, slowing every other tenant.
 * The stream works in zlib's chunks on the thread pool, and waits while a chunk's charge is asked
 * of Redis: one body cannot hold the event loop for its whole inflation.
 * A list of codings is refused (415), as Triton does, rather than decoded layer by layer: each
 * layer could cost a full limit's worth of inflating for one small request. The bytes as sent are
 * bounded by the body-limit middleware (api/http/body-limit.ts), so an identity body is returned
 * untouched.
 *
 * Responses: `compressResponses` buffers and compresses a finished response when the client
 * asked for it. On @hono/node-server a response's body getter builds WHATWG streams (as the
 * request's does, see body-limit.ts), so the body is touched only once every header-level
 * reason to skip has been ruled out; a request without Accept-Encoding costs one header read.
 * Streams (`text/event-stream`) are never buffered.
 */
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Context, MiddlewareHandler } from 'hono';
import { errorMessage, InvalidInputError } from '../../infra/kernel/errors.ts';
import { acceptWeights } from './accept-weights.ts';
import { type BodyByteBudget, refusalAnswer } from './rate-limit.ts';
import { type Coding, requestCoding, zlibHeader } from './request-coding.ts';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

type Format = 'gzip' | 'zlib' | 'raw';

/** The request body as bytes, decoded per its Content-Encoding and at most `limitBytes` once decoded. */
export async function readBody(c: Context, limitBytes: number): Promise<Buffer> {
  const coding = requestCoding(c.req.header('content-encoding'));
  const sent = Buffer.from(await c.req.arrayBuffer());
  if (coding === undefined || sent.length === 0) return sent;
  return decode(c, sent, coding, limitBytes);
}

async function decode(c: Context, sent: Buffer, { name, coding }: { name: string; coding: Coding }, limitBytes: number): Promise<Buffer> {
  const tooLarge = () =>
    new InvalidInputError(
      'body_too_large',
      `request body is larger than ${limitBytes} bytes once decompressed (Content-Encoding: ${name})`,
      {
        status: 413,
      },
    );
  const meter = { limitBytes, tooLarge, budget: c.get('bodyByteBudget'), c };
  // "deflate" means the zlib format (RFC 9110), but some clients send raw deflate.
  const format: Format = coding === 'gzip' ? 'gzip' : zlibHeader(sent) ? 'zlib' : 'raw';
  try {
    return await inflateStream(sent, format, meter).catch((err: unknown) => {
      // A raw stream whose first two bytes happen to read as a zlib header: nothing came out yet.
      if (format !== 'zlib' || err instanceof InvalidInputError || (err as Inflated).producedBytes !== 0) throw err;
      return inflateStream(sent, 'raw', meter);
    });
  } catch (err) {
    if (err instanceof InvalidInputError) throw err;
    // Whatever zlib refuses came from the client's bytes: a 400, never a 5xx.
    throw new InvalidInputError('malformed_body', `request body could not be decompressed as ${name}: ${errorMessage(err)}`, {
      cause: err,
    });
  }
}

interface Meter {
  limitBytes: number;
  tooLarge: () => InvalidInputError;
  budget: BodyByteBudget | undefined;
  c: Context;
}

/** A zlib error, with how many bytes had come out before it. */
type Inflated = Error & { producedBytes?: number };

/**
 * Inflates `sent` chunk by chunk, charging each chunk's bytes beyond what was paid to the budget
 * before taking the next; leaving the loop (a bound crossed, a zlib error) destroys the stream.
 */
async function inflateStream(sent: Buffer, format: Format, { limitBytes, tooLarge, budget, c }: Meter): Promise<Buffer> {
  const inflater = format === 'gzip' ? zlib.createGunzip() : format === 'zlib' ? zlib.createInflate() : zlib.createInflateRaw();
  inflater.end(sent);
  const chunks: Buffer[] = [];
  let produced = 0;
  let paid = budget?.paid ?? 0;
  try {
    for await (const chunk of inflater as AsyncIterable<Buffer>) {
      produced += chunk.length;
      if (produced > limitBytes) throw tooLarge();
      if (budget && produced > paid) {
        const refusal = await budget.take(produced - paid);
        if (refusal) throw rateLimited(c, refusal);
        paid = produced;
      }
      chunks.push(chunk);
    }
  } catch (err) {
    if (err instanceof Error && !(err instanceof InvalidInputError)) Object.assign(err, { producedBytes: produced });
    throw err;
  }
  return Buffer.concat(chunks, produced);
}

/**
 * The 429 for a budget refused mid-inflation. The body as sent has been read whole, so the
 * connection stays usable (the error handler adds `Connection: close` only for an unread body).
 */
function rateLimited(c: Context, refusal: Parameters<typeof refusalAnswer>[0]): InvalidInputError {
  const { seconds, message } = refusalAnswer(refusal);
  c.header('Retry-After', String(seconds));
  return new InvalidInputError('rate_limited', message, { status: 429 });
}

/** Statuses whose responses have no body to compress (204, 304) or a partial one (206). */
const NO_COMPRESS_STATUS = new Set([204, 206, 304]);
const NO_TRANSFORM = /(?:^|,)\s*no-transform\s*(?:,|$)/i;
const VARY_ACCEPT_ENCODING = /(?:^|,)\s*(?:accept-encoding|\*)\s*(?:,|$)/i;

/**
 * Compresses a response as gzip or deflate (zlib format) when the request's Accept-Encoding
 * allows one and the body is at least `threshold` bytes (default 1024). Any content type, as
 * Triton compresses JSON and binary tensor bodies alike.
 */
export function compressResponses(options: { threshold?: number } = {}): MiddlewareHandler {
  const threshold = options.threshold ?? 1024;
  return async function compressResponses(c, next) {
    const accepted = c.req.header('accept-encoding');
    const coding = accepted === undefined || c.req.method === 'HEAD' ? undefined : responseCoding(accepted);
    if (coding === undefined) return next();
    await next();
    if (!compressible(c.res, threshold)) return;
    const res = c.res;
    if (res.body === null) return;
    const body = Buffer.from(await res.arrayBuffer());
    const headers = new Headers(res.headers);
    const init = { status: res.status, statusText: res.statusText, headers };
    // The body has been read either way: the response is rebuilt around the bytes. Clearing
    // `c.res` first stops hono's setter from re-reading the new body and copying the old headers
    // (Content-Length among them) over the new ones.
    c.res = undefined;
    if (body.length < threshold) {
      c.res = new Response(body, init);
      return;
    }
    const compressed = coding === 'gzip' ? await gzip(body) : await deflate(body);
    headers.set('content-encoding', coding);
    headers.set('content-length', String(compressed.length));
    addVary(headers);
    const etag = headers.get('etag');
    if (etag !== null && !etag.startsWith('W/')) headers.set('etag', `W/${etag}`);
    c.res = new Response(compressed, init);
  };
}

/** Whether a finished response may be compressed, judged by its status and headers alone. */
function compressible(res: Response, threshold: number): boolean {
  if (NO_COMPRESS_STATUS.has(res.status)) return false;
  const headers = res.headers;
  if (headers.has('content-encoding')) return false;
  if ((headers.get('content-type') ?? '').toLowerCase().startsWith('text/event-stream')) return false;
  if (NO_TRANSFORM.test(headers.get('cache-control') ?? '')) return false;
  const length = headers.get('content-length');
  return length === null || Number(length) >= threshold;
}

function addVary(headers: Headers): void {
  const vary = headers.get('vary');
  if (vary === null || vary.trim() === '') headers.set('vary', 'Accept-Encoding');
  else if (!VARY_ACCEPT_ENCODING.test(vary)) headers.set('vary', `${vary}, Accept-Encoding`);
}

/**
 * The coding to answer with for an Accept-Encoding header: gzip or deflate, whichever has the
 * higher q-value (an explicit entry over `*`; `x-gzip` counts as gzip), gzip on a tie; undefined
 * (identity) when neither is acceptable.
 */
export function responseCoding(accepted: string): Coding | undefined {
  const q = acceptWeights(accepted, (name) => (name === 'x-gzip' ? 'gzip' : name));
  const wildcard = q.get('*') ?? 0;
  const gzipQ = q.get('gzip') ?? wildcard;
  const deflateQ = q.get('deflate') ?? wildcard;
  if (gzipQ <= 0 && deflateQ <= 0) return undefined;
  return gzipQ >= deflateQ ? 'gzip' : 'deflate';
}
