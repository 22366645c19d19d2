/**
 * Parquet inputs that would make a reader allocate what their bytes do not hold (issue 33):
 * pages that inflate past their declared size, pages and chunks that declare absurd sizes, and
 * footers past PARQUET_FOOTER_MAX_BYTES. Each is a bad input named (object, row group, column),
 * refused having allocated no more than the bound.
 */
import { Readable } from 'node:stream';
import * as zlib from 'node:zlib';
import { parquetWriteBuffer } from 'hyparquet-writer';
import { describe, expect, it } from 'vitest';
import { bombParquet, brotliZeros, gzipZeros } from '../../test/support/hostile-parquet.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import { ObjectChangedError } from '../registry/object-store.ts';
import { readOwnedLines, sampleLines } from './line-range.ts';
import { MAX_PAGE_BYTES } from './parquet-bounds.ts';
import { BOUNDED_DECOMPRESSORS, snappyLength, zstdContentSizes } from './parquet-codecs.ts';
import { readParquetRows } from './parquet-input.ts';
import { parquetLayout } from './parquet-layout.ts';

const GiB = 1024 * 1024 * 1024;
const input = [{ name: 'input', datatype: 'FP32' as const, shape: [-1, 1] }];

function memoryStore(bytes: Uint8Array) {
  const gets: Array<[number, number]> = [];
  return {
    gets,
    fetched: () => gets.reduce((n, [s, e]) => n + e - s, 0),
    async getRange(_key: string, start: number, end: number) {
      gets.push([start, end]);
      return Readable.from([Buffer.from(bytes.subarray(start, Math.min(end, bytes.length)))]);
    },
  };
}

