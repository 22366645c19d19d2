/**
 * A text chunk's lines, read by the worker that scores them (issue 18): ranged GETs of one input
 * object, never the whole object, and nothing through the driver.
 *
 * The rule (BulkChunkSource, infra/contracts/bulk.ts): a chunk [start, end) owns every line whose
 * first byte lies in it. Chunks planned by byte counts alone so share out an object's lines, each
 * exactly once, with no line boundary known in advance:
 * - a chunk with start > 0 reads from start - 1 and skips through the first '\n' (a '\n' at
 *   start - 1 means a line starts at start); the partial line before it is the previous chunk's;
 * - its last line may end past `end`: it reads on, in blocks, to that line's '\n' or the object's end.
 *
 * Lines split on the byte 0x0A in Buffers and each whole line is decoded as UTF-8, so a character
 * cut by a read boundary decodes right. A '\r' ending a line (CRLF) and a BOM at byte 0 are not
 * text. A final '\n' ends the last line rather than starting an empty one; a blank line is a line.
 * Memory: one read's buffer plus the line in hand; a line longer than maxLineBytes is dropped as
 * it arrives and reported `tooLong`, so one absurd line cannot take a worker down.
 *
 * Also here, for the driver: `planTextChunks` (the byte ranges) and `sampleLines` (a CSV header
 * and bytes per line from one read of the object's head, to size chunks of about chunkRows rows).
 */
import { InvalidInputError } from '../kernel/errors.ts';
import { ObjectChangedError, type ObjectStore } from '../registry/object-store.ts';

/** One line a chunk owns. */
export interface OwnedLine {
  /** Without its '\n' or '\r\n' (and without a BOM at byte 0); '' when `tooLong`. */
  text: string;
  /** The line's first byte in the object. */
  byte: number;
  /** 1-based within the chunk, blank lines counted. */
  line: number;
  /** Longer than maxLineBytes: its text was not kept. */
  tooLong?: true;
}

export interface ByteRange {
  start: number;
  end: number;
}

/** What these readers need of an object store. */
export type RangeReader = Pick<ObjectStore, 'getRange'>;

export interface ReadOwnedLinesOptions {
  /** The object's etag as listed: every read is pinned to it (`input_changed` when it is another version now). */
  etag?: string;
  /** Bytes per read past the chunk's end (default 64 KiB); the first read takes one such block past `end`. */
  blockBytes?: number;
  /** Bytes before a line's '\n' above which the line is reported `tooLong` (default 16 MiB). */
  maxLineBytes?: number;
}

export interface LineSample {
  /** The object's first line (BOM and '\r' stripped); undefined when it does not end within the sample. */
  firstLine: string | undefined;
  /** Mean bytes per complete line in the sample (terminators included); undefined when none is complete. */
  bytesPerLine: number | undefined;
}

export const DEFAULT_SAMPLE_BYTES = 256 * 1024;
export const DEFAULT_BLOCK_BYTES = 64 * 1024;
export const DEFAULT_MAX_LINE_BYTES = 16 * 1024 * 1024;

const LF = 0x0a;
const CR = 0x0d;

/** Contiguous ranges of `chunkBytes` (the last one shorter) covering [0, sizeBytes); none for an empty object. */
export function planTextChunks(sizeBytes: number, chunkBytes: number): ByteRange[] {
  checkCount('sizeBytes', sizeBytes, 0);
  checkCount('chunkBytes', chunkBytes, 1);
  const chunks: ByteRange[] = [];
  for (let start = 0; start < sizeBytes; start += chunkBytes) chunks.push({ start, end: Math.min(sizeBytes, start + chunkBytes) });
  return chunks;
}

/**
 * One ranged GET of the object's first `sampleBytes`: its first line (a CSV header, perhaps) and
 * the mean bytes per line there. A sample that is the whole object counts a last line without '\n'.
 */
export async function sampleLines(
  store: RangeReader,
  key: string,
  sizeBytes: number,
  sampleBytes = DEFAULT_SAMPLE_BYTES,
  etag?: string,
): Promise<LineSample> {
  checkCount('sampleBytes', sampleBytes, 1);
  const length = Math.min(sizeBytes, sampleBytes);
  if (length <= 0) return { firstLine: undefined, bytesPerLine: undefined };
  const head = await readAll(store, key, length, etag);
  const whole = length === sizeBytes;
  const firstEnd = head.indexOf(LF);
  const firstLine = firstEnd >= 0 || whole ? decodeLine(head, 0, firstEnd >= 0 ? firstEnd : head.length, true) : undefined;
  let lines = 0;
  let bytes = 0;
  for (let nl = firstEnd; nl >= 0; nl = head.indexOf(LF, nl + 1)) {
    lines++;
    bytes = nl + 1;
  }
  if (whole && bytes < head.length) {
    lines++;
    bytes = head.length;
  }
  return { firstLine, bytesPerLine: lines > 0 ? bytes / lines : undefined };
}

