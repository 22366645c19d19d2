/**
 * Hostile Parquet files for the bounds of issue 33, written page by page with hyparquet-writer's
 * own page-header and footer encoders, so every other byte is what a real writer puts there:
 *
 *   bombParquet    `id` INT64 and `x` FLOAT, `rows` rows in one row group; `x`'s one page is a
 *                  GZIP or BROTLI stream of `inflateBytes` zeros whose header declares only
 *                  `rows × 4` bytes (or `declaredBytes`), the attack of a 1.7 KB page → 1 GiB
 *   gzipZeros / brotliZeros   those streams, made a MiB at a time (nothing of their size is held)
 *   fatFooterParquet  a valid one-row file (`id`, `x`) whose footer carries `footerBytes` of
 *                  key-value metadata: past PARQUET_FOOTER_MAX_BYTES, its trailer alone says so
 */
import * as zlib from 'node:zlib';
import type { CompressionCodec, FileMetaData, PageHeader } from 'hyparquet';
import { ByteWriter, parquetWriteBuffer } from 'hyparquet-writer';
import { writePageHeader } from 'hyparquet-writer/src/datapage.js';
import { writeMetadata } from 'hyparquet-writer/src/metadata.js';

const MiB = 1024 * 1024;

/** A gzip stream of `bytes` zeros: one gzip member per MiB (gunzip reads members back to back), ~1 KB each. */
export function gzipZeros(bytes: number): Uint8Array {
  const member = zlib.gzipSync(Buffer.alloc(MiB), { level: 9 });
  const members = Math.ceil(bytes / MiB);
  return new Uint8Array(Buffer.concat(Array.from({ length: members }, () => member)));
}

/** A brotli stream of `bytes` zeros, fed a MiB at a time (1 GiB comes to under 2 KB). */
export async function brotliZeros(bytes: number): Promise<Uint8Array> {
  const zeros = Buffer.alloc(MiB);
  const encoder = zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } });
  const out: Buffer[] = [];
  encoder.on('data', (c: Buffer) => out.push(c));
  const done = new Promise<void>((resolve, reject) => encoder.on('end', resolve).on('error', reject));
  for (let left = bytes; left > 0; left -= MiB) {
    if (!encoder.write(left >= MiB ? zeros : zeros.subarray(0, left))) await new Promise((r) => encoder.once('drain', r));
  }
  encoder.end();
  await done;
  return new Uint8Array(Buffer.concat(out));
}

export interface BombOptions {
  codec: Extract<CompressionCodec, 'GZIP' | 'BROTLI'>;
  /** The compressed body of `x`'s page (gzipZeros / brotliZeros). */
  body: Uint8Array;
  rows?: number;
  /** What `x`'s page header declares uncompressed; default rows × 4, what its FLOAT values take. */
  declaredBytes?: number;
  /** What the column chunk declares in all; default the page's header plus declaredBytes. */
  chunkDeclaredBytes?: number;
}

/** The file: `PAR1`, id's page, x's page, the footer, its length, `PAR1`. */
export function bombParquet(options: BombOptions): Uint8Array {
  const rows = options.rows ?? 4;
  const w = new ByteWriter();
  w.appendUint32(0x31524150);
  const idValues = new ByteWriter();
  for (let i = 0; i < rows; i++) idValues.appendInt64(BigInt(i));
  const id = writePage(w, 'UNCOMPRESSED', new Uint8Array(idValues.getBuffer()), idValues.offset, rows);
  const declared = options.declaredBytes ?? rows * 4;
  const x = writePage(w, options.codec, options.body, declared, rows);
  const chunk = (
    name: string,
    type: 'INT64' | 'FLOAT',
    codec: CompressionCodec,
    page: { offset: number; header: number; size: number; declared: number },
  ) => ({
    file_offset: BigInt(page.offset),
    meta_data: {
      type,
      encodings: ['PLAIN' as const],
      path_in_schema: [name],
      codec,
      num_values: BigInt(rows),
      total_uncompressed_size: BigInt(
        name === 'x' && options.chunkDeclaredBytes !== undefined ? options.chunkDeclaredBytes : page.header + page.declared,
      ),
      total_compressed_size: BigInt(page.header + page.size),
      data_page_offset: BigInt(page.offset),
    },
  });
  const metadata = {
    version: 2,
    schema: [
      { name: 'root', num_children: 2 },
      { name: 'id', type: 'INT64', repetition_type: 'REQUIRED' },
      { name: 'x', type: 'FLOAT', repetition_type: 'REQUIRED' },
    ],
    num_rows: BigInt(rows),
    row_groups: [
      {
        columns: [chunk('id', 'INT64', 'UNCOMPRESSED', id), chunk('x', 'FLOAT', options.codec, x)],
        total_byte_size: BigInt(id.header + id.declared + x.header + x.declared),
        num_rows: BigInt(rows),
      },
    ],
    created_by: 'warmpool hostile-parquet fixture',
    metadata_length: 0,
  } as unknown as FileMetaData;
  const footerStart = w.offset;
  writeMetadata(w, metadata);
  w.appendUint32(w.offset - footerStart);
  w.appendUint32(0x31524150);
  return new Uint8Array(w.getBuffer());
}

function writePage(w: ByteWriter, _codec: CompressionCodec, body: Uint8Array, declared: number, rows: number) {
  const offset = w.offset;
  const header: PageHeader = {
    type: 'DATA_PAGE',
    uncompressed_page_size: declared,
    compressed_page_size: body.byteLength,
    data_page_header: { num_values: rows, encoding: 'PLAIN', definition_level_encoding: 'RLE', repetition_level_encoding: 'RLE' },
  };
  writePageHeader(w, header);
  const headerBytes = w.offset - offset;
  w.appendBytes(body);
  return { offset, header: headerBytes, size: body.byteLength, declared };
}

/** A valid file of one row whose footer is more than `footerBytes` long (a key-value entry of that size). */
export function fatFooterParquet(footerBytes: number): Uint8Array {
  return new Uint8Array(
    parquetWriteBuffer({
      columnData: [
        { name: 'id', data: BigInt64Array.from([1n]) },
        { name: 'x', data: Float32Array.from([1]) },
      ],
      kvMetadata: [{ key: 'padding', value: 'p'.repeat(footerBytes) }],
    }),
  );
}
