/**
 * Where a text chunk's good rows go (line-rows.ts, csv-rows.ts): typed columns per model input,
 * one group per row shape, filled in place and committed a row at a time; bad rows counted and
 * sampled. Also the two ways a row gets in:
 *   fast  a walk over the parsed values that writes each one by its datatype's rule (contracts/
 *         datatypes.ts, the rule a submitted job's values get) and declines the row at the first
 *         value the rule refuses; and only rectangular arrays of the input's rank and fixed dims.
 *         It writes past the columns' committed length, so a row it declines half-way leaves
 *         nothing behind.
 *   slow  anything else (a bad row, or a valid one the walk declines: a ragged or nested one)
 *         is rebuilt as plain values and passed to validateInferRequest
 *         (infra/contracts/oip-validate.ts), the rules and words a submitted job gets; a row it
 *         accepts is filled from its checked values (`settle`).
 * A model without dynamic row dims has one group and never computes a shape key.
 */

import { type BulkColumns, type ChunkBadRow, type ChunkRows, MAX_CHUNK_BAD_SAMPLES, type RowGroup } from '../contracts/bulk.ts';
import {
  DATATYPE_INFO,
  type Datatype,
  type ElementWriter,
  elementWriter,
  type Kind,
  newElements,
  type PackedArray,
} from '../contracts/datatypes.ts';
import type { ModelManifest, TensorSpec } from '../contracts/manifest.ts';
import { validateInferRequest } from '../contracts/oip-validate.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import type { OwnedLine } from './line-range.ts';

/** One line a chunk owns, as line-range.ts reads it: its text without the newline. */
export type SourceLine = OwnedLine;

/** Reads one non-blank line into the table (a row or a bad row). */
export type LineParser = (line: SourceLine, text: string) => void;

export type Value = number | boolean | string;
export type { Kind } from '../contracts/datatypes.ts';

type Store = PackedArray | string[];

/** Where an input's values come from in a line. */
export interface InputPlan {
  spec: TensorSpec;
  kind: Kind;
  /** spec.shape without the batch axis. */
  rowDims: number[];
  dynamic: boolean;
  /** JSONL keys: one → the input's row; several → one scalar feature each. */
  keys: string[];
  /** CSV cell indices (features, in order); absent: every cell after the id (positional). */
  cells?: number[];
  /** Row dims when a fixed number of scalar features fills the row (several keys, CSV cells). */
  features?: number[];
}

/** Good rows in their shape groups, and the bad ones counted and sampled. */
export class RowTable {
  readonly ids: Array<string | number> = [];
  /** Scratch row dims per input, for the row being read. */
  readonly dims: number[][];
  lines = 0;
  private readonly groups: Group[] = [];
  private readonly byKey = new Map<string, Group>();
  private readonly dynamic: boolean;
  private readonly bad: ChunkBadRow[] = [];
  private badRows = 0;
  private last: Group | undefined;

  constructor(readonly plans: readonly InputPlan[]) {
    this.dynamic = plans.some((p) => p.dynamic);
    this.dims = plans.map((p) => new Array<number>(p.rowDims.length).fill(0));
  }

  /** The group for rows of these dims (per input): the last one used when they match, without a key when no dim is dynamic. */
  group(dims: readonly number[][] = this.dims): Group {
    const last = this.last;
    if (last && (!this.dynamic || sameDims(last.dims, dims))) return last;
    const key = this.dynamic ? dims.map((d) => d.join('x')).join('|') : '';
    let group = this.byKey.get(key);
    if (!group) {
      const copy = dims.map((d) => [...d]);
      group = { dims: copy, rows: [], columns: this.plans.map((p, i) => newColumn(p.spec.datatype, product(copy[i] as number[]))) };
      this.byKey.set(key, group);
      this.groups.push(group);
    }
    this.last = group;
    return group;
  }

  /** The row just filled past each column's length becomes a row of `group`. */
  commit(group: Group, id: string | number): void {
    group.rows.push(this.ids.length);
    this.ids.push(id);
    for (const c of group.columns) c.length += c.size;
  }

  reject(line: SourceLine, message: string): void {
    this.badRows++;
    if (this.bad.length < MAX_CHUNK_BAD_SAMPLES) this.bad.push({ line: line.line, byte: line.byte, message });
  }