async function refusal(bytes: Uint8Array): Promise<InvalidInputError> {
  const err = await readParquetRows(memoryStore(bytes), 'in/bomb.parquet', bytes.length, { start: 0, end: 4 }, input, {
    idColumn: 'id',
    columns: { input: ['x'] },
  }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(InvalidInputError);
  return err as InvalidInputError;
}

/** Peak RSS of this process so far (Linux /proc; VmHWM), in bytes. */
async function peakRss(): Promise<number> {
  const { readFile } = await import('node:fs/promises');
  const status = await readFile('/proc/self/status', 'utf8');
  return Number(/VmHWM:\s+(\d+) kB/.exec(status)?.[1]) * 1024;
}

describe('page bombs: output bounded by the declared size', () => {
  it('a GZIP page and a BROTLI page of 1 GiB of zeros, each declaring 16 bytes, are bad inputs named by object, row group and column, and never inflate', async () => {
    const before = await peakRss();
    for (const [codec, body] of [
      ['GZIP', gzipZeros(GiB)],
      ['BROTLI', await brotliZeros(GiB)],
    ] as const) {
      const err = await refusal(bombParquet({ codec, body }));
      expect(err.code).toBe('invalid_parquet');
      expect(err.message).toContain('in/bomb.parquet');
      expect(err.message).toContain('row group 0, column "x"');
      expect(err.message).toContain(`a ${codec} page inflates past the 16 bytes its header declares`);
    }
    // Nothing near the gigabyte was ever held (the fixtures themselves are ~1 MB and ~2 KB).
    expect((await peakRss()) - before).toBeLessThan(200 * 1024 * 1024);
  });

  it('a page declaring more than its values can take is refused before it is decompressed', async () => {
    const err = await refusal(bombParquet({ codec: 'GZIP', body: gzipZeros(64 * 1024 * 1024), declaredBytes: 64 * 1024 * 1024 }));
    expect(err.message).toMatch(
      /row group 0, column "x": a page declares 67108864 bytes uncompressed, more than the \d+ its 4 FLOAT values can take/,
    );
  });

  it("pages declaring more than their chunk's total_uncompressed_size are refused", async () => {
    const err = await refusal(bombParquet({ codec: 'GZIP', body: new Uint8Array(zlib.gzipSync(Buffer.alloc(16))), chunkDeclaredBytes: 8 }));
    expect(err.message).toMatch(/its pages declare \d+ bytes uncompressed, more than the 8 the column chunk declares/);
  });

  it('a well-formed GZIP or BROTLI page still reads', async () => {
    const values = Buffer.from(new Float32Array([1, 2, 3, 4]).buffer);
    for (const [codec, body] of [
      ['GZIP', zlib.gzipSync(values)],
      ['BROTLI', zlib.brotliCompressSync(values)],
    ] as const) {
      const bytes = bombParquet({ codec, body: new Uint8Array(body) });
      const rows = await readParquetRows(memoryStore(bytes), 'k', bytes.length, { start: 0, end: 4 }, input, {
        idColumn: 'id',
        columns: { input: ['x'] },
      });
      expect(rows.ids).toEqual([0, 1, 2, 3]);
      expect(Array.from(rows.groups[0]?.inputs[0]?.data as Float32Array)).toEqual([1, 2, 3, 4]);
    }
  });
});

describe('each codec stops at the declared size', () => {
  it('GZIP and BROTLI: node:zlib with maxOutputLength', async () => {
    const brotli = await brotliZeros(8 * 1024 * 1024);
    expect(() => BOUNDED_DECOMPRESSORS.GZIP?.(gzipZeros(8 * 1024 * 1024), 1000)).toThrow(/GZIP page inflates past the 1000 bytes/);
    expect(() => BOUNDED_DECOMPRESSORS.BROTLI?.(brotli, 1000)).toThrow(/BROTLI page inflates past the 1000 bytes/);
    expect(BOUNDED_DECOMPRESSORS.GZIP?.(new Uint8Array(zlib.gzipSync(Buffer.alloc(1000))), 1000).byteLength).toBe(1000);
  });

  it("SNAPPY: the stream's own length preamble is checked before a byte is decoded", () => {
    // Preamble 2^30 (varint 80 80 80 80 04), then nothing: a decoder trusting it would allocate 1 GiB.
    const preamble = new Uint8Array([0x80, 0x80, 0x80, 0x80, 0x04]);
    expect(snappyLength(preamble)).toBe(GiB);
    expect(() => BOUNDED_DECOMPRESSORS.SNAPPY?.(preamble, 16)).toThrow(/SNAPPY page inflates past the 16 bytes .*declares 1073741824/);
  });

  it("ZSTD: a frame's declared content size past the page's is refused before decoding", () => {
    // Magic, frame header: single segment, 8-byte content size = 2^30.
    const frame = new Uint8Array([0x28, 0xb5, 0x2f, 0xfd, 0xe0, 0, 0, 0, 0x40, 0, 0, 0, 0, 1, 0, 0]);
    expect(zstdContentSizes(frame)).toBe(GiB);
    expect(() => BOUNDED_DECOMPRESSORS.ZSTD?.(frame, 16)).toThrow(/ZSTD page inflates past the 16 bytes/);
  });

  it('an absurd declared size on any page is refused by the page bound, not allocated', async () => {
    const err = await refusal(bombParquet({ codec: 'GZIP', body: gzipZeros(1024), declaredBytes: 2 * MAX_PAGE_BYTES }));
    expect(err.message).toContain(`a page declares ${2 * MAX_PAGE_BYTES} bytes uncompressed`);
  });
});

describe('footer bound: PARQUET_FOOTER_MAX_BYTES', () => {
  /** A real file whose footer carries `bytes` of key-value metadata. */
  const fatFooter = (bytes: number) =>
    new Uint8Array(
      parquetWriteBuffer({
        columnData: [{ name: 'id', data: BigInt64Array.from([1n, 2n]) }],
        kvMetadata: [{ key: 'padding', value: 'p'.repeat(bytes) }],
      }),
    );

  it('a footer over the limit is refused from the trailer alone: one GET of the tail, no byte of the footer decoded', async () => {
    const bytes = fatFooter(2 * 1024 * 1024);
    const store = memoryStore(bytes);
    const err = await parquetLayout(store, 'in/fat.parquet', bytes.length, { footerMaxBytes: 1024 * 1024 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidInputError);
    expect((err as InvalidInputError).code).toBe('parquet_footer_too_large');
    expect((err as InvalidInputError).status).toBe(422);
    expect((err as InvalidInputError).message).toMatch(
      /in\/fat\.parquet: its footer \(file metadata\) is \d+ bytes, more than the 1048576 \(PARQUET_FOOTER_MAX_BYTES\)/,
    );
    expect(store.gets).toHaveLength(1);
    expect(store.fetched()).toBeLessThanOrEqual(64 * 1024);
  });

  it('the same footer under a limit it fits is read (two GETs), and the worker refuses it the same way', async () => {
    const bytes = fatFooter(2 * 1024 * 1024);
    expect((await parquetLayout(memoryStore(bytes), 'k', bytes.length, { footerMaxBytes: 4 * 1024 * 1024 })).rows).toBe(2);
    const err = await readParquetRows(memoryStore(bytes), 'in/fat.parquet', bytes.length, { start: 0, end: 2 }, input, {
      idColumn: 'id',
      columns: { input: ['id'] },
      footerMaxBytes: 1024 * 1024,
    }).catch((e: unknown) => e);
    expect((err as InvalidInputError).code).toBe('parquet_footer_too_large');
  });

  it("without a limit given, config.ts's default (4 MiB) applies", async () => {
    const bytes = fatFooter(5 * 1024 * 1024);
    const err = await parquetLayout(memoryStore(bytes), 'k', bytes.length).catch((e: unknown) => e);
    expect((err as InvalidInputError).message).toContain('more than the 4194304 (PARQUET_FOOTER_MAX_BYTES)');
  });
});

describe('reads pinned to the listed etag', () => {
  it('every GET carries If-Match; a store answering ObjectChangedError is input_changed (409), not a transient fault', async () => {
    const bytes = bombParquet({ codec: 'GZIP', body: new Uint8Array(zlib.gzipSync(Buffer.from(new Float32Array(4).buffer))) });
    const asked: Array<string | undefined> = [];
    const store = {
      async getRange(key: string, start: number, end: number, options?: { ifMatch?: string }) {
        asked.push(options?.ifMatch);
        if (asked.length > 1) throw new ObjectChangedError(key, options?.ifMatch ?? '', 'etag "v1", now "v2"');
        return Readable.from([Buffer.from(bytes.subarray(start, end))]);
      },
    };
    const err = await readParquetRows(store, 'in/x.parquet', bytes.length, { start: 0, end: 4 }, input, {
      idColumn: 'id',
      columns: { input: ['x'] },
      etag: '"v1"',
    }).catch((e: unknown) => e);
    expect(asked.every((e) => e === '"v1"')).toBe(true);
    expect((err as InvalidInputError).code).toBe('input_changed');
    expect((err as InvalidInputError).status).toBe(409);
    expect((err as InvalidInputError).message).toContain('in/x.parquet changed since the run listed it');
  });

  it('text chunks too: sampleLines and readOwnedLines pass the etag as If-Match, and another version is input_changed', async () => {
    const text = Buffer.from('{"id":1}\n{"id":2}\n');
    const asked: Array<string | undefined> = [];
    let changed = false;
    const store = {
      async getRange(key: string, start: number, end: number, options?: { ifMatch?: string }) {
        asked.push(options?.ifMatch);
        if (changed) throw new ObjectChangedError(key, options?.ifMatch ?? '', 'now "v2"');
        return Readable.from([text.subarray(start, end)]);
      },
    };
    expect((await sampleLines(store, 'in/a.jsonl', text.length, undefined, '"v1"')).firstLine).toBe('{"id":1}');
    changed = true;
    const lines = readOwnedLines(store, 'in/a.jsonl', { start: 0, end: text.length }, text.length, { etag: '"v1"' });
    const err = await lines.next().catch((e: unknown) => e);
    expect((err as InvalidInputError).code).toBe('input_changed');
    expect((err as InvalidInputError).message).toContain('input object in/a.jsonl changed while the run read it');
    expect(asked).toEqual(['"v1"', '"v1"']);
  });
});
