/**
 * Workers reading their own byte ranges of text inputs (issue 18), against the real S3-protocol
 * server from global setup: ObjectStore.getRange, then readOwnedLines and sampleLines through
 * S3ObjectStore, every chunk size of small objects, with lines straddling every boundary.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import { lazyObjectStore } from '../infra/registry/lazy-object-store.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import {
  type ByteRange,
  DEFAULT_BLOCK_BYTES,
  type OwnedLine,
  planTextChunks,
  readOwnedLines,
  sampleLines,
} from '../infra/tabular/line-range.ts';
import { testServices, uniqueId } from './support/services.ts';

let store: ReturnType<typeof createS3ObjectStore>;
const prefix = uniqueId('line-range');

beforeAll(() => {
  const { s3 } = testServices();
  store = createS3ObjectStore({
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
});

afterAll(async () => {
  for (const o of await store.list(`${prefix}/`)) await store.delete(o.key);
  store.close();
});

let objects = 0;
async function putObject(text: string | Buffer): Promise<{ key: string; size: number }> {
  const key = `${prefix}/${objects++}.jsonl`;
  const bytes = Buffer.from(text);
  await store.put(key, bytes);
  return { key, size: bytes.length };
}

async function text(stream: NodeJS.ReadableStream | null): Promise<string | null> {
  if (stream === null) return null;
  const parts: Buffer[] = [];
  for await (const buf of stream) parts.push(Buffer.from(buf));
  return Buffer.concat(parts).toString();
}

/** Every line of the object as the rule defines it, from the decoded string (not the reader's byte logic). */
function expectedLines(whole: string): Array<{ text: string; byte: number }> {
  const pieces = whole.split('\n');
  if (pieces[pieces.length - 1] === '') pieces.pop();
  let byte = 0;
  return pieces.map((piece, i) => {
    const line = { text: (i === 0 ? piece.replace(/^\uFEFF/, '') : piece).replace(/\r$/, ''), byte };
    byte += Buffer.byteLength(piece) + 1;
    return line;
  });
}

/** A chunk's batches, flattened, and the generator's return value. */
async function readChunk(
  reader: Pick<ObjectStore, 'getRange'>,
  key: string,
  range: ByteRange,
  size: number,
  options?: { blockBytes?: number; maxLineBytes?: number },
): Promise<{ lines: OwnedLine[]; owned: number; batches: number }> {
  const lines: OwnedLine[] = [];
  let batches = 0;
  const reading = readOwnedLines(reader, key, range, size, options);
  for (;;) {
    const next = await reading.next();
    if (next.done) return { lines, owned: next.value, batches };
    expect(next.value.length).toBeGreaterThan(0);
    batches++;
    lines.push(...next.value);
  }
}

describe('ObjectStore.getRange', () => {
  it('reads [start, end), what exists of a range past the end, nothing at or past the end, null for no key', async () => {
    const { key } = await putObject('0123456789');
    expect(await text(await store.getRange(key, 0, 10))).toBe('0123456789');
    expect(await text(await store.getRange(key, 3, 7))).toBe('3456');
    expect(await text(await store.getRange(key, 9, 10))).toBe('9');
    expect(await text(await store.getRange(key, 8, 100))).toBe('89');
    expect(await text(await store.getRange(key, 10, 20))).toBe('');
    expect(await text(await store.getRange(key, 50, 60))).toBe('');
    expect(await text(await store.getRange(key, 4, 4))).toBe('');
    expect(await store.getRange(`${prefix}/missing`, 0, 10)).toBeNull();
    expect(await store.getRange(`${prefix}/missing`, 4, 4)).toBeNull();
    await expect(store.getRange(key, -1, 4)).rejects.toThrow(RangeError);
  });

  it('reads nothing of an empty object', async () => {
    const { key } = await putObject('');
    expect(await text(await store.getRange(key, 0, 10))).toBe('');
  });

  it('passes through the lazily made store', async () => {
    const { key } = await putObject('abcdef');
    const lazy = lazyObjectStore(async () => store);
    expect(await text(await lazy.getRange(key, 2, 5))).toBe('cde');
    lazy.close();
  });
});

const OBJECTS: Record<string, string> = {
  'JSONL with blank lines, CRLF and a last line without newline': '{"id":1}\n{"id":22}\r\n\n{"id":"é"}\r\n{"id":4}',
  'CSV with a BOM, CRLF and multi-byte characters across boundaries': '\uFEFFid,x\r\n1,é𝄞\r\n2,𝄞é\r\n\r\n3,ü\r\n',
  'only a newline': '\n',
  'one line without newline': '{"id":1}',
  empty: '',
};

