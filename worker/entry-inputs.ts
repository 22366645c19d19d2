/**
 * A queue entry's inputs as the worker takes them (infra/contracts/entry.ts): read in one round
 * trip with the entry's skip set, checked against the manifest before anything is built, then
 * turned into engine tensors without touching an element:
 *
 *   read     GET (as bytes) `<p>:{q}:in:<entryId>` + SMEMBERS `<p>:{q}:skip:<entryId>`, one pipeline
 *   check    names, datatypes, ranks, fixed and dynamic non-batch dims, rows = the members' sum,
 *            every member within MAX_ROWS_PER_JOB / MAX_ELEMENTS_PER_JOB and its strings (BYTES
 *            elements over its inputs, from the shapes) within MAX_BYTES_ELEMENTS_PER_JOB,
 *            requested outputs known
 *   open     each input's elements over the reply (packed-tensors `tensorData`: typed-array views
 *            after at most one copy of the whole reply, when Redis handed it back unaligned)
 *   select   the rows of the members to run: the views themselves when every member runs, else
 *            byte copies of those members' row ranges
 *
 * The values themselves were checked where they were decoded, at the API's edge; here only their
 * layout is, so a crafted entry can make its own members fail, never crash a forward pass
 * shared with others (a bad index, which no layout check sees, is ORT's rejection: entry-run.ts).
 */
import type { EntryData } from '../infra/contracts/entry.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { checkBytesElements, checkShapeBounds, type ValidateLimits } from '../infra/contracts/oip-validate.ts';
import { aligned, elementsOf, type PackedSpec, type TensorData, tensorData } from '../infra/contracts/packed-tensors.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { entryInputsKey, entrySkipKey } from '../infra/redis/keys.ts';
import type { EngineData, EngineTensor } from './engine/engine.ts';
import { datatypeToDtype, keptOnTransfer } from './engine/tensor-codec.ts';

export interface EntryRead {
  /** The packed inputs; null when the key is gone (expired, or never written). */
  bytes: Buffer | null;
  /** Members the API canceled or expired while the entry was queued. */
  skipped: ReadonlySet<string>;
}

/** Rows [start, end) of the entry's inputs. */
export interface RowRange {
  start: number;
  end: number;
}

/** An input opened over the reply: its elements for every row of the entry. */
export interface OpenedInput {
  spec: PackedSpec;
  data: TensorData;
}

export async function readEntry(redis: Pick<RedisClient, 'pipeline'>, prefix: string, queue: string, entryId: string): Promise<EntryRead> {
  const replies = await redis
    .pipeline()
    .getBuffer(entryInputsKey(prefix, queue, entryId))
    .smembers(entrySkipKey(prefix, queue, entryId))
    .exec();
  const [inputs, skips] = replies ?? [];
  const failed = [inputs, skips].find((r) => !r || r[0]);
  if (failed) throw failed[0] ?? new Error('the pipeline reading the entry got no reply');
  return { bytes: (inputs?.[1] as Buffer | null) ?? null, skipped: new Set(skips?.[1] as string[]) };
}

/** Throws InvalidInputError when the entry's layout does not fit the model or the bounds; allocates nothing. */
export function checkEntry(data: EntryData, manifest: ModelManifest, bounds: Required<ValidateLimits>): void {
  const rows = data.members.reduce((n, m) => n + m.rows, 0);
  for (const m of data.members) {
    if (!Number.isSafeInteger(m.rows) || m.rows < 1) invalid('shape_mismatch', `request ${m.id}: rows must be an integer >= 1`);
  }
  const specs = new Map<string, PackedSpec>();
  for (const spec of data.inputs) {
    if (specs.has(spec.name)) invalid('duplicate_input', `input "${spec.name}" appears more than once`);
    specs.set(spec.name, spec);
  }
  for (const want of manifest.inputs) {
    const spec = specs.get(want.name);
    if (!spec) invalid('missing_input', `missing input "${want.name}"`);
    specs.delete(want.name);
    if (spec.datatype !== want.datatype) {
      invalid('datatype_mismatch', `input "${want.name}": expected datatype ${want.datatype}, got ${String(spec.datatype)}`);
    }
    checkShape(spec, want.shape, rows);
    for (const m of data.members) checkShapeBounds(spec.name, [m.rows, ...spec.shape.slice(1)], bounds);
  }
  const unknown = [...specs.keys()][0];
  if (unknown !== undefined) invalid('unknown_input', `unknown input "${unknown}"`);
  // Before openInputs decodes a single string: each member's own, as the API counted them.
  const strings = data.inputs.filter((spec) => spec.datatype === 'BYTES');
  for (const m of strings.length > 0 ? data.members : []) {
    const count = strings.reduce((n, spec) => n + m.rows * elementsOf(spec.shape.slice(1)), 0);
    checkBytesElements(count, bounds, `request ${m.id}: its BYTES inputs`);
  }
  const outputs = new Set(manifest.outputs.map((o) => o.name));
  for (const o of data.outputs ?? []) if (!outputs.has(o.name)) invalid('unknown_output', `unknown output "${o.name}"`);
}