/**
 * The lines `range` owns in the object `key` of `sizeBytes` bytes, in order, in batches (one per
 * buffer read). The generator's return value is how many lines the chunk owned, which is also
 * the last yielded line's `line` (0 when it owned none).
 *
 * Throws InvalidInputError `input_changed` (409) when the object is gone or shorter than
 * `sizeBytes`: it changed since it was listed, and a retry would read the same.
 */
export async function* readOwnedLines(
  store: RangeReader,
  key: string,
  range: ByteRange,
  sizeBytes: number,
  options: ReadOwnedLinesOptions = {},
): AsyncGenerator<OwnedLine[], number> {
  const blockBytes = options.blockBytes ?? DEFAULT_BLOCK_BYTES;
  checkCount('blockBytes', blockBytes, 1);
  const splitter = new OwnedLineSplitter(range, sizeBytes, options.maxLineBytes);
  // The first read runs one block past `end`, where the last line nearly always ends.
  let readEnd = range.end;
  while (!splitter.done && splitter.position < sizeBytes) {
    const from = splitter.position;
    const to = Math.min(sizeBytes, Math.max(readEnd, from) + blockBytes);
    const stream = await pinnedRange(store, key, from, to, options.etag);
    if (stream === null) throw inputChanged(key, 'it no longer exists');
    for await (const buf of stream as AsyncIterable<Buffer>) {
      // Past the last owned line, the rest of the read (under a block) is drained, not cut, so its connection is reused.
      if (splitter.done) continue;
      const lines = splitter.push(buf);
      if (lines.length > 0) yield lines;
    }
    if (!splitter.done && splitter.position < to) throw inputChanged(key, `it is shorter than the ${sizeBytes} bytes listed`);
    readEnd = to;
  }
  const last = splitter.finish();
  if (last.length > 0) yield last;
  return splitter.lines;
}

/**
 * The lines a chunk owns, from the object's bytes pushed in order from `position` (start - 1, or
 * 0): no I/O, so readOwnedLines feeds it ranged GETs and tests feed it every possible split.
 * `finish()` once the object's end was pushed yields a last line without '\n'.
 */
export class OwnedLineSplitter {
  /** The object byte the next push starts at. */
  position: number;
  /** Lines yielded so far. */
  lines = 0;
  private readonly end: number;
  private readonly maxLineBytes: number;
  /** Still looking for the '\n' before the first owned line (start > 0). */
  private seeking: boolean;
  private lineStart: number;
  /** The current line's bytes so far; dropped (and `tooLong` set) past maxLineBytes. */
  private pieces: Buffer[] = [];
  private lineBytes = 0;
  private tooLong = false;
  private finished: boolean;

  constructor(
    range: ByteRange,
    private readonly sizeBytes: number,
    maxLineBytes = DEFAULT_MAX_LINE_BYTES,
  ) {
    checkCount('sizeBytes', sizeBytes, 0);
    checkCount('range.start', range.start, 0);
    checkCount('range.end', range.end, range.start);
    checkCount('maxLineBytes', maxLineBytes, 0);
    this.maxLineBytes = maxLineBytes;
    this.end = Math.min(range.end, sizeBytes);
    this.seeking = range.start > 0;
    this.position = this.seeking ? range.start - 1 : 0;
    this.lineStart = range.start;
    this.finished = range.start >= this.end;
  }

  /** Every owned line was yielded: nothing more to read. */
  get done(): boolean {
    return this.finished;
  }

  /** Bytes of the current line held in memory. */
  get heldBytes(): number {
    return this.tooLong ? 0 : this.lineBytes;
  }

  /** The lines `buf` completes; `buf` holds the object's bytes from `position` on. */
  push(buf: Buffer): OwnedLine[] {
    const out: OwnedLine[] = [];
    let i = this.seeking && !this.finished ? this.seek(buf) : 0;
    while (!this.finished && i < buf.length) {
      const nl = buf.indexOf(LF, i);
      if (nl < 0) {
        this.hold(buf, i);
        break;
      }
      out.push(this.complete(buf, i, nl));
      this.startAt(this.position + nl + 1);
      i = nl + 1;
    }
    this.position += buf.length;
    return out;
  }

