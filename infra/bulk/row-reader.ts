/**
 * Reads a bulk input object line by line (never whole) into rows of model inputs. A line that
 * cannot be a row is a value, not a throw: `{kind: 'bad', line, message}`, so the run counts and
 * samples it with its object and line number and goes on.
 *
 * JSONL: one object a line, `{"id": …, "<inputName>": <one row as nested arrays>, …}`; other keys
 * are ignored. CSV (single-input models): an id column, then the row's values flattened
 * row-major; a first line whose first cell is `id` is a header. Quoted fields ("a,b", "say ""hi""")
 * are understood. Blank lines are skipped (and still counted in line numbers).
 *
 * Each row is checked against the manifest exactly as a submitted job is (infra/contracts/oip-validate.ts):
 * rank, fixed dimensions, datatype and value ranges. Dynamic non-batch dimensions are fixed by
 * the first good row the run reads (a RowSchema shared across its objects): rows of one forward
 * pass must agree, and a row that disagrees is bad rather than failing its chunk on a worker.
 */

import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import type { BulkFormat } from '../contracts/bulk.ts';
import type { ModelManifest, TensorSpec } from '../contracts/manifest.ts';
import { validateInferRequest } from '../contracts/oip-validate.ts';
import { errorMessage, InvalidInputError } from '../kernel/errors.ts';

type Value = number | boolean | string;

/** One row's tensor: `dims` without the batch axis, `data` flat row-major. */
export interface RowTensor {
  dims: number[];
  data: Value[];
}

export interface GoodRow {
  kind: 'row';
  line: number;
  id: string | number;
  values: Record<string, RowTensor>;
  /** Bytes of the object read up to the end of this line. */
  offset: number;
}

export interface BadLine {
  kind: 'bad';
  line: number;
  message: string;
  offset: number;
}

export type RowEvent = GoodRow | BadLine;

/** What a run's rows must agree on; dynamic dims are pinned by the first good row. */
export interface RowSchema {
  readonly inputs: readonly TensorSpec[];
  /** An error message when `dims` disagrees with what the run has pinned; pins on first use. */
  fit(name: string, dims: readonly number[]): string | undefined;
}

export function createRowSchema(inputs: readonly TensorSpec[]): RowSchema {
  const pinned = new Map<string, number[]>();
  return {
    inputs,
    fit(name, dims) {
      const seen = pinned.get(name);
      if (!seen) {
        pinned.set(name, [...dims]);
        return undefined;
      }
      if (seen.every((d, i) => d === dims[i])) return undefined;
      return `input "${name}": row shape [${dims.join(', ')}] differs from the run's first row [${seen.join(', ')}]`;
    },
  };
}

/** The format of an object: the run's, else from the key's extension; undefined when unknown. */
export function formatOf(key: string, given?: BulkFormat): BulkFormat | undefined {
  if (given) return given;
  if (/\.(jsonl|ndjson|json)$/i.test(key)) return 'jsonl';
  if (/\.csv$/i.test(key)) return 'csv';
  return undefined;
}

export interface RowReaderOptions {
  format: BulkFormat;
  manifest: ModelManifest;
  schema: RowSchema;
}

export async function* readRows(source: Readable, options: RowReaderOptions): AsyncGenerator<RowEvent> {
  const parse = options.format === 'csv' ? csvParser(options) : jsonlParser(options);
  const lines = createInterface({ input: source, crlfDelay: Number.POSITIVE_INFINITY });
  let line = 0;
  let offset = 0;
  for await (const raw of lines) {
    line++;
    offset += Buffer.byteLength(raw) + 1;
    const text = line === 1 ? raw.replace(/^\uFEFF/, '') : raw;
    if (text.trim() === '') continue;
    const parsed = parse(text, line);
    if (parsed === null) continue;
    if (typeof parsed === 'string') yield { kind: 'bad', line, message: parsed, offset };
    else yield { kind: 'row', line, id: parsed.id, values: parsed.values, offset };
  }
}

type Parsed = { id: string | number; values: Record<string, RowTensor> } | string | null;

function jsonlParser({ manifest, schema }: RowReaderOptions): (text: string, line: number) => Parsed {
  return (text) => {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch (err) {
      return `not valid JSON: ${errorMessage(err)}`;
    }
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return 'a line must be a JSON object';
    const row = obj as Record<string, unknown>;
    const id = row.id;
    if (!(typeof id === 'string' && id !== '') && !(typeof id === 'number' && Number.isFinite(id))) {
      return 'missing "id" (a non-empty string or a number)';
    }
    const values: Record<string, RowTensor> = {};
    for (const spec of manifest.inputs) {
      const value = row[spec.name];
      if (value === undefined) return `missing input "${spec.name}"`;
      const dims = nestedDims(value);
      if (!dims) return `input "${spec.name}": not a rectangular nested array`;
      values[spec.name] = { dims, data: Array.isArray(value) ? flatValues(value, dims.length) : [value as Value] };
    }
    return checkRow(id, values, manifest, schema);
  };
}

