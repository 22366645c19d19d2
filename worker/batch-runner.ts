/**
 * One forward pass over many jobs' rows: concatenate each input along axis 0, collapse
 * identical rows, run, copy each distinct row's outputs back to its duplicates, and split each
 * output by the rows each slice brought. This is the `run` the micro-batcher calls; neither the
 * batcher nor the intake knows rows were collapsed.
 *
 * Collapsing (request collapsing, issue 3 §7): rows equal in every input, byte for byte
 * (worker/duplicate-rows.ts), run once. Popular inputs sent by many clients at once then cost
 * one row of compute, and the answer is the one each would have got alone, as long as the
 * model treats rows independently — which batching strangers' rows together already assumes.
 *
 * Shapes: rows concatenate only when every input agrees beyond axis 0. On a model with a dynamic
 * non-batch axis (a sequence length) jobs of different lengths land in one batch; each group of
 * one shape then runs as a forward pass of its own, in turn, rather than failing the batch
 * (which the worker would take for a lost engine).
 *
 * One value a pass: an input with no batch axis (a VAD's `sr`, batch-axes.ts) reaches the model
 * once per pass, so rows that carry other values of it never share one. Slices are cut where
 * their rows' values change (a coalesced entry or a bulk chunk may hold several), grouped by
 * value as by shape, and each slice's outputs put back together in its rows' order.
 */

import { findDuplicateRows } from './duplicate-rows.ts';
import type { EngineTensor, InferenceEngine } from './engine/engine.ts';
import { concatRows, gatherRows, sliceRows, splitRows } from './engine/tensor-codec.ts';

/** A job's rows (or a slice of a big job's rows) as engine tensors, by input name. */
export interface Slice {
  inputs: Record<string, EngineTensor>;
  rows: number;
}

export interface SliceResult {
  outputs: Record<string, EngineTensor>;
  /** Wall time of the forward pass that carried this slice. */
  inferMs: number;
  /** Rows the engine ran in that forward pass (after collapsing). */
  batchRows: number;
}

export interface BatchEvent {
  /** Rows the slices brought. */
  rows: number;
  /** Rows the engine ran: `rows` less the duplicates collapsed. */
  uniqueRows: number;
  items: number;
  inferMs: number;
}

export type BatchObserver = (e: BatchEvent) => void;

/**
 * `onePerPass`: the inputs with no batch axis (the manifest's `batchAxis: 'none'`), whose rows of
 * one pass must all be equal.
 */
export function createBatchRunner(
  engine: InferenceEngine,
  inputNames: string[],
  outputNames: string[],
  observe?: BatchObserver,
  onePerPass: readonly string[] = [],
): (slices: Slice[], rows: number) => Promise<SliceResult[]> {
  const runGroup = async (slices: Slice[], rows: number): Promise<SliceResult[]> => {
    const batch = collapse(concatInputs(slices, inputNames), inputNames, rows);
    const started = performance.now();
    const outputs = await engine.run(batch.feeds, outputNames);
    const inferMs = performance.now() - started;
    observe?.({ rows, uniqueRows: batch.rows, items: slices.length, inferMs });

    const rowCounts = slices.map((s) => s.rows);
    const perSlice: Array<Record<string, EngineTensor>> = slices.map(() => ({}));
    for (const name of outputNames) {
      const out = outputs[name];
      if (!out) throw new Error(`model produced no output "${name}"`);
      if (out.dims[0] !== batch.rows) {
        throw new Error(`output "${name}" has ${out.dims[0]} rows for ${batch.rows} input rows: its first axis is not the batch axis`);
      }
      const full = batch.sourceOf ? gatherRows(out, batch.sourceOf) : out;
      splitRows(full, rowCounts).forEach((part, i) => {
        (perSlice[i] as Record<string, EngineTensor>)[name] = part;
      });
    }
    return perSlice.map((o) => ({ outputs: o, inferMs, batchRows: batch.rows }));
  };
  const runGroups = async (slices: Slice[], rows: number): Promise<SliceResult[]> => {
    const groups = groupByShape(slices, inputNames, onePerPass);
    if (groups.length === 1) return runGroup(slices, rows);
    const results: SliceResult[] = new Array(slices.length);
    for (const group of groups) {
      const members = group.map((i) => slices[i] as Slice);
      const answers = await runGroup(
        members,
        members.reduce((n, s) => n + s.rows, 0),
      );
      group.forEach((i, k) => {
        results[i] = answers[k] as SliceResult;
      });
    }
    return results;
  };
  if (onePerPass.length === 0) return runGroups;
  return async (slices, rows) => {
    if (slices.length === 1 && rows === 1) return runGroups(slices, rows);
    const cut = cutByValue(slices, onePerPass);
    if (!cut) return runGroups(slices, rows);
    const answers = await runGroups(cut.parts, rows);
    return slices.map((_, i) =>
      rejoin(
        answers.filter((__, k) => cut.owner[k] === i),
        outputNames,
      ),
    );
  };
}