  /** A row the fast walk declined: rebuilt by today's rules (or already known bad), checked, then filled or rejected. */
  settle(line: SourceLine, row: SlowRow | string): void {
    const checked = typeof row === 'string' ? row : checkRow(row, this.plans);
    if (typeof checked === 'string') {
      this.reject(line, checked);
      return;
    }
    const group = this.group(checked.tensors.map((t) => t.dims));
    group.columns.forEach((c, i) => {
      reserve(c);
      const data = (checked.tensors[i] as SlowTensor).data;
      for (let k = 0; k < data.length; k++) putChecked(c, c.length + k, data[k] as Value);
    });
    this.commit(group, checked.id);
  }

  result(): ChunkRows {
    // A group is made before its first row's values are checked, so one may have stayed empty.
    const filled = this.groups.filter((g) => g.rows.length > 0);
    return {
      ids: this.ids,
      groups: filled.map((g) => groupTensors(g, this.plans)),
      badRows: this.badRows,
      bad: this.bad,
      lines: this.lines,
    };
  }
}

// ---------------------------------------------------------------------------------------------
// Typed columns
// ---------------------------------------------------------------------------------------------

export interface Column {
  kind: Kind;
  datatype: Datatype;
  /** The datatype's rule as a typed write (datatypes.ts). */
  write: ElementWriter;
  /** Elements of one row in this group. */
  size: number;
  data: Store;
  /** Elements committed. */
  length: number;
  /** Elements the typed array holds (strings: unbounded, they append). */
  capacity: number;
}

export interface Group {
  /** Row dims per input. */
  dims: number[][];
  rows: number[];
  columns: Column[];
}

function newColumn(datatype: Datatype, size: number): Column {
  const kind = DATATYPE_INFO[datatype].kind;
  const capacity = Math.max(1024, size * 64);
  const data = kind === 'bytes' ? [] : newElements(datatype, capacity);
  const write = elementWriter(datatype);
  return { kind, datatype, write, size, data, length: 0, capacity: kind === 'bytes' ? Number.POSITIVE_INFINITY : capacity };
}

/** Room for one more row: typed arrays grow by doubling (strings append as they come). */
export function reserve(column: Column): void {
  if (column.length + column.size <= column.capacity) return;
  const data = column.data;
  if (Array.isArray(data)) return;
  const grown = new (data.constructor as new (n: number) => PackedArray)(Math.max(data.length * 2, column.length + column.size));
  (grown as Uint8Array).set(data as Uint8Array);
  column.data = grown;
  column.capacity = grown.length;
}

function groupTensors(group: Group, plans: readonly InputPlan[]): RowGroup {
  const rows = group.rows.length;
  const inputs = group.columns.map((c, i) => {
    const spec = (plans[i] as InputPlan).spec;
    const data = Array.isArray(c.data) ? c.data.slice(0, c.length) : (c.data as PackedArray).subarray(0, c.length);
    return { name: spec.name, datatype: spec.datatype, shape: [rows, ...(group.dims[i] as number[])], data };
  });
  return { rows: group.rows, inputs };
}

// ---------------------------------------------------------------------------------------------
// The fast walk: values into a column past its length; false when it declines
// ---------------------------------------------------------------------------------------------

/** Values of one innermost array into `out` at `at`; false on the first value the datatype's rule refuses. */
export function fillFlat(values: ArrayLike<unknown>, n: number, column: Column, at: number): boolean {
  const { data, write } = column;
  for (let i = 0; i < n; i++) if (!write(data, at + i, values[i])) return false;
  return true;
}

/** A nested array of `dims` (already measured along its first elements), checked rectangular while filled. */
export function fillNested(value: unknown, dims: readonly number[], depth: number, column: Column, at: number): boolean {
  if (!Array.isArray(value) || value.length !== dims[depth]) return false;
  if (depth === dims.length - 1) return fillFlat(value, value.length, column, at);
  let step = 1;
  for (let d = depth + 1; d < dims.length; d++) step *= dims[d] as number;
  for (let i = 0; i < value.length; i++) {
    if (!fillNested(value[i], dims, depth + 1, column, at + i * step)) return false;
  }
  return true;
}

/**
 * A JSON row value's dims measured along first elements into `out` (its rank = the input's row
 * rank); false when it cannot be a row of the input by that measure (the slow path says why).
 * A scalar fills a one-element row.
 */
export function measure(value: unknown, plan: InputPlan, out: number[]): boolean {
  const rank = plan.rowDims.length;
  if (!Array.isArray(value)) {
    if (!isOneElement(plan.rowDims)) return false;
    for (let d = 0; d < rank; d++) out[d] = 1;
    return true;
  }
  let cur: unknown = value;
  for (let d = 0; d < rank; d++) {
    if (!Array.isArray(cur)) return false;
    const want = plan.rowDims[d] as number;
    if (want >= 0 && cur.length !== want) return false;
    out[d] = cur.length;
    if (cur.length === 0) return d === rank - 1;
    cur = cur[0];
  }
  return !Array.isArray(cur);
}