function csvParser({ manifest, schema }: RowReaderOptions): (text: string, line: number) => Parsed {
  const spec = manifest.inputs[0];
  if (manifest.inputs.length !== 1 || !spec) throw new InvalidInputError('csv_needs_single_input', 'CSV input needs a single-input model');
  let header = false;
  return (text, line) => {
    const cells = splitCsv(text);
    if (!cells) return 'unbalanced quotes';
    if (!header && line === 1 && cells[0]?.trim().toLowerCase() === 'id') {
      header = true;
      return null;
    }
    const dims = csvDims(spec, cells.length - 1);
    const width = dims.reduce((n, d) => n * d, 1);
    if (cells.length !== width + 1) return `expected ${width + 1} columns (id + ${width} values), got ${cells.length}`;
    const id = (cells[0] as string).trim();
    if (id === '') return 'missing "id" (the first column)';
    const data: Value[] = [];
    for (let c = 1; c < cells.length; c++) {
      const v = csvValue(spec.datatype, cells[c] as string);
      if (v === undefined) return `column ${c + 1}: ${JSON.stringify(cells[c])} is not a ${spec.datatype} value`;
      data.push(v);
    }
    return checkRow(id, { [spec.name]: { dims, data } }, manifest, schema);
  };
}

/** Row dims of a CSV row: the spec's, with one dynamic dimension taken from the column count. */
function csvDims(spec: TensorSpec, values: number): number[] {
  const dims = spec.shape.slice(1);
  const fixed = dims.filter((d) => d >= 0).reduce((n, d) => n * d, 1);
  const dynamic = dims.filter((d) => d < 0).length;
  if (dynamic === 0) return dims;
  if (dynamic > 1)
    throw new InvalidInputError('csv_shape', `CSV cannot carry input "${spec.name}" with several dynamic dimensions; use JSONL`);
  return dims.map((d) => (d < 0 ? Math.floor(values / Math.max(1, fixed)) : d));
}

function csvValue(datatype: string, cell: string): Value | undefined {
  if (datatype === 'BYTES') return cell;
  const t = cell.trim();
  if (datatype === 'BOOL') return t === 'true' || t === '1' ? true : t === 'false' || t === '0' ? false : undefined;
  if (t === '') return undefined;
  const n = Number(t);
  if (!Number.isFinite(n)) return undefined;
  // 64-bit integers past 2^53 travel as decimal strings (oip-validate.ts checks the range).
  if (!Number.isSafeInteger(n) && /^-?\d+$/.test(t)) return t;
  return n;
}

/** One row through the same checks a submitted job gets, then the run's pinned shapes. */
function checkRow(id: string | number, values: Record<string, RowTensor>, manifest: ModelManifest, schema: RowSchema): Parsed {
  const inputs = manifest.inputs.map((spec) => {
    const v = values[spec.name] as RowTensor;
    return { name: spec.name, datatype: spec.datatype, shape: [1, ...v.dims], data: v.data };
  });
  try {
    validateInferRequest({ inputs }, manifest);
  } catch (err) {
    if (err instanceof InvalidInputError) return err.message;
    throw err;
  }
  for (const spec of manifest.inputs) {
    const misfit = schema.fit(spec.name, (values[spec.name] as RowTensor).dims);
    if (misfit) return misfit;
  }
  return { id, values };
}

/** Dims of a nested array (a scalar has none); undefined when ragged. */
function nestedDims(value: unknown): number[] | undefined {
  if (!Array.isArray(value)) return [];
  if (value.length === 0) return [0];
  const inner = nestedDims(value[0]);
  if (!inner) return undefined;
  for (let i = 1; i < value.length; i++) {
    const d = nestedDims(value[i]);
    if (!d || d.length !== inner.length || d.some((x, k) => x !== inner[k])) return undefined;
  }
  return [value.length, ...inner];
}

/** Splits one CSV line; undefined when a quote is left open. */
export function splitCsv(line: string): string[] | undefined {
  const out: string[] = [];
  let i = 0;
  for (;;) {
    if (line[i] === '"') {
      let v = '';
      i++;
      for (;;) {
        const q = line.indexOf('"', i);
        if (q < 0) return undefined;
        v += line.slice(i, q);
        if (line[q + 1] === '"') {
          v += '"';
          i = q + 2;
          continue;
        }
        i = q + 1;
        break;
      }
      out.push(v);
      if (i >= line.length) return out;
      if (line[i] !== ',') return undefined;
      i++;
    } else {
      const c = line.indexOf(',', i);
      if (c < 0) {
        out.push(line.slice(i));
        return out;
      }
      out.push(line.slice(i, c));
      i = c + 1;
    }
  }
}

/**
 * A rectangular nested array (depth = its rank) as one flat array. Not `Array.prototype.flat`:
 * V8's is ~70 ms per 1000 rows of 256 values even on an already flat array, which was the
 * largest cost of reading bulk input.
 */
function flatValues(value: unknown[], depth: number): Value[] {
  if (depth <= 1) return value as Value[];
  const out: Value[] = [];
  const push = (a: unknown[], d: number): void => {
    for (let i = 0; i < a.length; i++) {
      if (d > 1) push(a[i] as unknown[], d - 1);
      else out.push(a[i] as Value);
    }
  };
  push(value, depth);
  return out;
}