  /** After the object's last byte: the last owned line when it has no '\n'. */
  finish(): OwnedLine[] {
    if (this.finished) return [];
    if (this.position < this.sizeBytes) throw new Error(`finish() at byte ${this.position} of ${this.sizeBytes}`);
    this.finished = true;
    return this.seeking ? [] : [this.complete(Buffer.alloc(0), 0, 0)];
  }

  /** Skips through the first '\n'; returns the index after it (or buf.length when there is none). */
  private seek(buf: Buffer): number {
    const nl = buf.indexOf(LF);
    if (nl < 0) {
      // No '\n' in [start - 1, end - 1]: no line starts inside the range.
      if (this.position + buf.length >= this.end) this.finished = true;
      return buf.length;
    }
    this.seeking = false;
    this.startAt(this.position + nl + 1);
    return nl + 1;
  }

  private startAt(byte: number): void {
    this.lineStart = byte;
    if (byte >= this.end) this.finished = true;
  }

  /** Keeps buf[from..] as part of the current line, unless the line is already too long. */
  private hold(buf: Buffer, from: number): void {
    this.lineBytes += buf.length - from;
    if (this.tooLong) return;
    if (this.lineBytes > this.maxLineBytes) {
      this.tooLong = true;
      this.pieces = [];
      return;
    }
    // A copy of a buffer's tail, so the line does not keep the whole read alive.
    this.pieces.push(from > 0 ? Buffer.from(buf.subarray(from)) : buf);
  }

  /** The current line, ending with buf[from, to) (to: its '\n', or the object's end). */
  private complete(buf: Buffer, from: number, to: number): OwnedLine {
    const byte = this.lineStart;
    const line = ++this.lines;
    const tooLong = this.tooLong || this.lineBytes + (to - from) > this.maxLineBytes;
    let owned: OwnedLine;
    if (tooLong) owned = { text: '', byte, line, tooLong: true };
    else if (this.pieces.length === 0) owned = { text: decodeLine(buf, from, to, byte === 0), byte, line };
    else {
      const whole = Buffer.concat([...this.pieces, buf.subarray(from, to)]);
      owned = { text: decodeLine(whole, 0, whole.length, byte === 0), byte, line };
    }
    this.pieces = [];
    this.lineBytes = 0;
    this.tooLong = false;
    return owned;
  }
}

/** bytes[from, to) as UTF-8 without a final '\r', and without a BOM when the line starts the object. */
function decodeLine(bytes: Buffer, from: number, to: number, objectStart: boolean): string {
  let end = to;
  if (end > from && bytes[end - 1] === CR) end--;
  let start = from;
  if (objectStart && end - start >= 3 && bytes[start] === 0xef && bytes[start + 1] === 0xbb && bytes[start + 2] === 0xbf) start += 3;
  return bytes.toString('utf8', start, end);
}

/** The object's bytes [0, length): a bounded sample, read whole. */
async function readAll(store: RangeReader, key: string, length: number, etag: string | undefined): Promise<Buffer> {
  const stream = await pinnedRange(store, key, 0, length, etag);
  if (stream === null) throw inputChanged(key, 'it no longer exists');
  const parts: Buffer[] = [];
  for await (const buf of stream as AsyncIterable<Buffer>) parts.push(buf);
  const bytes = Buffer.concat(parts);
  if (bytes.length < length) throw inputChanged(key, `it is shorter than the ${length} bytes listed`);
  return bytes;
}

/** A ranged GET pinned to `etag` when there is one: another version of the object is `input_changed`. */
async function pinnedRange(store: RangeReader, key: string, from: number, to: number, etag: string | undefined) {
  try {
    return await store.getRange(key, from, to, etag !== undefined ? { ifMatch: etag } : undefined);
  } catch (err) {
    if (err instanceof ObjectChangedError) throw inputChanged(key, `it is no longer the version listed (etag ${etag})`);
    throw err;
  }
}

function inputChanged(key: string, detail: string): InvalidInputError {
  return new InvalidInputError('input_changed', `input object ${key} changed while the run read it: ${detail}`, { status: 409 });
}

function checkCount(name: string, value: number, least: number): void {
  if (!Number.isSafeInteger(value) || value < least) throw new RangeError(`${name} must be an integer ≥ ${least}, got ${value}`);
}
