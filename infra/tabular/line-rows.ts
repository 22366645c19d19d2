/**
 * A text chunk's lines (JSONL or CSV) → ChunkRows: every good row's id, and the rows filled
 * straight into the model inputs' typed arrays while the parsed line is walked (no per-row value
 * arrays, no `flat()`), grouped by row shape (row-table.ts); bad rows kept apart as values with
 * their line and byte, never thrown. Blank lines are skipped but counted; a BOM at byte 0 is dropped.
 *
 * JSONL (here): one object a line, parsed line by line (parsing a batch as one JSON array was no
 * faster, and lets a broken line merge with its neighbours); each input from the key of its name,
 * or per `columns` (one key: the input's row as nested arrays, or a scalar for a one-element row;
 * several: one scalar feature each, in order); the id from `idColumn`, a non-empty string or a
 * finite number. CSV: csv-rows.ts. Rows are checked as a submitted job is (oip-validate.ts).
 */
import type { BulkColumns, ChunkRows } from '../contracts/bulk.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
import { errorMessage } from '../kernel/errors.ts';
import { csvPlans, csvRows } from './csv-rows.ts';
import {
  basePlan,
  type Column,
  checkColumns,
  checkFeatureShape,
  copyInto,
  fillNested,
  fillScalars,
  fixedFeatures,
  type InputPlan,
  isOneElement,
  type LineParser,
  measure,
  RowTable,
  reserve,
  type SlowRow,
  type SlowTensor,
  type SourceLine,
  type Value,
} from './row-table.ts';

export { splitCsv } from './csv-rows.ts';
export type { SourceLine } from './row-table.ts';

export interface LineRowsOptions {
  columns?: BulkColumns;
  idColumn: string;
  /** CSV: the object's header cells, when its first line is a header. */
  header?: string[];
  /** CSV: the line at byte 0 is skipped when it is the header. */
  skipFirstLineIfHeader: boolean;
  /** The reader's line limit, for the message of a `tooLong` line. */
  maxLineBytes?: number;
}

export interface LineRows {
  push(lines: readonly SourceLine[]): void;
  finish(): ChunkRows;
}

export function createLineRows(inputs: readonly TensorSpec[], format: 'jsonl' | 'csv', options: LineRowsOptions): LineRows {
  const plans = format === 'csv' ? csvPlans(inputs, options) : jsonlPlans(inputs, options);
  const table = new RowTable(plans);
  const parse = format === 'csv' ? csvRows(table, options) : jsonlRows(table, options.idColumn);
  const tooLong = `line longer than ${options.maxLineBytes === undefined ? 'the line limit' : `${options.maxLineBytes} bytes`}`;
  return {
    push(lines) {
      for (const line of lines) {
        table.lines++;
        if (line.tooLong) {
          table.reject(line, tooLong);
          continue;
        }
        const text = line.byte === 0 && line.text.charCodeAt(0) === 0xfeff ? line.text.slice(1) : line.text;
        // Blank lines are skipped (still counted); trim() only for a line that starts with whitespace.
        if (text.length === 0 || (text.charCodeAt(0) <= 32 && text.trim() === '')) continue;
        parse(line, text);
      }
    },
    finish: () => table.result(),
  };
}

function jsonlPlans(inputs: readonly TensorSpec[], options: LineRowsOptions): InputPlan[] {
  if (options.columns) checkColumns(inputs, options.columns);
  return inputs.map((spec) => {
    const keys = options.columns?.[spec.name] ?? [spec.name];
    if (keys.length === 1) return { ...basePlan(spec), keys };
    checkFeatureShape(spec, 'Several keys');
    return { ...basePlan(spec), keys, features: fixedFeatures(spec, keys.length, `the keys ${keys.join(', ')}`) };
  });
}

function jsonlRows(table: RowTable, idColumn: string): LineParser {
  const plans = table.plans;

  /** The fast walk over a parsed object; false when it declines (nothing committed). */
  const fast = (obj: Record<string, unknown>): boolean => {
    const id = obj[idColumn];
    if (!validId(id)) return false;
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as InputPlan;
      if (p.features) copyInto(table.dims[i] as number[], p.features);
      else if (!measure(obj[p.keys[0] as string], p, table.dims[i] as number[])) return false;
    }
    const group = table.group();
    for (let i = 0; i < plans.length; i++) {
      const p = plans[i] as InputPlan;
      const c = group.columns[i] as Column;
      reserve(c);
      const value = p.features ? p.keys.map((k) => obj[k]) : obj[p.keys[0] as string];
      if (!(Array.isArray(value) && !p.features ? fillNested(value, group.dims[i] as number[], 0, c, c.length) : fillScalars(value, c))) {
        return false;
      }
    }
    table.commit(group, id);
    return true;
  };

  /** Today's JSONL rules for a line the walk declined: the row as plain values, or why it is bad. */
  const slow = (obj: unknown): SlowRow | string => {
    if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) return 'a line must be a JSON object';
    const row = obj as Record<string, unknown>;
    const id = row[idColumn];
    if (!validId(id)) return `missing "${idColumn}" (a non-empty string or a number)`;
    const tensors: SlowTensor[] = [];
    for (const p of plans) {
      const tensor = p.features ? keyFeatures(p, row) : keyRow(p, row);
      if (typeof tensor === 'string') return tensor;
      tensors.push(tensor);
    }
    return { id, tensors };
  };

  return (line, text) => {
    let obj: unknown;
    try {
      obj = JSON.parse(text);
    } catch (err) {
      table.reject(line, `not valid JSON: ${errorMessage(err)}`);
      return;
    }
    if (typeof obj === 'object' && obj !== null && !Array.isArray(obj) && fast(obj as Record<string, unknown>)) return;
    table.settle(line, slow(obj));
  };
}

/** An input's row from its one key: nested arrays, or a scalar for a one-element row. */
function keyRow(p: InputPlan, row: Record<string, unknown>): SlowTensor | string {
  const key = p.keys[0] as string;
  const value = row[key];
  if (value === undefined) return key === p.spec.name ? `missing input "${key}"` : `input "${p.spec.name}": missing key "${key}"`;
  const dims = nestedDims(value);
  if (!dims) return `input "${p.spec.name}": not a rectangular nested array`;
  const scalarRow = dims.length === 0 && isOneElement(p.rowDims);
  return { dims: scalarRow ? [...p.rowDims] : dims, data: flatValues(value) };
}

/** An input's row from several keys, one scalar feature each. */
function keyFeatures(p: InputPlan, row: Record<string, unknown>): SlowTensor | string {
  const data: Value[] = [];
  for (const k of p.keys) {
    const v = row[k];
    if (v === undefined) return `input "${p.spec.name}": missing key "${k}"`;
    if (typeof v === 'object' && v !== null) return `input "${p.spec.name}": key "${k}" must be a scalar`;
    data.push(v as Value);
  }
  return { dims: p.features as number[], data };
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

function flatValues(value: unknown, out: Value[] = []): Value[] {
  if (!Array.isArray(value)) out.push(value as Value);
  else for (const v of value) flatValues(v, out);
  return out;
}

function validId(id: unknown): id is string | number {
  return (typeof id === 'string' && id !== '') || (typeof id === 'number' && Number.isFinite(id));
}
