/**
 * Finding identical rows in a batch (request collapsing, issue 3 §7): a row is the slice at one
 * index of axis 0 across every input tensor, and two rows are identical when their bytes (or
 * strings) are equal in every input. The batch runner runs each distinct row once and copies its
 * outputs to the duplicates, which is exact for any model whose rows do not see each other —
 * the same assumption that lets the batcher put strangers' rows in one forward pass.
 *
 * A 32-bit hash only groups candidates; equality is always confirmed element by element before
 * two rows are merged, so a collision costs a comparison and can never mix rows. The hash is
 * FNV-1a over 32-bit words (bytes when a row is not word-aligned), finished with murmur3's
 * mixer: several times faster than sha256 on small rows, and no allocation per row.
 */
import type { EngineTensor } from './engine/engine.ts';
import { elementCount } from './engine/tensor-codec.ts';

export interface DuplicateRows {
  /** The first row of each group of identical rows, ascending. */
  unique: number[];
  /** For every row, the index in `unique` of the row identical to it. */
  sourceOf: Int32Array;
}

/** How a row is hashed; injectable so tests can force collisions. */
export type RowHasher = (tensors: readonly RowView[], row: number) => number;

/** A tensor prepared for per-row access: numeric data as bytes (and words when aligned), or strings. */
export type RowView =
  | { kind: 'strings'; strings: readonly string[]; perRow: number }
  | { kind: 'bytes'; bytes: Uint8Array; perRow: number; words: Uint32Array | null; wordsPerRow: number };

/** Groups the `rows` rows of tensors that share axis 0. */
export function findDuplicateRows(tensors: readonly EngineTensor[], rows: number, hash: RowHasher = hashRow): DuplicateRows {
  const views = tensors.map(rowView);
  const unique: number[] = [];
  const sourceOf = new Int32Array(rows);
  // hash → indices into `unique` of the groups with that hash (almost always one).
  const groups = new Map<number, number[]>();
  for (let r = 0; r < rows; r++) {
    const h = hash(views, r);
    const candidates = groups.get(h);
    const match = candidates?.find((g) => rowsEqual(views, unique[g] as number, r));
    if (match !== undefined) {
      sourceOf[r] = match;
      continue;
    }
    sourceOf[r] = unique.length;
    if (candidates) candidates.push(unique.length);
    else groups.set(h, [unique.length]);
    unique.push(r);
  }
  return { unique, sourceOf };
}

export function rowView(t: EngineTensor): RowView {
  const perRowElements = elementCount(t.dims.slice(1));
  if (Array.isArray(t.data)) return { kind: 'strings', strings: t.data, perRow: perRowElements };
  const { buffer, byteOffset, byteLength } = t.data;
  const bytes = new Uint8Array(buffer, byteOffset, byteLength);
  const perRow = perRowElements * t.data.BYTES_PER_ELEMENT;
  const aligned = byteOffset % 4 === 0 && perRow % 4 === 0;
  const words = aligned ? new Uint32Array(buffer, byteOffset, byteLength / 4) : null;
  return { kind: 'bytes', bytes, perRow, words, wordsPerRow: perRow / 4 };
}

export function hashRow(tensors: readonly RowView[], row: number): number {
  let h = 0x811c9dc5;
  for (const t of tensors) {
    if (t.kind === 'strings') {
      for (let i = row * t.perRow; i < (row + 1) * t.perRow; i++) {
        const s = t.strings[i] as string;
        for (let k = 0; k < s.length; k++) h = Math.imul(h ^ s.charCodeAt(k), 0x01000193);
        h = Math.imul(h ^ 0x10000, 0x01000193); // a separator no UTF-16 unit equals: ["ab"] and ["a","b"] differ
      }
    } else if (t.words) {
      const n = t.wordsPerRow;
      for (let i = row * n; i < (row + 1) * n; i++) h = Math.imul(h ^ (t.words[i] as number), 0x01000193);
    } else {
      const n = t.perRow;
      for (let i = row * n; i < (row + 1) * n; i++) h = Math.imul(h ^ (t.bytes[i] as number), 0x01000193);
    }
  }
  return fmix32(h);
}

/** murmur3's finaliser: FNV leaves high-bit differences in high bits; this spreads them. */
function fmix32(h: number): number {
  let x = h ^ (h >>> 16);
  x = Math.imul(x, 0x85ebca6b);
  x ^= x >>> 13;
  x = Math.imul(x, 0xc2b2ae35);
  x ^= x >>> 16;
  return x >>> 0;
}

/** Rows a and b hold the same bytes (or strings) in every tensor. */
export function rowsEqual(tensors: readonly RowView[], a: number, b: number): boolean {
  for (const t of tensors) {
    const n = t.perRow;
    if (t.kind === 'strings') {
      for (let i = 0; i < n; i++) if (t.strings[a * n + i] !== t.strings[b * n + i]) return false;
    } else if (Buffer.compare(t.bytes.subarray(a * n, (a + 1) * n), t.bytes.subarray(b * n, (b + 1) * n)) !== 0) {
      return false;
    }
  }
  return true;
}
