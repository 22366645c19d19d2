/**
 * The byte-range line rule without I/O: chunks planned by bytes, and the splitter fed every
 * chunk size and every read size, checked against the whole object split as a string. The same
 * rule over real ranged GETs is test/bulk-line-range.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { type ByteRange, type OwnedLine, OwnedLineSplitter, planTextChunks } from './line-range.ts';

/** Every line of the object as the rule defines it, from the decoded string (not the splitter's byte logic). */
function expectedLines(text: string): Array<{ text: string; byte: number }> {
  const pieces = text.split('\n');
  if (pieces[pieces.length - 1] === '') pieces.pop();
  let byte = 0;
  return pieces.map((piece, i) => {
    const line = { text: (i === 0 ? piece.replace(/^\uFEFF/, '') : piece).replace(/\r$/, ''), byte };
    byte += Buffer.byteLength(piece) + 1;
    return line;
  });
}

/** Reads one chunk as readOwnedLines does, in reads of `readBytes`; returns its lines. */
function splitChunk(bytes: Buffer, range: ByteRange, readBytes: number, maxLineBytes?: number): OwnedLine[] {
  const splitter = new OwnedLineSplitter(range, bytes.length, maxLineBytes);
  const lines: OwnedLine[] = [];
  while (!splitter.done && splitter.position < bytes.length) {
    lines.push(...splitter.push(bytes.subarray(splitter.position, splitter.position + readBytes)));
  }
  lines.push(...splitter.finish());
  expect(splitter.lines).toBe(lines.length);
  return lines;
}

const OBJECTS: Record<string, string> = {
  'blank lines, CRLF, a last line without newline': 'a\nbb\n\nccc\r\nd',
  'BOM, CRLF and multi-byte characters': '\uFEFF{"id":1}\r\n{"id":"é"}\r\n𝄞x\n',
  'multi-byte characters across every boundary': 'é𝄞é\n𝄞\n\né',
  'only a newline': '\n',
  'two newlines': '\n\n',
  'one CRLF': '\r\n',
  'one character, no newline': 'x',
  empty: '',
};

describe('planTextChunks', () => {
  it('covers [0, size) with contiguous ranges of chunkBytes, the last one shorter', () => {
    expect(planTextChunks(10, 4)).toEqual([
      { start: 0, end: 4 },
      { start: 4, end: 8 },
      { start: 8, end: 10 },
    ]);
    expect(planTextChunks(8, 4)).toEqual([
      { start: 0, end: 4 },
      { start: 4, end: 8 },
    ]);
    expect(planTextChunks(3, 100)).toEqual([{ start: 0, end: 3 }]);
  });

  it('gives an empty object no chunks and refuses sizes that are not counts', () => {
    expect(planTextChunks(0, 4)).toEqual([]);
    expect(() => planTextChunks(10, 0)).toThrow(RangeError);
    expect(() => planTextChunks(-1, 4)).toThrow(RangeError);
    expect(() => planTextChunks(10, 1.5)).toThrow(RangeError);
  });
});

describe('OwnedLineSplitter', () => {
  for (const [name, text] of Object.entries(OBJECTS)) {
    it(`shares out every line exactly once, for every chunk size and read size: ${name}`, () => {
      const bytes = Buffer.from(text);
      const expected = expectedLines(text);
      for (let chunkBytes = 1; chunkBytes <= Math.max(1, bytes.length); chunkBytes++) {
        for (let readBytes = 1; readBytes <= Math.max(1, bytes.length); readBytes++) {
          const union: Array<{ text: string; byte: number }> = [];
          for (const range of planTextChunks(bytes.length, chunkBytes)) {
            const lines = splitChunk(bytes, range, readBytes);
            expect(lines.map((l) => l.line)).toEqual(lines.map((_, i) => i + 1));
            for (const l of lines) expect(l.byte >= range.start && l.byte < range.end).toBe(true);
            union.push(...lines.map(({ text, byte }) => ({ text, byte })));
          }
          expect(union, `chunkBytes ${chunkBytes}, readBytes ${readBytes}`).toEqual(expected);
        }
      }
    });
  }

  it('strips a BOM only at byte 0', () => {
    const bytes = Buffer.from('\uFEFFa\n\uFEFFb\n');
    expect(splitChunk(bytes, { start: 0, end: bytes.length }, 2).map((l) => l.text)).toEqual(['a', '\uFEFFb']);
  });

  it('owns nothing when its range lies inside one line, and knows so at its end without reading on', () => {
    const bytes = Buffer.from(`${'a'.repeat(100)}\nb\n`);
    const splitter = new OwnedLineSplitter({ start: 10, end: 20 }, bytes.length);
    expect(splitter.position).toBe(9);
    expect(splitter.push(bytes.subarray(9, 20))).toEqual([]);
    expect(splitter.done).toBe(true);
  });

  it('reads on past its end to finish its last line', () => {
    const bytes = Buffer.from('ab\ncdefgh\nij\n');
    const splitter = new OwnedLineSplitter({ start: 1, end: 4 }, bytes.length);
    expect(splitter.push(bytes.subarray(0, 4))).toEqual([]);
    expect(splitter.done).toBe(false);
    expect(splitter.push(bytes.subarray(4, 10))).toEqual([{ text: 'cdefgh', byte: 3, line: 1 }]);
    expect(splitter.done).toBe(true);
  });

  it('reports a line longer than maxLineBytes as tooLong without holding it, and keeps one of exactly maxLineBytes', () => {
    const text = `ok\n${'x'.repeat(100)}\nfive5\n6six6\r\nend\n${'y'.repeat(40)}`;
    const bytes = Buffer.from(text);
    const splitter = new OwnedLineSplitter({ start: 0, end: bytes.length }, bytes.length, 5);
    const lines: OwnedLine[] = [];
    for (let at = 0; at < bytes.length; at += 7) {
      lines.push(...splitter.push(bytes.subarray(at, at + 7)));
      expect(splitter.heldBytes).toBeLessThanOrEqual(5);
    }
    lines.push(...splitter.finish());
    expect(lines).toEqual([
      { text: 'ok', byte: 0, line: 1 },
      { text: '', byte: 3, line: 2, tooLong: true },
      { text: 'five5', byte: 104, line: 3 },
      // The '\r' counts: bytes before the '\n'.
      { text: '', byte: 110, line: 4, tooLong: true },
      { text: 'end', byte: 117, line: 5 },
      { text: '', byte: 121, line: 6, tooLong: true },
    ]);
  });

  it('refuses ranges that are not byte counts', () => {
    expect(() => new OwnedLineSplitter({ start: 5, end: 4 }, 10)).toThrow(RangeError);
    expect(() => new OwnedLineSplitter({ start: -1, end: 4 }, 10)).toThrow(RangeError);
    expect(() => new OwnedLineSplitter({ start: 0, end: 4 }, 10).finish()).toThrow(/finish\(\) at byte 0 of 10/);
  });
});