/** Indices of the slices, grouped by their inputs' types and dims beyond axis 0 (and the values of `onePerPass`), in first-seen order. */
function groupByShape(slices: Slice[], inputNames: string[], onePerPass: readonly string[]): number[][] {
  const groups = new Map<string, number[]>();
  slices.forEach((s, i) => {
    const shapes = inputNames.map((n) => `${s.inputs[n]?.type}:${s.inputs[n]?.dims.slice(1).join('x')}`).join('|');
    const key = onePerPass.length === 0 ? shapes : `${shapes}|${onePerPass.map((n) => rowValue(s.inputs[n] as EngineTensor, 0)).join('|')}`;
    const group = groups.get(key);
    if (group) group.push(i);
    else groups.set(key, [i]);
  });
  return [...groups.values()];
}

function concatInputs(slices: Slice[], inputNames: string[]): Record<string, EngineTensor> {
  const feeds: Record<string, EngineTensor> = {};
  for (const name of inputNames) {
    const parts = slices.map((s) => s.inputs[name]);
    if (parts.some((p) => p === undefined)) throw new Error(`input "${name}" missing from a slice`);
    feeds[name] = parts.length === 1 ? (parts[0] as EngineTensor) : concatRows(parts as EngineTensor[]);
  }
  return feeds;
}

/**
 * The feeds with each distinct row once, and for every original row the index of its distinct
 * row (null when there were no duplicates: the feeds are passed on untouched).
 */
function collapse(
  feeds: Record<string, EngineTensor>,
  inputNames: string[],
  rows: number,
): { feeds: Record<string, EngineTensor>; rows: number; sourceOf: Int32Array | null } {
  if (rows < 2) return { feeds, rows, sourceOf: null };
  const { unique, sourceOf } = findDuplicateRows(
    inputNames.map((n) => feeds[n] as EngineTensor),
    rows,
  );
  if (unique.length === rows) return { feeds, rows, sourceOf: null };
  const distinct: Record<string, EngineTensor> = {};
  for (const name of inputNames) distinct[name] = gatherRows(feeds[name] as EngineTensor, unique);
  return { feeds: distinct, rows: unique.length, sourceOf };
}

/**
 * Each slice cut into runs of rows that agree on every `onePerPass` input, and the slice each
 * part came from; undefined when no slice needs a cut (the common case: one value throughout).
 */
function cutByValue(slices: Slice[], onePerPass: readonly string[]): { parts: Slice[]; owner: number[] } | undefined {
  const parts: Slice[] = [];
  const owner: number[] = [];
  let cuts = 0;
  slices.forEach((s, i) => {
    let start = 0;
    for (let r = 1; r <= s.rows; r++) {
      if (r < s.rows && onePerPass.every((n) => sameRow(s.inputs[n] as EngineTensor, r, r - 1))) continue;
      parts.push(start === 0 && r === s.rows ? s : sliceOf(s, start, r));
      owner.push(i);
      if (r < s.rows) cuts++;
      start = r;
    }
  });
  return cuts === 0 ? undefined : { parts, owner };
}

function sliceOf(s: Slice, start: number, end: number): Slice {
  const inputs: Record<string, EngineTensor> = {};
  for (const [name, t] of Object.entries(s.inputs)) inputs[name] = sliceRows(t, start, end);
  return { inputs, rows: end - start };
}

/** A slice's outputs from its parts, in order; the passes' times summed, the largest pass kept. */
function rejoin(parts: SliceResult[], outputNames: readonly string[]): SliceResult {
  if (parts.length === 1) return parts[0] as SliceResult;
  const outputs: Record<string, EngineTensor> = {};
  for (const name of outputNames) outputs[name] = concatRows(parts.map((p) => p.outputs[name] as EngineTensor));
  return {
    outputs,
    inferMs: parts.reduce((n, p) => n + p.inferMs, 0),
    batchRows: Math.max(...parts.map((p) => p.batchRows)),
  };
}

function rowSize(t: EngineTensor): number {
  const rows = t.dims[0] ?? 1;
  return rows === 0 ? 0 : t.data.length / rows;
}

function sameRow(t: EngineTensor, a: number, b: number): boolean {
  const size = rowSize(t);
  for (let i = 0; i < size; i++) if (t.data[a * size + i] !== t.data[b * size + i]) return false;
  return true;
}

/** Row `r`'s values as a key: JSON, so strings with separators in them stay apart. */
function rowValue(t: EngineTensor, r: number): string {
  const size = rowSize(t);
  const row = Array.isArray(t.data)
    ? t.data.slice(r * size, (r + 1) * size)
    : Array.from(t.data.subarray(r * size, (r + 1) * size) as ArrayLike<unknown>, String);
  return JSON.stringify(row);
}
