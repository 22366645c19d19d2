/**
 * CSV lines → rows of a RowTable. With a header (its cells, passed by the driver; the chunk at
 * byte 0 skips the line itself) columns are found by name: the id by `idColumn`, inputs by
 * `columns`, else the column named like each input, else — single input — every other column in
 * order, one scalar feature each. Without one: the id first, then the single input's values
 * row-major, one dynamic dim taken from the column count. Quoted fields ("a,b", "say ""hi""")
 * as RFC 4180; cells converted as row-reader.ts did (BOOL as true/false/1/0, BYTES as is,
 * integers past 2^53 kept exact). A mapping that would make every row bad throws at creation.
 */
import type { BulkColumns } from '../contracts/bulk.ts';
import type { TensorSpec } from '../contracts/manifest.ts';
import type { Datatype } from '../contracts/oip.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import {
  basePlan,
  type Column,
  checkColumns,
  checkFeatureShape,
  copyInto,
  featureDims,
  fillFlat,
  fixedFeatures,
  type InputPlan,
  type LineParser,
  product,
  type RowTable,
  reserve,
  type SlowRow,
  type SlowTensor,
  type Value,
} from './row-table.ts';

export interface CsvOptions {
  columns?: BulkColumns;
  idColumn: string;
  /** The object's header cells, when its first line is a header. */
  header?: string[];
  /** The line at byte 0 is skipped when it is the header (`header` given, or its first cell names the id column). */
  skipFirstLineIfHeader: boolean;
}

export function csvPlans(inputs: readonly TensorSpec[], options: CsvOptions): InputPlan[] {
  const { header, columns } = options;
  if (columns) checkColumns(inputs, columns);
  if (!header) {
    if (columns) throw new InvalidInputError('csv_needs_header', 'columns name CSV columns, but this CSV has no header line');
    const spec = inputs[0];
    if (inputs.length !== 1 || !spec) {
      throw new InvalidInputError(
        'csv_needs_single_input',
        'CSV input needs a single-input model (or a header and columns for each input)',
      );
    }
    checkFeatureShape(spec, 'CSV');
    return [{ ...basePlan(spec), keys: [] }];
  }
  const idCell = findCell(header, options.idColumn);
  const byName = (name: string): number => {
    const at = findCell(header, name);
    if (at < 0) throw new InvalidInputError('csv_missing_column', `column "${name}" is not in the CSV header (${header.join(', ')})`);
    return at;
  };
  if (idCell < 0) byName(options.idColumn);
  const all = inputs.every((s) => columns?.[s.name] || findCell(header, s.name) >= 0);
  if (!all && inputs.length !== 1) {
    throw new InvalidInputError(
      'csv_needs_single_input',
      `a CSV for a model with several inputs needs columns for each (the header has no column for ${inputs
        .filter((s) => !columns?.[s.name] && findCell(header, s.name) < 0)
        .map((s) => `"${s.name}"`)
        .join(', ')})`,
    );
  }
  return inputs.map((spec) => {
    const named = columns?.[spec.name] ?? (findCell(header, spec.name) >= 0 ? [spec.name] : undefined);
    const cells = named ? named.map(byName) : header.map((_, i) => i).filter((i) => i !== idCell);
    checkFeatureShape(spec, 'CSV');
    const what = `the columns ${cells.map((c) => header[c]).join(', ')}`;
    return { ...basePlan(spec), keys: [], cells, features: fixedFeatures(spec, cells.length, what) };
  });
}

