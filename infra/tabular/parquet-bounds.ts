/**
 * What a page of a Parquet column chunk may declare before it is decompressed or decoded
 * (issue 33): its header's sizes and value count are the file's word, and a hostile file's word
 * would size the worker's allocations (a page that declares 1 GiB is given 1 GiB by hyparquet's
 * decoders; one that declares 10⁹ dictionary values gets a 10⁹-slot array). Each page is checked
 * by `PageBounds.check` against:
 *
 *   - the values it can hold: a flat column's page at most the row group's rows (a flat column
 *     has one value per row); any page at most MAX_PAGE_VALUES (decoders spell values and levels
 *     out as JS arrays: 8 bytes a slot);
 *   - the bytes those values can take: for fixed-width types (everything but BYTE_ARRAY) values
 *     × (their width + level bytes), the most any encoding takes (fixedWidthBound); for
 *     BYTE_ARRAY, whose values have no width, MAX_PAGE_BYTES;
 *   - the column chunk's declared total_uncompressed_size: the pages' declared sizes together
 *     never pass it.
 *
 * A page that passes is then decompressed with its output bounded by the size it declared
 * (parquet-codecs.ts). A refusal is a PageBoundError naming the row group and column; the
 * reader names the object (parquet-input.ts), and the run fails with it as invalid input.
 */
import type { PageHeader } from 'hyparquet';

/**
 * Declared uncompressed bytes of one page, at most. Writers cut pages at about 1 MiB
 * (parquet-mr, Arrow, DuckDB and hyparquet-writer by default); 64 MiB is 64 times that, and what
 * a worker may allocate for one page of a chunk it reads.
 */
export const MAX_PAGE_BYTES = 64 * 1024 * 1024;
/** Values (and level slots) of one page, at most: MAX_PAGE_BYTES of 8-byte JS array slots. */
export const MAX_PAGE_VALUES = MAX_PAGE_BYTES / 8;

/** Bytes one value of a physical type takes in PLAIN (the widest encoding of fixed-width values). */
const WIDTHS: Record<string, number> = { BOOLEAN: 1, INT32: 4, FLOAT: 4, INT64: 8, DOUBLE: 8, INT96: 12 };
/**
 * Bytes per value any encoding may add for a fixed-width value beyond its width: an RLE run
 * header per value (a varint: ≤ 5 bytes, what dictionary indices cost at worst) and a repetition
 * and a definition level, each at worst a one-value run (2 bytes).
 */
const OVERHEAD_PER_VALUE = 9;
/** Fixed bytes per page beyond its values: level sections' 4-byte lengths, a bit width, encoding headers. */
const OVERHEAD_PER_PAGE = 1024;

/** A page (or a column chunk's pages) declaring more than the file can hold. */
export class PageBoundError extends Error {
  override readonly name = 'PageBoundError';
}

export interface ChunkFacts {
  /** Row group index in the file and column path, for the message. */
  group: number;
  column: string;
  /** Physical type and FIXED_LEN_BYTE_ARRAY's width. */
  type: string;
  typeLength?: number;
  /** Rows in the row group. */
  groupRows: number;
  /** Whether the column is flat (no repeated level on its path): one value per row. */
  flat: boolean;
  /** The chunk's declared total_uncompressed_size (headers included). */
  totalUncompressed: number;
}

/** One column chunk's pages, checked as they are read (see the header). */
export class PageBounds {
  private declared = 0;

  constructor(private readonly facts: ChunkFacts) {}

  /** Throws PageBoundError when `header` declares more than its chunk can hold. */
  check(header: PageHeader): void {
    const { facts } = this;
    const size = header.uncompressed_page_size;
    const values = valuesOf(header);
    if (!Number.isSafeInteger(size) || size < 0 || !Number.isSafeInteger(header.compressed_page_size) || header.compressed_page_size < 0) {
      throw this.refuse(`a page declares sizes ${header.compressed_page_size}/${size}`);
    }
    if (values !== undefined) {
      if (!Number.isSafeInteger(values) || values < 0) throw this.refuse(`a page declares ${values} values`);
      if (facts.flat && header.type !== 'DICTIONARY_PAGE' && values > facts.groupRows) {
        throw this.refuse(`a page declares ${values} values in a row group of ${facts.groupRows} rows`);
      }
      if (values > MAX_PAGE_VALUES) throw this.refuse(`a page declares ${values} values, more than the ${MAX_PAGE_VALUES} a page may hold`);
    }
    const most = this.mostBytes(values);
    if (size > most) {
      throw this.refuse(
        `a page declares ${size} bytes uncompressed, more than the ${most} its ${values ?? 0} ${facts.type} values can take`,
      );
    }
    this.declared += size;
    if (this.declared > facts.totalUncompressed) {
      throw this.refuse(
        `its pages declare ${this.declared} bytes uncompressed, more than the ${facts.totalUncompressed} the column chunk declares`,
      );
    }
  }

  /** The most a page of `values` values of this column may declare. */
  private mostBytes(values: number | undefined): number {
    const width = this.facts.type === 'FIXED_LEN_BYTE_ARRAY' ? (this.facts.typeLength ?? 0) : WIDTHS[this.facts.type];
    if (width === undefined || values === undefined) return MAX_PAGE_BYTES;
    return Math.min(MAX_PAGE_BYTES, fixedWidthBound(values, width));
  }

  private refuse(what: string): PageBoundError {
    return new PageBoundError(`row group ${this.facts.group}, column "${this.facts.column}": ${what}; the file is corrupt or hostile`);
  }
}

/** The most bytes `values` values of `width` bytes take in any encoding, with their levels (see OVERHEAD_PER_VALUE). */
export function fixedWidthBound(values: number, width: number): number {
  return values * (width + OVERHEAD_PER_VALUE) + OVERHEAD_PER_PAGE;
}

/** The values a page header declares (data pages: slots, nulls included; dictionary pages: entries); undefined for an index page. */
function valuesOf(header: PageHeader): number | undefined {
  return header.data_page_header?.num_values ?? header.data_page_header_v2?.num_values ?? header.dictionary_page_header?.num_values;
}
