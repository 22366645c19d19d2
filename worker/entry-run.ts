/**
 * Runs a queue entry's live members through the micro-batcher, so that one bad member fails
 * alone (infra/contracts/entry.ts: every member keeps its own failure).
 *
 * All live members' rows go as one piece, cut into slices of at most `maxRows` rows (views, no
 * copies: the batcher's runner concatenates or transfers them). When ONNX Runtime rejects a
 * slice (EngineRejectedError: the batcher has already bisected it out of any batch it shared
 * with other entries) and more than one member is live, each live member runs again on its own
 * — concurrently, so the batcher packs them together and bisects again — and only those
 * rejected alone fail. A rejection is an outcome; anything else (the engine lost, a bug) is
 * thrown, after every slice has settled, and the entry is retried whole.
 *
 * Timings per member: the forward passes its rows rode (inferMs summed, batchRows the largest).
 */
import type { Slice, SliceResult } from './batch-runner.ts';
import type { Batcher } from './batcher.ts';
import { EngineRejectedError, type EngineTensor } from './engine/engine.ts';
import { concatRows } from './engine/tensor-codec.ts';

export interface LiveMember {
  id: string;
  rows: number;
}

export interface MemberRun {
  /** Its first row in `RunOutcome.outputs`. */
  row: number;
  inferMs: number;
  batchRows: number;
}

export interface RunOutcome {
  /** Each output's rows of the members that ran, one member after another. */
  outputs: Record<string, EngineTensor>;
  ran: Map<string, MemberRun>;
  /** Members ONNX Runtime rejected alone, with its message. */
  rejected: Map<string, string>;
}

export interface EntryRunDeps {
  batcher: Pick<Batcher<Slice, SliceResult>, 'submit'>;
  maxRows: number;
  /** The outputs to keep. */
  outputNames: readonly string[];
}

/**
 * `inputsFor(members, keep)`: the engine tensors of those members' rows, in order; `keep` asks
 * that the source bytes survive the run (they will be needed again).
 */
export async function runMembers(
  deps: EntryRunDeps,
  live: readonly LiveMember[],
  inputsFor: (members: readonly LiveMember[], keep: boolean) => Record<string, EngineTensor>,
): Promise<RunOutcome> {
  const rows = live.reduce((n, m) => n + m.rows, 0);
  try {
    const run = await runRows(deps, inputsFor(live, live.length > 1), rows);
    const ran = new Map<string, MemberRun>();
    let row = 0;
    for (const m of live) {
      ran.set(m.id, { row, ...timingsOf(run.passes, row, row + m.rows) });
      row += m.rows;
    }
    return { outputs: run.outputs, ran, rejected: new Map() };
  } catch (err) {
    if (!(err instanceof EngineRejectedError)) throw err;
    if (live.length === 1) return { outputs: {}, ran: new Map(), rejected: new Map([[(live[0] as LiveMember).id, err.message]]) };
  }
  return runAlone(deps, live, inputsFor);
}

/** Each member on its own; the rejected ones fail. */
async function runAlone(
  deps: EntryRunDeps,
  live: readonly LiveMember[],
  inputsFor: (members: readonly LiveMember[], keep: boolean) => Record<string, EngineTensor>,
): Promise<RunOutcome> {
  const settled = await Promise.allSettled(live.map((m) => runRows(deps, inputsFor([m], false), m.rows)));
  const lost = settled.find((s) => s.status === 'rejected' && !(s.reason instanceof EngineRejectedError));
  if (lost) throw (lost as PromiseRejectedResult).reason;
  const ran = new Map<string, MemberRun>();
  const rejected = new Map<string, string>();
  const parts: Array<Record<string, EngineTensor>> = [];
  let row = 0;
  settled.forEach((s, i) => {
    const m = live[i] as LiveMember;
    if (s.status === 'rejected') {
      rejected.set(m.id, (s.reason as Error).message);
      return;
    }
    ran.set(m.id, { row, ...timingsOf(s.value.passes, 0, m.rows) });
    parts.push(s.value.outputs);
    row += m.rows;
  });
  return { outputs: concatParts(parts, deps.outputNames), ran, rejected };
}

interface Pass {
  start: number;
  end: number;
  inferMs: number;
  batchRows: number;
}

/** `rows` rows in slices of at most maxRows; rejects once every slice has settled. */
async function runRows(
  deps: EntryRunDeps,
  inputs: Record<string, EngineTensor>,
  rows: number,
): Promise<{ outputs: Record<string, EngineTensor>; passes: Pass[] }> {
  const ranges: Array<[number, number]> = [];
  for (let start = 0; start < rows; start += deps.maxRows) ranges.push([start, Math.min(rows, start + deps.maxRows)]);
  const settled = await Promise.allSettled(ranges.map(([start, end]) => deps.batcher.submit(slice(inputs, start, end, rows))));
  // The engine's loss outranks a rejection: the entry is retried whole rather than failing members.
  const failure =
    settled.find((s) => s.status === 'rejected' && !(s.reason instanceof EngineRejectedError)) ??
    settled.find((s) => s.status === 'rejected');
  if (failure) throw (failure as PromiseRejectedResult).reason;
  const results = settled.map((s) => (s as PromiseFulfilledResult<SliceResult>).value);
  const outputs = concatParts(
    results.map((r) => r.outputs),
    deps.outputNames,
  );
  const passes = results.map((r, i) => {
    const [start, end] = ranges[i] as [number, number];
    return { start, end, inferMs: r.inferMs, batchRows: r.batchRows };
  });
  return { outputs, passes };
}

/** Rows [start, end) of every input: the tensors themselves when that is all of them, else views. */
function slice(inputs: Record<string, EngineTensor>, start: number, end: number, rows: number): Slice {
  if (start === 0 && end === rows) return { inputs, rows };
  const part: Record<string, EngineTensor> = {};
  for (const [name, t] of Object.entries(inputs)) {
    const rowSize = rows === 0 ? 0 : t.data.length / rows;
    const data = Array.isArray(t.data) ? t.data.slice(start * rowSize, end * rowSize) : t.data.subarray(start * rowSize, end * rowSize);
    part[name] = { type: t.type, dims: [end - start, ...t.dims.slice(1)], data };
  }
  return { inputs: part, rows: end - start };
}

function concatParts(parts: Array<Record<string, EngineTensor>>, names: readonly string[]): Record<string, EngineTensor> {
  const out: Record<string, EngineTensor> = {};
  if (parts.length === 0) return out;
  for (const name of names) {
    const tensors = parts.map((p) => {
      const t = p[name];
      if (!t) throw new Error(`model produced no output "${name}"`);
      return t;
    });
    out[name] = tensors.length === 1 ? (tensors[0] as EngineTensor) : concatRows(tensors);
  }
  return out;
}

/** The passes that carried rows [start, end). */
function timingsOf(passes: readonly Pass[], start: number, end: number): { inferMs: number; batchRows: number } {
  let inferMs = 0;
  let batchRows = 0;
  for (const p of passes) {
    if (p.end <= start || p.start >= end) continue;
    inferMs += p.inferMs;
    batchRows = Math.max(batchRows, p.batchRows);
  }
  return { inferMs: Math.round(inferMs * 1000) / 1000, batchRows };
}
