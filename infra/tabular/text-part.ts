/**
 * A scored chunk's text part from typed outputs (RowsTensor), without a JS object or a
 * JSON.stringify per row: each row's text is cut from its output's printed elements.
 *
 *   JSONL  one line per row, `{"id":<id>,"<output>":<the row as nested arrays, or a scalar>,…}`:
 *          the same bytes as JSON.stringify of that object (the part format is public), so
 *          field order is JS's (integer-like names first), non-finite floats print as null,
 *          64-bit integers past 2^53 as decimal strings, BOOL as true/false, FP16 decoded.
 *   CSV    a header `id,<out>` (a one-element row) or `id,<out>_0,<out>_1,…` (the row flattened
 *          row-major), then one line per row; numbers as JS prints them (NaN, Infinity), 64-bit
 *          integers in full, BOOL as true/false, strings quoted when they need it (RFC 4180).
 *
 * Numbers dominate the cost (a float32 prints as the shortest double, often 17 digits), and V8
 * prints them fastest inside JSON.stringify of a plain array: faster than TypedArray#join over
 * a subarray or a String() per element. So an output's elements are printed a block of rows at a
 * time by one JSON.stringify and each row's text is sliced out of it (elementTexts); a line is
 * then a few concatenations. BYTES are printed per element.
 */

import { DEFAULT_ID_COLUMN, type RowsTensor } from '../contracts/bulk.ts';
import { badElement, DATATYPE_INFO, jsonElement, type NumericDatatype, type PackedArray } from '../contracts/datatypes.ts';
import { jsonValues } from '../contracts/packed-tensors.ts';

/** One row of one output as text. */
type RowText = (row: number) => string;

/** The JSONL part: one line per id, in order; throws when an output's rows differ from the ids. */
export function jsonlPart(ids: ReadonlyArray<string | number>, outputs: readonly RowsTensor[], idColumn = DEFAULT_ID_COLUMN): Buffer {
  checkRows(ids, outputs);
  const fields = jsonFields(idColumn, outputs);
  const lines = new Array<string>(ids.length);
  const idAt = fields.findIndex((f) => f.text === undefined);
  for (let r = 0; r < ids.length; r++) {
    let line = '{';
    for (let f = 0; f < fields.length; f++) {
      const field = fields[f] as JsonField;
      line += field.key;
      line += f === idAt ? jsonScalar(ids[r] as string | number) : (field.text as RowText)(r);
    }
    lines[r] = `${line}}`;
  }
  return Buffer.from(lines.length > 0 ? `${lines.join('\n')}\n` : '');
}

/** The CSV part: a header line, then one line per id; throws when an output's rows differ from the ids. */
export function csvPart(ids: ReadonlyArray<string | number>, outputs: readonly RowsTensor[], idColumn = DEFAULT_ID_COLUMN): Buffer {
  checkRows(ids, outputs);
  const header = [csvCell(idColumn)];
  const cells: RowText[] = [];
  for (const t of outputs) {
    const size = rowSize(t);
    if (size === 1) header.push(csvCell(t.name));
    else for (let k = 0; k < size; k++) header.push(csvCell(`${t.name}_${k}`));
    if (size > 0) cells.push(csvRow(t, size));
  }
  const lines = new Array<string>(ids.length + 1);
  lines[0] = header.join(',');
  for (let r = 0; r < ids.length; r++) {
    const id = ids[r] as string | number;
    let line = typeof id === 'number' ? String(id) : csvCell(id);
    for (let c = 0; c < cells.length; c++) line += `,${(cells[c] as RowText)(r)}`;
    lines[r + 1] = line;
  }
  return Buffer.from(`${lines.join('\n')}\n`);
}

function checkRows(ids: ReadonlyArray<unknown>, outputs: readonly RowsTensor[]): void {
  for (const t of outputs) {
    if (t.shape[0] !== ids.length) throw new Error(`output "${t.name}" has ${t.shape[0]} rows for ${ids.length} ids`);
  }
}

function rowSize(t: RowsTensor): number {
  let n = 1;
  for (let d = 1; d < t.shape.length; d++) n *= t.shape[d] as number;
  return n;
}

// JSONL -------------------------------------------------------------------------------------------

interface JsonField {
  /** `"name":`, with the comma before every field but the first. */
  key: string;
  /** The output's row text; undefined for the id. */
  text?: RowText;
}

/**
 * The fields in JSON.stringify's order for `{[idColumn]: id, [output.name]: row, …}`: integer-like
 * keys first, ascending, then the rest as inserted; a repeated name keeps its first place and
 * its last value. Object.keys of a template object gives exactly that order.
 */
function jsonFields(idColumn: string, outputs: readonly RowsTensor[]): JsonField[] {
  const template: Record<string, number> = { [idColumn]: -1 };
  outputs.forEach((t, i) => {
    template[t.name] = i;
  });
  return Object.keys(template).map((name, k) => {
    const key = `${k === 0 ? '' : ','}${JSON.stringify(name)}:`;
    const i = template[name] as number;
    return i < 0 ? { key } : { key, text: jsonRow(outputs[i] as RowsTensor) };
  });
}

