/**
 * Where a tensor's batch axis sits in the model's own layout (issue 30's batching plan), and the
 * two conversions between that layout and warmpool's row layout.
 *
 * Inside warmpool every tensor is in row layout: its first axis is the rows (a manifest's
 * `shape[0]` is -1), so queue entries, micro-batches, duplicate-row collapsing, result slicing,
 * the cache and bulk parts all cut along axis 0. A model that keeps its batch elsewhere says so
 * per tensor with `batchAxis` (TensorSpec, PackedSpec):
 * - absent (or 0): the model's layout is the row layout (every model before the plan);
 * - `k` ≥ 1: the model has the rows on axis k (a recurrent state `[layers, N, hidden]`, k = 1);
 *   the row layout moves that axis to the front;
 * - `'none'`: the tensor has no batch axis (a scalar `sr`, a fixed-shape input). In row layout it
 *   is repeated once per row, so it rides through everything as any other input does; the rows of
 *   one forward pass all carry the same value (the batch runner keeps rows with other values out
 *   of the pass) and the model gets it once. A model whose every tensor is `'none'` runs one
 *   request a pass (`batching.fixedBatch: 1`): its one row is the whole request.
 *
 * The conversions happen at the two edges only: the API's request validation (model → row
 * layout, oip-validate.ts), the rows the API shows a caller (row → model layout,
 * packed-tensors.ts's rowsTensor), and the worker's feed to ONNX Runtime and back
 * (worker/engine/planned-engine.ts). Pure, no I/O.
 */

/** A tensor's batch axis in the model's layout: an axis ≥ 1, or none. Absent means axis 0. */
export type BatchAxis = number | 'none';

/** Elements of a tensor: a typed array, strings, or JSON values as sent. */
export type LayoutData = ArrayLike<unknown> & { slice?: unknown; subarray?: unknown };

/** True when `axis` asks for a conversion (anything but axis 0). */
export function isMoved(axis: BatchAxis | undefined): axis is BatchAxis {
  return axis !== undefined && axis !== 0;
}

/**
 * The model's shape of a row-layout shape (`[rows, …rest]`): rows moved to `axis`, or dropped
 * when the tensor has none. A manifest's `[-1, 2, 128]` with axis 1 is the model's `[2, -1, 128]`.
 */
export function modelShape(rowShape: readonly number[], axis: BatchAxis | undefined): number[] {
  if (!isMoved(axis)) return [...rowShape];
  const [rows = 1, ...rest] = rowShape;
  if (axis === 'none') return rest;
  return [...rest.slice(0, axis), rows, ...rest.slice(axis)];
}

/** The row layout of a model-layout shape: its batch axis first, or `rows` put in front when it has none. */
export function rowShape(shape: readonly number[], axis: BatchAxis | undefined, rows: number): number[] {
  if (!isMoved(axis)) return [...shape];
  if (axis === 'none') return [rows, ...shape];
  return [shape[axis] as number, ...shape.slice(0, axis), ...shape.slice(axis + 1)];
}

/**
 * Data in the model's layout (shape `shape`) → row layout: axis `axis` moved to the front, or the
 * whole tensor repeated `rows` times when it has no batch axis. Returns data of the same kind
 * (a typed array of the same type, or a plain array).
 */
export function toRowLayout<D extends LayoutData>(data: D, shape: readonly number[], axis: BatchAxis | undefined, rows: number): D {
  if (!isMoved(axis)) return data;
  if (axis === 'none') return repeat(data, rows);
  const outer = product(shape.slice(0, axis));
  const n = shape[axis] as number;
  const inner = product(shape.slice(axis + 1));
  // [outer, n, inner] → [n, outer, inner]
  return permute(
    data,
    outer,
    n,
    inner,
    (o, r) => (o * n + r) * inner,
    (o, r) => (r * outer + o) * inner,
  );
}

/**
 * Data in row layout (shape `rowShape`) → the model's layout: the rows moved back to `axis`, or —
 * for a tensor with no batch axis — the first row (every row of a pass is the same value).
 */
export function toModelLayout<D extends LayoutData>(data: D, shapeInRows: readonly number[], axis: BatchAxis | undefined): D {
  if (!isMoved(axis)) return data;
  const [rows = 1, ...rest] = shapeInRows;
  if (axis === 'none') return take(data, 0, product(rest));
  const outer = product(rest.slice(0, axis));
  const inner = product(rest.slice(axis));
  // [n, outer, inner] → [outer, n, inner]
  return permute(
    data,
    outer,
    rows,
    inner,
    (o, r) => (r * outer + o) * inner,
    (o, r) => (o * rows + r) * inner,
  );
}

/** Whether every row of row-layout data (`rows` rows) is the same, element for element. */
export function rowsAlike(data: LayoutData, rows: number): boolean {
  if (rows <= 1) return true;
  const size = data.length / rows;
  for (let r = 1; r < rows; r++) {
    for (let i = 0; i < size; i++) if (!same(data[r * size + i], data[i])) return false;
  }
  return true;
}

function same(a: unknown, b: unknown): boolean {
  // NaN is refused at the edge; a float's -0 and 0 are one value to a model's arithmetic but two
  // sets of bits: compare as the engine would read them, by value.
  return a === b;
}

function product(dims: readonly number[]): number {
  let n = 1;
  for (const d of dims) n *= d;
  return n;
}

function alike<D extends LayoutData>(data: D, length: number): D {
  if (Array.isArray(data)) return new Array(length) as unknown as D;
  const Ctor = (data as unknown as { constructor: new (n: number) => D }).constructor;
  return new Ctor(length);
}

function take<D extends LayoutData>(data: D, from: number, length: number): D {
  if (Array.isArray(data)) return data.slice(from, from + length) as unknown as D;
  return (data as unknown as { slice(a: number, b: number): D }).slice(from, from + length);
}

function repeat<D extends LayoutData>(data: D, rows: number): D {
  const size = data.length;
  const out = alike(data, size * rows);
  if (!Array.isArray(out)) {
    const typed = out as unknown as { set(a: ArrayLike<unknown>, at: number): void };
    for (let r = 0; r < rows; r++) typed.set(data, r * size);
    return out;
  }
  for (let r = 0; r < rows; r++) for (let i = 0; i < size; i++) (out as unknown[])[r * size + i] = data[i];
  return out;
}

/** Copies `inner`-long blocks from `from(o, r)` to `to(o, r)` for every o < outer, r < n. */
function permute<D extends LayoutData>(
  data: D,
  outer: number,
  n: number,
  inner: number,
  from: (o: number, r: number) => number,
  to: (o: number, r: number) => number,
): D {
  const out = alike(data, outer * n * inner);
  const typed = !Array.isArray(out);
  for (let o = 0; o < outer; o++) {
    for (let r = 0; r < n; r++) {
      const src = from(o, r);
      const dst = to(o, r);
      if (typed) {
        const block = (data as unknown as { subarray(a: number, b: number): ArrayLike<unknown> }).subarray(src, src + inner);
        (out as unknown as { set(a: ArrayLike<unknown>, at: number): void }).set(block, dst);
      } else {
        for (let i = 0; i < inner; i++) (out as unknown as unknown[])[dst + i] = data[src + i];
      }
    }
  }
  return out;
}