function checkShape(spec: PackedSpec, expected: readonly number[], rows: number): void {
  const { shape, name } = spec;
  if (!Array.isArray(shape) || shape.length !== expected.length) {
    invalid('shape_mismatch', `input "${name}": expected rank ${expected.length} (shape [${expected.join(', ')}])`);
  }
  if (shape[0] !== rows) invalid('shape_mismatch', `input "${name}": shape[0] is ${String(shape[0])}, the requests bring ${rows} rows`);
  for (let axis = 1; axis < shape.length; axis++) {
    const dim = shape[axis] as number;
    const want = expected[axis] as number;
    if (!Number.isSafeInteger(dim) || dim < 0 || (want >= 0 && dim !== want)) {
      invalid('shape_mismatch', `input "${name}": axis ${axis} is ${String(dim)} (shape [${expected.join(', ')}])`);
    }
  }
}

/** Each input's elements over `bytes` (aligned first); InvalidInputError when a spec does not fit them. */
export function openInputs(specs: readonly PackedSpec[], bytes: Buffer): OpenedInput[] {
  const whole = aligned(bytes);
  return specs.map((spec) => ({ spec, data: tensorData(spec, whole) }));
}

/**
 * The engine tensors for `ranges` of rows (in order). Every row: the views themselves, marked
 * kept when `keep` — the bytes are needed again (a member re-run alone after a rejection) — so
 * that the engine copies rather than takes (transfers) their buffer if it would hand it whole to
 * its thread; a batch shared with other entries copies into its own buffer, and nothing more is.
 */
export function selectRows(inputs: readonly OpenedInput[], ranges: readonly RowRange[], keep: boolean): Record<string, EngineTensor> {
  const out: Record<string, EngineTensor> = {};
  for (const { spec, data } of inputs) {
    const total = spec.shape[0] ?? 0;
    const rows = ranges.reduce((n, r) => n + r.end - r.start, 0);
    const dims = [rows, ...spec.shape.slice(1)];
    const type = datatypeToDtype(spec.datatype);
    const all = ranges.length === 1 && ranges[0]?.start === 0 && rows === total;
    const views = data as EngineData;
    out[spec.name] = { type, dims, data: all ? (keep ? keptOnTransfer(views) : views) : copyRows(data, total, ranges, rows) };
  }
  return out;
}

/** Rows of `ranges` as a new array: byte copies per range (strings: array slices). */
function copyRows(data: TensorData, total: number, ranges: readonly RowRange[], rows: number): EngineData {
  const rowSize = total === 0 ? 0 : data.length / total;
  if (Array.isArray(data)) return ranges.flatMap((r) => (data as string[]).slice(r.start * rowSize, r.end * rowSize));
  const typed = data as Exclude<EngineData, string[]>;
  const Ctor = typed.constructor as new (length: number) => Exclude<EngineData, string[]>;
  const out = new Ctor(rows * rowSize);
  const to = new Uint8Array(out.buffer);
  const from = new Uint8Array(typed.buffer, typed.byteOffset, typed.byteLength);
  const rowBytes = rowSize * typed.BYTES_PER_ELEMENT;
  let at = 0;
  for (const r of ranges) {
    to.set(from.subarray(r.start * rowBytes, r.end * rowBytes), at);
    at += (r.end - r.start) * rowBytes;
  }
  return out;
}

function invalid(code: string, message: string): never {
  throw new InvalidInputError(code, message);
}