/** A row as JSON: nested arrays of the row dims (a scalar for a rank-1 tensor). */
function jsonRow(t: RowsTensor): RowText {
  const dims = t.shape.slice(1);
  const size = rowSize(t);
  // Elements [start, end) joined by commas.
  let elements: (start: number, end: number) => string;
  if (t.datatype === 'BYTES') {
    const s = t.data as readonly string[];
    elements = (start, end) => JSON.stringify(s.slice(start, end)).slice(1, -1);
  } else {
    elements = elementTexts(t, size);
  }
  if (dims.length === 0) return (r) => elements(r, r + 1);
  const inner = (start: number, n: number): string => `[${elements(start, start + n)}]`;
  if (dims.length === 1) return (r) => inner(r * size, size);
  return (r) => nested(r * size, dims, 0, inner);
}

function nested(start: number, dims: readonly number[], depth: number, inner: (start: number, n: number) => string): string {
  const n = dims[depth] as number;
  if (depth === dims.length - 1) return inner(start, n);
  let step = 1;
  for (let d = depth + 1; d < dims.length; d++) step *= dims[d] as number;
  let s = '[';
  for (let i = 0; i < n; i++) s += (i === 0 ? '' : ',') + nested(start + i * step, dims, depth + 1, inner);
  return `${s}]`;
}

function jsonScalar(v: string | number): string {
  return typeof v === 'number' && Number.isFinite(v) ? String(v) : JSON.stringify(v);
}

// CSV ---------------------------------------------------------------------------------------------

/** A row's cells joined by commas. */
function csvRow(t: RowsTensor, size: number): RowText {
  const data = t.data;
  if (t.datatype === 'BYTES') {
    const s = data as readonly string[];
    return (r) =>
      s
        .slice(r * size, (r + 1) * size)
        .map(csvCell)
        .join(',');
  }
  if (data instanceof BigInt64Array || data instanceof BigUint64Array) {
    // In full: a CSV cell has no 2^53 limit (JSON's decimal strings would come quoted).
    return (r) => data.subarray(r * size, (r + 1) * size).join(',');
  }
  if (!allFinite(t)) {
    // JSON prints null; CSV readers (pandas, DuckDB) read NaN, Infinity and -Infinity as such.
    const json = jsonElement(t.datatype);
    const value = (i: number) => json(data[i] as number);
    return (r) => {
      let s = '';
      for (let i = r * size; i < (r + 1) * size; i++) s += i === r * size ? String(value(i)) : `,${value(i)}`;
      return s;
    };
  }
  const elements = elementTexts(t, size);
  return (r) => elements(r * size, (r + 1) * size);
}

/** A CSV cell, quoted when it holds a comma, a quote or a line break (quotes doubled). */
function csvCell(v: string): string {
  return /[",\r\n]/.test(v) ? `"${v.replace(/"/g, '""')}"` : v;
}

// Elements ------------------------------------------------------------------------------------------

/** Elements printed per JSON.stringify call: bounds the text held at once (about 20 bytes each). */
const BLOCK_ELEMENTS = 1 << 16;

/**
 * Elements' JSON texts, `(start, end)` giving elements [start, end) joined by commas. A block of
 * rows at a time is printed by one JSON.stringify of its JSON values (jsonValues: BOOL as
 * booleans, FP16 decoded, 64-bit integers past 2^53 as decimal strings) — V8 prints numbers
 * fastest there, faster than TypedArray#join or a String() per element — and rows are sliced out
 * of that text at the commas between elements (no element's text holds one). Rows are asked for
 * front to back, so a block is printed once.
 */
function elementTexts(t: RowsTensor, size: number): (start: number, end: number) => string {
  if (size === 0) return () => '';
  const data = t.data as PackedArray;
  const blockElements = Math.max(1, Math.floor(BLOCK_ELEMENTS / size)) * size;
  let from = 0;
  let to = 0;
  let text = '';
  // starts[k]: where element from + k begins in text; each one ends one before the next's start.
  let starts = new Uint32Array(0);
  const load = (start: number): void => {
    from = start - (start % blockElements);
    to = Math.min(from + blockElements, data.length);
    text = JSON.stringify(jsonValues(t.datatype, data.subarray(from, to)));
    if (starts.length < to - from + 1) starts = new Uint32Array(blockElements + 1);
    let at = 1;
    for (let k = 0; k < to - from; k++) {
      starts[k] = at;
      const comma = text.indexOf(',', at);
      at = comma < 0 ? text.length : comma + 1;
    }
    starts[to - from] = text.length; // the last element ends before the closing bracket
  };
  return (start, end) => {
    if (end <= start) return '';
    if (start < from || end > to) load(start);
    return text.slice(starts[start - from], (starts[end - from] as number) - 1);
  };
}

/** Every float element finite (integers, BOOL: always). */
function allFinite(t: RowsTensor): boolean {
  const kind = DATATYPE_INFO[t.datatype].kind;
  if (kind !== 'float' && kind !== 'half') return true;
  return badElement(t.datatype as NumericDatatype, t.data as PackedArray) < 0;
}
