/**
 * Parquet's codecs with every page's output bounded by the size its header declares
 * (`uncompressed_page_size`), issue 33: a page that inflates past it throws PageInflationError
 * having allocated no more than that size, so a 1.7 KB page that inflates to 1 GiB costs the
 * worker the few KB it declared, not a gigabyte. Whether the declared size itself is sane is
 * parquet-bounds.ts's check, made before a codec is called.
 *
 *   GZIP    node:zlib gunzip with maxOutputLength = the declared size (native; stops there)
 *   BROTLI  node:zlib brotliDecompress with maxOutputLength = the declared size
 *   ZSTD    fzstd into a buffer of the declared size; a frame whose header declares another
 *           content size is refused before a byte is decoded (fzstd would size its own buffer from it)
 *   SNAPPY  the stream's own length preamble must be the declared size before a byte is decoded;
 *           pages up to WASM_SNAPPY_MAX_BYTES through hysnappy's WebAssembly, larger ones through
 *           hyparquet's JS decoder into a buffer of the declared size (WebAssembly memory grows to
 *           the largest page it saw and never shrinks)
 *   LZ4, LZ4_RAW  hyparquet-compressors' decoders, which write into a buffer of the declared size
 *
 * hyparquet checks afterwards that a page decoded to exactly its declared size; a short page
 * is its error, a long one ours.
 */
import * as zlib from 'node:zlib';
import type { Compressors } from 'hyparquet';
import { snappyUncompress } from 'hyparquet/src/snappy.js';
import { decompressZstd, compressors as pureCompressors } from 'hyparquet-compressors';

/** A page whose bytes decode to more than its header declares (or whose codec's own header says so). */
export class PageInflationError extends Error {
  override readonly name = 'PageInflationError';
}

/** Snappy pages up to this go through WebAssembly (about 2× faster); its memory stays this small. */
const WASM_SNAPPY_MAX_BYTES = 8 * 1024 * 1024;

type Decompress = (input: Uint8Array, outputLength: number) => Uint8Array;

/** Decompressors whose output never passes the declared size (see the header). */
export const BOUNDED_DECOMPRESSORS: Compressors = {
  GZIP: zlibBounded('GZIP', zlib.gunzipSync),
  BROTLI: zlibBounded('BROTLI', zlib.brotliDecompressSync),
  ZSTD: nativeZstd() ?? zstdBounded,
  SNAPPY: snappyBounded(pureCompressors.SNAPPY as Decompress),
  LZ4: pureCompressors.LZ4 as Decompress,
  LZ4_RAW: pureCompressors.LZ4_RAW as Decompress,
};

/** Node's own zstd (22.15 and later) where it has one: native, with the same maxOutputLength bound. */
function nativeZstd(): Decompress | undefined {
  const z = zlib as unknown as { zstdDecompressSync?: (input: Uint8Array, options: zlib.ZlibOptions) => Buffer };
  return z.zstdDecompressSync ? zlibBounded('ZSTD', z.zstdDecompressSync) : undefined;
}

function inflated(codec: string, declared: number, detail = ''): PageInflationError {
  return new PageInflationError(
    `a ${codec} page inflates past the ${declared} bytes its header declares${detail}; the file is corrupt or hostile`,
  );
}

function zlibBounded(codec: string, decompress: (input: Uint8Array, options: zlib.ZlibOptions) => Buffer): Decompress {
  return (input, outputLength) => {
    try {
      // maxOutputLength must be ≥ 1; a page declaring 0 bytes that inflates to 1 is still refused below.
      const out = decompress(input, { maxOutputLength: Math.max(1, outputLength) });
      if (out.byteLength > outputLength) throw inflated(codec, outputLength);
      return out;
    } catch (err) {
      if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw inflated(codec, outputLength);
      throw err;
    }
  };
}

/** ZSTD: every frame's declared content size must fit what is left of the page; then fzstd writes into the page's buffer. */
function zstdBounded(input: Uint8Array, outputLength: number): Uint8Array {
  const declared = zstdContentSizes(input);
  if (declared > outputLength) throw inflated('ZSTD', outputLength, ` (its frames declare ${declared})`);
  const out = new Uint8Array(outputLength);
  const written = decompressZstd(input, out);
  // fzstd given a buffer decodes into it and stops at its end: a frame without a declared size that ran on is cut there.
  if (written.byteLength > outputLength) throw inflated('ZSTD', outputLength);
  return written;
}

/**
 * The content sizes ZSTD frames declare, summed (frames that declare none count 0: they decode
 * into the bounded buffer). Skippable frames are stepped over; anything else ends the walk
 * (fzstd reports it).
 */
export function zstdContentSizes(input: Uint8Array): number {
  let total = 0;
  let at = 0;
  while (at + 8 <= input.length) {
    const magic =
      (input[at] as number) | ((input[at + 1] as number) << 8) | ((input[at + 2] as number) << 16) | ((input[at + 3] as number) << 24);
    if (magic >>> 4 === 0x184d2a5) {
      const size = new DataView(input.buffer, input.byteOffset + at + 4, 4).getUint32(0, true);
      at += 8 + size;
      continue;
    }
    if (magic >>> 0 !== 0xfd2fb528) break;
    const flags = input[at + 4] as number;
    const singleSegment = (flags >> 5) & 1;
    const dictBytes = [0, 1, 2, 4][flags & 3] as number;
    const fcsFlag = flags >> 6;
    const fcsBytes = fcsFlag === 0 ? singleSegment : 1 << fcsFlag;
    let size = 0;
    const from = at + 5 + (singleSegment ? 0 : 1) + dictBytes;
    for (let i = fcsBytes - 1; i >= 0; i--) size = size * 256 + (input[from + i] ?? 0);
    if (fcsBytes === 2) size += 256;
    total += size;
    // Only the first frame's header is read cheaply; a page is nearly always one frame, and
    // later frames decode into the bounded buffer anyway.
    break;
  }
  return total;
}

/** SNAPPY: the stream's varint preamble is its uncompressed length; it must be the declared size. */
function snappyBounded(wasm: Decompress): Decompress {
  return (input, outputLength) => {
    const length = snappyLength(input);
    if (length === undefined) throw new Error('invalid snappy length header');
    if (length > outputLength) throw inflated('SNAPPY', outputLength, ` (its stream declares ${length})`);
    if (length < outputLength) throw new Error(`a SNAPPY page's stream declares ${length} bytes, its header ${outputLength}`);
    if (outputLength <= WASM_SNAPPY_MAX_BYTES) return wasm(input, outputLength);
    const out = new Uint8Array(outputLength);
    snappyUncompress(input, out);
    return out;
  };
}

/** The unsigned varint (at most 5 bytes) a snappy stream starts with; undefined when malformed. */
export function snappyLength(input: Uint8Array): number | undefined {
  let value = 0;
  for (let i = 0; i < 5 && i < input.length; i++) {
    const b = input[i] as number;
    value += (b & 0x7f) * 2 ** (7 * i);
    if ((b & 0x80) === 0) return value;
  }
  return undefined;
}