describe('readOwnedLines over S3', () => {
  for (const [name, whole] of Object.entries(OBJECTS)) {
    it(`shares out every line exactly once for every chunk size: ${name}`, async () => {
      const { key, size } = await putObject(whole);
      const expected = expectedLines(whole);
      for (const blockBytes of [1, DEFAULT_BLOCK_BYTES]) {
        for (let chunkBytes = 1; chunkBytes <= Math.max(1, size); chunkBytes++) {
          const union: Array<{ text: string; byte: number }> = [];
          for (const range of planTextChunks(size, chunkBytes)) {
            const { lines, owned } = await readChunk(store, key, range, size, { blockBytes });
            expect(owned).toBe(lines.length);
            expect(lines.map((l) => l.line)).toEqual(lines.map((_, i) => i + 1));
            union.push(...lines.map(({ text, byte }) => ({ text, byte })));
          }
          expect(union, `chunkBytes ${chunkBytes}, blockBytes ${blockBytes}`).toEqual(expected);
        }
      }
    });
  }

  it('reads its range and one block past it, then on in blocks only as far as its last line', async () => {
    const lines = Array.from({ length: 200 }, (_, i) => JSON.stringify({ id: i, pad: 'p'.repeat(i % 13) }));
    lines[120] = JSON.stringify({ id: 120, long: 'L'.repeat(300) });
    const whole = `${lines.join('\n')}\n`;
    const { key, size } = await putObject(whole);
    const requests: ByteRange[] = [];
    const recording = {
      getRange: (k: string, start: number, end: number) => {
        requests.push({ start, end });
        return store.getRange(k, start, end);
      },
    };
    // A range whose last owned line is the long one: it starts just before `end` and runs 300 bytes past.
    const longAt = whole.indexOf('{"id":120,');
    const range = { start: 1000, end: longAt + 5 };
    const blockBytes = 32;
    const { lines: owned } = await readChunk(recording, key, range, size, { blockBytes });
    const expected = expectedLines(whole).filter((l) => l.byte >= range.start && l.byte < range.end);
    expect(owned.map(({ text, byte }) => ({ text, byte }))).toEqual(expected);
    expect(owned[owned.length - 1]?.byte).toBe(longAt);

    const longEnd = whole.indexOf('\n', longAt) + 1;
    expect(requests[0]).toEqual({ start: range.start - 1, end: range.end + blockBytes });
    for (let i = 1; i < requests.length; i++) {
      expect(requests[i]).toEqual({ start: requests[i - 1]?.end, end: (requests[i - 1]?.end ?? 0) + blockBytes });
    }
    // The last read is the one that holds the long line's '\n'.
    expect(requests[requests.length - 1]?.end).toBeGreaterThanOrEqual(longEnd);
    expect(requests[requests.length - 1]?.end).toBeLessThan(longEnd + blockBytes);
  });

  it('yields lines in batches, one per buffer read, not one per line', async () => {
    const whole = Array.from({ length: 5000 }, (_, i) => `{"id":${i}}\n`).join('');
    const { key, size } = await putObject(whole);
    const { lines, batches } = await readChunk(store, key, { start: 0, end: size }, size);
    expect(lines.length).toBe(5000);
    expect(batches).toBeLessThan(lines.length / 10);
  });

  it('reports a line longer than maxLineBytes as tooLong and goes on with the next', async () => {
    const whole = `{"id":1}\n${'x'.repeat(200_000)}\r\n{"id":3}\n`;
    const { key, size } = await putObject(whole);
    const { lines } = await readChunk(store, key, { start: 0, end: 20 }, size, { maxLineBytes: 64 * 1024, blockBytes: 16 * 1024 });
    expect(lines).toEqual([
      { text: '{"id":1}', byte: 0, line: 1 },
      { text: '', byte: 9, line: 2, tooLong: true },
    ]);
    const rest = await readChunk(store, key, { start: 20, end: size }, size);
    expect(rest.lines).toEqual([{ text: '{"id":3}', byte: 200_011, line: 1 }]);
  });

  it('refuses an object that is gone or shorter than listed: input_changed', async () => {
    const { key, size } = await putObject('{"id":1}\n{"id":2}\n');
    const gone = readChunk(store, `${prefix}/gone.jsonl`, { start: 0, end: 10 }, 20);
    await expect(gone).rejects.toBeInstanceOf(InvalidInputError);
    await expect(gone).rejects.toMatchObject({ code: 'input_changed', status: 409 });
    const shorter = readChunk(store, key, { start: 10, end: size + 10 }, size + 10, { blockBytes: 4 });
    await expect(shorter).rejects.toMatchObject({ code: 'input_changed', message: expect.stringContaining('shorter') });
  });
});

describe('sampleLines over S3', () => {
  it("reads a CSV header without its BOM or '\\r' and the mean bytes per line from the object's head", async () => {
    const rows = Array.from({ length: 100 }, (_, i) => `${String(i).padStart(3, '0')},0.5\r\n`).join('');
    const { key, size } = await putObject(`\uFEFFid,x\r\n${rows}`);
    // A sample of the header (3 + 6 bytes) and 10 rows (9 bytes each), cut inside the 11th.
    expect(await sampleLines(store, key, size, 9 + 10 * 9 + 4)).toEqual({ firstLine: 'id,x', bytesPerLine: (9 + 10 * 9) / 11 });
    expect(await sampleLines(store, key, size)).toEqual({ firstLine: 'id,x', bytesPerLine: size / 101 });
  });

  it('counts a last line without newline when the sample is the whole object, not when cut', async () => {
    const { key, size } = await putObject('ab\ncdef');
    expect(await sampleLines(store, key, size)).toEqual({ firstLine: 'ab', bytesPerLine: 7 / 2 });
    expect(await sampleLines(store, key, size, 6)).toEqual({ firstLine: 'ab', bytesPerLine: 3 });
  });

  it('knows no first line that does not end in the sample, and nothing of an empty object', async () => {
    const { key, size } = await putObject(`${'x'.repeat(100)}\n`);
    expect(await sampleLines(store, key, size, 50)).toEqual({ firstLine: undefined, bytesPerLine: undefined });
    const one = await putObject('{"id":1}');
    expect(await sampleLines(store, one.key, one.size)).toEqual({ firstLine: '{"id":1}', bytesPerLine: 8 });
    const empty = await putObject('');
    expect(await sampleLines(store, empty.key, 0)).toEqual({ firstLine: undefined, bytesPerLine: undefined });
  });
});