export function isOneElement(rowDims: readonly number[]): boolean {
  return rowDims.every((d) => d === 1);
}

/** Row dims of `count` scalar features: the spec's, one dynamic dim taken from the count. */
export function featureDims(dims: readonly number[], count: number): number[] {
  let fixed = 1;
  for (const d of dims) if (d >= 0) fixed *= d;
  return dims.map((d) => (d < 0 ? Math.floor(count / Math.max(1, fixed)) : d));
}

export function product(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

/** One scalar or a flat array of them (several keys' values) into the column's next row. */
export function fillScalars(value: unknown, c: Column): boolean {
  if (!Array.isArray(value)) return fillFlat([value], 1, c, c.length);
  for (const v of value) if (Array.isArray(v)) return false;
  return fillFlat(value, value.length, c, c.length);
}

export function copyInto(out: number[], dims: readonly number[]): void {
  for (let d = 0; d < dims.length; d++) out[d] = dims[d] as number;
}

function sameDims(a: readonly number[][], b: readonly number[][]): boolean {
  for (let i = 0; i < a.length; i++) {
    const x = a[i] as number[];
    const y = b[i] as number[];
    for (let d = 0; d < x.length; d++) if (x[d] !== y[d]) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The slow path: plain values through validateInferRequest, then a checked fill
// ---------------------------------------------------------------------------------------------

export interface SlowTensor {
  dims: number[];
  data: Value[];
}

export interface SlowRow {
  id: string | number;
  tensors: SlowTensor[];
}

/** A row rebuilt as plain values through validateInferRequest: the row, or the message why it is bad. */
function checkRow(row: SlowRow, plans: readonly InputPlan[]): SlowRow | string {
  const inputs = plans.map((p, i) => {
    const t = row.tensors[i] as SlowTensor;
    return { name: p.spec.name, datatype: p.spec.datatype, shape: [1, ...t.dims], data: t.data };
  });
  // validateInferRequest reads the manifest's outputs only when the body names outputs; this one names none.
  // A row is already in row layout, wherever the model keeps its batch axis: checked as such.
  const manifest = { inputs: plans.map(({ spec: { batchAxis: _, ...spec } }) => spec), outputs: [] } as unknown as ModelManifest;
  try {
    validateInferRequest({ inputs }, manifest);
  } catch (err) {
    if (err instanceof InvalidInputError) return err.message;
    throw err;
  }
  return row;
}

/** A checked value into a typed slot (validateInferRequest has accepted it, by the same rule). */
function putChecked(column: Column, at: number, v: Value): void {
  column.write(column.data, at, v);
}

// ---------------------------------------------------------------------------------------------
// Plans: which values feed which input (checked once: errors that would make every row bad throw)
// ---------------------------------------------------------------------------------------------

export function basePlan(spec: TensorSpec): Omit<InputPlan, 'keys'> {
  const rowDims = spec.shape.slice(1);
  return { spec, kind: DATATYPE_INFO[spec.datatype].kind, rowDims, dynamic: rowDims.some((d) => d < 0) };
}

/** Several scalar features fill a row only when at most one of its dims is dynamic. */
export function checkFeatureShape(spec: TensorSpec, what: string): void {
  if (spec.shape.slice(1).filter((d) => d < 0).length > 1) {
    throw new InvalidInputError(
      'csv_shape',
      `${what} cannot carry input "${spec.name}" with several dynamic dimensions; give it one column of nested arrays (JSONL)`,
    );
  }
}

/** The row dims `count` features make; throws when they cannot make a row (every row would be bad). */
export function fixedFeatures(spec: TensorSpec, count: number, what: string): number[] {
  const dims = featureDims(spec.shape.slice(1), count);
  if (product(dims) !== count) {
    throw new InvalidInputError(
      'columns_shape',
      `input "${spec.name}" (row shape [${spec.shape.slice(1).join(', ')}]) cannot be filled by ${what} (${count} values)`,
    );
  }
  return dims;
}

export function checkColumns(inputs: readonly TensorSpec[], columns: BulkColumns): void {
  const names = new Set(inputs.map((s) => s.name));
  for (const [name, cols] of Object.entries(columns)) {
    if (!names.has(name)) throw new InvalidInputError('unknown_input', `columns: the model has no input "${name}"`);
    if (!Array.isArray(cols) || cols.length === 0)
      throw new InvalidInputError('invalid_columns', `columns: input "${name}" needs at least one column`);
  }
}
