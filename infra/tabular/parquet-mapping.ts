/**
 * Parquet columns → model inputs: which columns feed which input, as BulkColumns says
 * (contracts/bulk.ts) or by name, and the row dims they make. Apart from reading rows
 * (parquet-input.ts) because it is decided from the footer's columns alone, before a page is
 * read, and fails the whole file (InvalidInputError, 422) rather than a row: a missing column,
 * a column whose type can never be the input's datatype, a shape no column set can fill.
 */
import type { BulkColumns } from '../contracts/bulk.ts';
import type { Datatype } from '../contracts/datatypes.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import type { ParquetColumn } from './parquet-layout.ts';

/** A model input as the mapping sees it (a manifest's TensorSpec: shape[0] is the batch axis). */
export interface InputSpec {
  name: string;
  datatype: Datatype;
  shape: number[];
}

/** Which columns feed the inputs: the run's BulkColumns, and the id column every row needs. */
export interface ColumnMapping {
  columns?: BulkColumns;
  idColumn: string;
}

/** Columns named in an error before "and N more". */
const NAMED_COLUMNS = 40;

/** How one input is fed: one column per feature (scalars), or one list column holding the row. */
export interface InputPlan {
  spec: InputSpec;
  columns: ParquetColumn[];
  /** Row dims when every row has the same (scalar columns); a list column's vary per row. */
  dims?: number[];
}

export function mapColumns(columns: ParquetColumn[], inputs: readonly InputSpec[], options: ColumnMapping, key: string): InputPlan[] {
  const byName = new Map(columns.map((c) => [c.name, c]));
  const missing = (what: string) =>
    new InvalidInputError('missing_columns', `${key}: ${what}; the file has columns ${columnList(columns)}`, { status: 422 });
  if (!byName.has(options.idColumn)) throw missing(`no id column "${options.idColumn}"`);
  return inputs.map((spec) => {
    const given = options.columns?.[spec.name];
    let names: string[];
    if (given) names = given;
    else if (byName.has(spec.name)) names = [spec.name];
    else if (inputs.length === 1) {
      names = columns.filter((c) => c.numeric && c.name !== options.idColumn).map((c) => c.name);
      if (names.length === 0) throw missing(`no column "${spec.name}" and no numeric column to use as features`);
    } else throw missing(`no column "${spec.name}" for input "${spec.name}"`);
    const absent = names.filter((n) => !byName.has(n));
    if (absent.length > 0) throw missing(`no column ${absent.map((n) => `"${n}"`).join(', ')} for input "${spec.name}"`);
    const plan = names.map((n) => byName.get(n) as ParquetColumn);
    for (const c of plan) checkColumnType(c, spec, key);
    return planInput(spec, plan, key);
  });
}

function planInput(spec: InputSpec, columns: ParquetColumn[], key: string): InputPlan {
  const rowDims = spec.shape.slice(1);
  const first = columns[0] as ParquetColumn;
  if (columns.length === 1 && first.listDepth > 0) {
    if (first.listDepth === rowDims.length || first.listDepth === 1) return { spec, columns };
    throw new InvalidInputError(
      'column_shape',
      `${key}: column "${first.name}" nests lists ${first.listDepth} deep; input "${spec.name}" takes rows of rank ${rowDims.length}`,
      { status: 422 },
    );
  }
  const nested = columns.find((c) => c.listDepth > 0);
  if (nested) {
    throw new InvalidInputError(
      'column_shape',
      `${key}: column "${nested.name}" is a list; several columns for input "${spec.name}" must each be one scalar feature`,
      { status: 422 },
    );
  }
  const dims = fitDims(rowDims, columns.length);
  if (!dims) {
    throw new InvalidInputError(
      'column_shape',
      `${key}: input "${spec.name}" takes rows of [${rowDims.join(', ')}]; ${columns.length} scalar column(s) cannot fill one`,
      { status: 422 },
    );
  }
  return { spec, columns, dims };
}

/** A column whose values can never be the input's datatype fails the file, not each row. */
function checkColumnType(column: ParquetColumn, spec: InputSpec, key: string): void {
  const strings = column.type === 'BYTE_ARRAY' && column.logicalType !== 'DECIMAL';
  const numbers =
    ['INT32', 'INT64', 'FLOAT', 'DOUBLE'].includes(column.type) || column.logicalType === 'FLOAT16' || column.logicalType === 'DECIMAL';
  const dated = ['DATE', 'TIME', 'TIMESTAMP', 'TIMESTAMP_MILLIS', 'TIMESTAMP_MICROS', 'INTERVAL'].includes(column.logicalType ?? '');
  const ok =
    spec.datatype === 'BYTES' ? strings : spec.datatype === 'BOOL' ? column.type === 'BOOLEAN' || (numbers && !dated) : numbers && !dated;
  if (!ok) {
    const what = column.logicalType ? `${column.type} (${column.logicalType})` : column.type;
    throw new InvalidInputError(
      'column_type',
      `${key}: column "${column.name}" holds ${what}; input "${spec.name}" takes ${spec.datatype}`,
      {
        status: 422,
      },
    );
  }
}

/** Row dims holding `count` elements: the spec's, one dynamic dim taken from the count; undefined when none fits. */
export function fitDims(rowDims: readonly number[], count: number): number[] | undefined {
  const fixed = rowDims.filter((d) => d >= 0).reduce((n, d) => n * d, 1);
  const dynamic = rowDims.filter((d) => d < 0).length;
  if (dynamic === 0) return fixed === count ? [...rowDims] : undefined;
  if (dynamic > 1) return rowDims.every((d) => d < 0 || d === 1) && count === 1 ? rowDims.map(() => 1) : undefined;
  if (fixed === 0 || count % fixed !== 0) return undefined;
  return rowDims.map((d) => (d < 0 ? count / fixed : d));
}

function columnList(columns: ParquetColumn[]): string {
  const named = columns.slice(0, NAMED_COLUMNS).map((c) => `"${c.name}"`);
  const more = columns.length - named.length;
  return `${named.join(', ')}${more > 0 ? ` and ${more} more` : ''}`;
}
