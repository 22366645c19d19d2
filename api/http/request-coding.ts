/**
 * Which coding a request body carries (`Content-Encoding`), and whether a deflate body has the
 * zlib wrapper: pure, so the regional API's zlib decoder (content-encoding.ts) and the edge
 * gateway's DecompressionStream (api/edge/) accept and refuse the same headers the same way.
 */
import { InvalidInputError } from '../../infra/kernel/errors.ts';

export type Coding = 'gzip' | 'deflate';

/** The one coding a request body carries (undefined for identity), or 415 for any other. */
export function requestCoding(header: string | undefined): { name: string; coding: Coding } | undefined {
  if (header === undefined) return undefined;
  const names = header
    .split(',')
    .map((name) => name.trim().toLowerCase())
    .filter((name) => name !== '' && name !== 'identity');
  const [name] = names;
  if (name === undefined) return undefined;
  if (names.length > 1) {
    throw new InvalidInputError(
      'unsupported_content_encoding',
      `Content-Encoding "${header.trim()}" lists more than one coding; only one is supported: send the body as gzip, deflate or identity`,
      { status: 415 },
    );
  }
  if (name === 'gzip' || name === 'x-gzip') return { name, coding: 'gzip' };
  if (name === 'deflate') return { name, coding: 'deflate' };
  throw new InvalidInputError(
    'unsupported_content_encoding',
    `Content-Encoding "${name}" is not supported; send the body as gzip, deflate or identity`,
    { status: 415 },
  );
}

/** A zlib stream's two header bytes (RFC 1950): method 8, window ≤ 32 KiB, check bits; raw deflate has none. */
export function zlibHeader(sent: Uint8Array): boolean {
  const [cmf = 0, flg = 0] = sent;
  return (cmf & 0x0f) === 8 && cmf >> 4 <= 7 && ((cmf << 8) | flg) % 31 === 0;
}
