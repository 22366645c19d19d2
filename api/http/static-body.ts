/**
 * A response that depends only on the code (the OpenAPI document, the docs page): rendered once,
 * on its first request, and from then on answered from bytes held in memory. Serialising the
 * 126 KB document per request, and compressing it per request in compressResponses, let 62
 * unauthenticated requests a second slow another tenant's sync calls to seconds (issue 33, row 10).
 *
 * Each coding (identity, gzip, deflate) is made once, the first time a client accepts it, and
 * chosen as compressResponses would choose it (`responseCoding`): an answer that carries
 * Content-Encoding is never compressed again there, and an identity answer goes to a client that
 * accepts neither, which compressResponses leaves alone. Each coding has its own strong ETag; a
 * matching If-None-Match (weak comparison, RFC 9110 §13.1.2) is a 304 with no body.
 * `Cache-Control: no-cache` has clients revalidate, so a new deploy's document is seen at once.
 */
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { Context } from 'hono';
import { responseCoding } from './content-encoding.ts';

const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

type Coding = 'gzip' | 'deflate';

export interface StaticContent {
  body: string | Buffer;
  /** Content-Type and any other header every answer carries (Content-Security-Policy …). */
  headers: Record<string, string>;
}

interface Variant {
  bytes: Uint8Array;
  etag: string;
}

/** A handler that answers with `render()`'s content, rendered on the first request and never again. */
export function staticBody(render: () => StaticContent): (c: Context) => Promise<Response> {
  let held: { headers: Record<string, string>; identity: Variant; coded: Map<Coding, Promise<Variant>> } | undefined;

  function content() {
    if (held) return held;
    const { body, headers } = render();
    const bytes = typeof body === 'string' ? Buffer.from(body) : body;
    const tag = createHash('sha256').update(bytes).digest('base64url').slice(0, 27);
    held = { headers, identity: { bytes, etag: `"${tag}"` }, coded: new Map() };
    return held;
  }

  function coded(coding: Coding): Promise<Variant> {
    const { identity, coded } = content();
    let variant = coded.get(coding);
    if (!variant) {
      const tag = identity.etag.slice(0, -1);
      variant = (coding === 'gzip' ? gzip(identity.bytes) : deflate(identity.bytes)).then((bytes) => ({
        bytes,
        etag: `${tag}-${coding}"`,
      }));
      coded.set(coding, variant);
    }
    return variant;
  }

  return async (c) => {
    const { headers, identity } = content();
    const accepted = c.req.header('accept-encoding');
    const coding = accepted === undefined ? undefined : responseCoding(accepted);
    const variant = coding === undefined ? identity : await coded(coding);
    const common = { ...headers, ETag: variant.etag, Vary: 'Accept-Encoding', 'Cache-Control': 'no-cache' };
    if (matches(c.req.header('if-none-match'), variant.etag)) return c.body(null, 304, common);
    const length = { 'Content-Length': String(variant.bytes.byteLength) };
    return c.body(
      variant.bytes as Uint8Array<ArrayBuffer>,
      200,
      coding ? { ...common, ...length, 'Content-Encoding': coding } : { ...common, ...length },
    );
  };
}

/** If-None-Match names this ETag (W/ or not) or is `*`. */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const trimmed = tag.trim();
    return trimmed === '*' || (trimmed.startsWith('W/') ? trimmed.slice(2) : trimmed) === etag;
  });
}