export function csvRows(table: RowTable, options: CsvOptions): LineParser {
  const plans = table.plans;
  const first = plans[0] as InputPlan;
  const header = options.header;
  const idCell = header ? findCell(header, options.idColumn) : 0;
  /** No header: the id, then the single input's values (their count gives a dynamic dim). */
  const positional = !header;
  /** The id first and every other cell the single input's, in order: the JSON walk below applies. */
  const restOfLine = positional || (plans.length === 1 && idCell === 0 && isRest(first.cells, header?.length ?? 0));
  const numeric = plans.length === 1 && first.kind !== 'bool' && first.kind !== 'bytes';
  const cellValues: unknown[] = [];

  /** The single input's values after the id, through the fast walk. */
  const fillRest = (id: string, values: readonly unknown[]): boolean => {
    const dims = table.dims[0] as number[];
    if (first.features) {
      if (values.length !== (first.cells as number[]).length) return false;
      copyInto(dims, first.features);
    } else {
      const fd = featureDims(first.rowDims, values.length);
      if (product(fd) !== values.length) return false;
      copyInto(dims, fd);
    }
    const group = table.group();
    const c = group.columns[0] as Column;
    reserve(c);
    if (!fillFlat(values, values.length, c, c.length)) return false;
    table.commit(group, id);
    return true;
  };

  /**
   * Numeric rows of the id and then the values, no quote in them: the values parse as one JSON
   * array (V8's parser beats a split and a Number() per cell); JSON numbers are a subset of what
   * Number() reads, to the same value, and anything else declines to the cell-by-cell path.
   */
  const fast = (text: string): boolean => {
    if (!restOfLine || !numeric || text.charCodeAt(0) === 34) return false;
    const comma = text.indexOf(',');
    if (comma < 0 || text.indexOf('"', comma) >= 0) return false;
    const id = text.slice(0, comma).trim();
    if (id === '') return false;
    let values: unknown;
    try {
      values = JSON.parse(`[${text.slice(comma + 1)}]`);
    } catch {
      return false;
    }
    return fillRest(id, values as unknown[]);
  };

  /** Cells converted as today (quoted cells, BOOL words, BYTES), then the fast walk. */
  const cellsFast = (cells: readonly string[]): boolean => {
    const id = (cells[idCell] ?? '').trim();
    if (id === '') return false;
    if (positional) {
      cellValues.length = cells.length - 1;
      for (let k = 1; k < cells.length; k++) cellValues[k - 1] = csvValue(first.spec.datatype, cells[k] as string);
      return fillRest(id, cellValues);
    }
    if (cells.length !== (header as string[]).length) return false;
    for (let i = 0; i < plans.length; i++) copyInto(table.dims[i] as number[], (plans[i] as InputPlan).features as number[]);
    const group = table.group();
    for (let i = 0; i < plans.length; i++) {
      const at = (plans[i] as InputPlan).cells as number[];
      const c = group.columns[i] as Column;
      cellValues.length = at.length;
      for (let k = 0; k < at.length; k++) cellValues[k] = csvValue(c.datatype, cells[at[k] as number] as string);
      reserve(c);
      if (!fillFlat(cellValues, at.length, c, c.length)) return false;
    }
    table.commit(group, id);
    return true;
  };

  /** Today's CSV rules for a row the walk declined. */
  const slow = (cells: readonly string[]): SlowRow | string => {
    if (positional) {
      const dims = featureDims(first.rowDims, cells.length - 1);
      const width = product(dims);
      if (cells.length !== width + 1) return `expected ${width + 1} columns (id + ${width} values), got ${cells.length}`;
      const id = (cells[0] as string).trim();
      if (id === '') return `missing "${options.idColumn}" (the first column)`;
      const data = cellData(first, cells, range(1, cells.length));
      return typeof data === 'string' ? data : { id, tensors: [{ dims, data }] };
    }
    const width = (header as string[]).length;
    if (cells.length !== width) return `expected ${width} columns (as the header), got ${cells.length}`;
    const id = (cells[idCell] as string).trim();
    if (id === '') return `missing "${options.idColumn}" (column ${idCell + 1})`;
    const tensors: SlowTensor[] = [];
    for (const p of plans) {
      const data = cellData(p, cells, p.cells as number[]);
      if (typeof data === 'string') return data;
      tensors.push({ dims: p.features as number[], data });
    }
    return { id, tensors };
  };

  return (line, raw) => {
    const text = raw.charCodeAt(raw.length - 1) === 13 ? raw.slice(0, -1) : raw;
    if (line.byte === 0 && options.skipFirstLineIfHeader && (header !== undefined || isHeaderLine(text, options.idColumn))) return;
    if (fast(text)) return;
    const cells = text.indexOf('"') < 0 ? text.split(',') : splitCsv(text);
    if (!cells) table.reject(line, 'unbalanced quotes');
    else if (!cellsFast(cells)) table.settle(line, slow(cells));
  };
}

/** An input's cells as today's values, or the message naming the first that is not one. */
function cellData(p: InputPlan, cells: readonly string[], at: readonly number[]): Value[] | string {
  const data: Value[] = [];
  for (const k of at) {
    const v = csvValue(p.spec.datatype, cells[k] as string);
    if (v === undefined) return `column ${k + 1}: ${JSON.stringify(cells[k])} is not a ${p.spec.datatype} value`;
    data.push(v);
  }
  return data;
}

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from }, (_, i) => from + i);
}

/** Cells 1..width-1 in order. */
function isRest(cells: readonly number[] | undefined, width: number): boolean {
  return cells !== undefined && cells.length === width - 1 && cells.every((c, i) => c === i + 1);
}

/** A header cell's index: the exact name, else the name case-insensitively; -1 when absent. */
function findCell(header: readonly string[], name: string): number {
  const exact = header.findIndex((h) => h.trim() === name);
  if (exact >= 0) return exact;
  const lower = name.toLowerCase();
  return header.findIndex((h) => h.trim().toLowerCase() === lower);
}

/** Today's header rule for an object the driver passed no header for: the first cell is the id column's name. */
function isHeaderLine(text: string, idColumn: string): boolean {
  const cells = splitCsv(text);
  return cells?.[0]?.trim().toLowerCase() === idColumn.toLowerCase();
}

/** A CSV cell as today: BYTES as is; BOOL true/false/1/0; numbers, with integers past 2^53 kept as decimal strings. */
function csvValue(datatype: Datatype, cell: string): Value | undefined {
  if (datatype === 'BYTES') return cell;
  const t = cell.trim();
  if (datatype === 'BOOL') return t === 'true' || t === '1' ? true : t === 'false' || t === '0' ? false : undefined;
  if (t === '') return undefined;
  const n = Number(t);
  if (!Number.isFinite(n)) return undefined;
  if (!Number.isSafeInteger(n) && /^-?\d+$/.test(t)) return t;
  return n;
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
