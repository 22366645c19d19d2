/**
 * A bulk chunk, scored by the worker that took its job (issue 18): read the chunk's own rows from
 * S3 (a byte range of a text object, or a row range of a Parquet file), parse them straight into
 * typed tensors, run them through the batcher in slices of at most `maxRows`, and write the part
 * in the run's output format in one put. No row passes through Redis; the job returns the part's
 * key, rows, bytes and checksum, and the chunk's bad rows (count, the first few, lines owned).
 *
 *   source ──read──▶ ChunkRows (ids, groups of one shape, bad rows)
 *          ──score─▶ outputs per group ──order──▶ one tensor per output, in row order
 *          ──write─▶ part-<chunk>.<format>
 *
 * Bad rows are the run's to count, never a throw. What makes every row of the chunk unusable (a
 * column the run names missing from the file) is invalid input: the job fails for good and the
 * driver fails the run with the message. S3 and engine trouble is thrown as is: BullMQ retries.
 *
 * The part is written even when every row of the chunk is bad (an empty part): the chunk is
 * done, and its bad rows count against the run's budget.
 */
import { createHash } from 'node:crypto';
import { type BulkChunkSpec, type BulkPartResult, type ChunkRows, partKey, type RowsTensor } from '../infra/contracts/bulk.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { InvalidInputError } from '../infra/kernel/errors.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { EngineTensor } from './engine/engine.ts';
import { concatRows, datatypeToDtype, dtypeToDatatype, sliceRows } from './engine/tensor-codec.ts';

/** What scoring a chunk needs from the worker: its stores, its model, one forward pass of a slice. */
export interface ChunkScorerDeps {
  storeFor(bucket: string): ObjectStore;
  manifest: Pick<ModelManifest, 'inputs' | 'outputs'>;
  /** Rows per slice handed to `infer` (the batcher's MAX rows). */
  maxRows: number;
  infer(inputs: Record<string, EngineTensor>, rows: number): Promise<Record<string, EngineTensor>>;
  /** The readers and writers of each format (bulk-formats.ts). */
  formats: ChunkFormats;
}

export interface ChunkFormats {
  read(spec: BulkChunkSpec, store: ObjectStore, inputs: ModelManifest['inputs']): Promise<ChunkRows>;
  write(spec: BulkChunkSpec, ids: ReadonlyArray<string | number>, outputs: RowsTensor[]): Uint8Array;
  contentType(spec: BulkChunkSpec): string;
}

export interface ScoredChunk {
  part: BulkPartResult;
  /** Rows that went through the model. */
  rows: number;
}

export async function scoreChunk(spec: BulkChunkSpec, deps: ChunkScorerDeps): Promise<ScoredChunk> {
  const { manifest } = deps;
  const rows = await deps.formats.read(spec, deps.storeFor(spec.source.bucket), manifest.inputs);
  const scored = await Promise.all(rows.groups.map((group) => scoreGroup(group.inputs, group.rows.length, deps)));
  const segments = inRowOrder(
    rows,
    scored,
    manifest.outputs.map((o) => o.name),
  );
  if (segments.length > 1 && spec.outputFormat !== 'jsonl') {
    throw new InvalidInputError(
      'invalid_chunk',
      `rows of different shapes gave outputs of different shapes, which one ${spec.outputFormat} part cannot hold; use the jsonl output format`,
    );
  }
  const bodies = segments.map((s) => deps.formats.write(spec, s.ids, s.outputs));
  const body = bodies.length === 1 ? (bodies[0] as Uint8Array) : Buffer.concat(bodies);
  const ids = segments.flatMap((s) => s.ids);
  const key = partKey(spec.output, spec.chunk, spec.outputFormat);
  await deps.storeFor(spec.output.bucket).put(key, body, { contentType: deps.formats.contentType(spec) });
  const part: BulkPartResult = {
    key,
    rows: ids.length,
    bytes: body.length,
    sha256: createHash('sha256').update(body).digest('hex'),
    lines: rows.lines,
  };
  if (rows.badRows > 0) {
    part.badRows = rows.badRows;
    part.badSamples = rows.bad;
  }
  return { part, rows: ids.length };
}

/** One group's rows in slices of at most maxRows (the slices run concurrently: the batcher packs them). */
async function scoreGroup(inputs: RowsTensor[], rows: number, deps: ChunkScorerDeps): Promise<Record<string, EngineTensor>> {
  const tensors: Record<string, EngineTensor> = {};
  for (const t of inputs) tensors[t.name] = { type: datatypeToDtype(t.datatype), dims: t.shape, data: t.data as EngineTensor['data'] };
  const slices: Array<Promise<Record<string, EngineTensor>>> = [];
  for (let start = 0; start < rows; start += deps.maxRows) {
    const end = Math.min(rows, start + deps.maxRows);
    const slice: Record<string, EngineTensor> = {};
    for (const [name, t] of Object.entries(tensors)) slice[name] = end - start === rows ? t : sliceRows(t, start, end);
    slices.push(deps.infer(slice, end - start));
  }
  const results = await Promise.all(slices);
  const out: Record<string, EngineTensor> = {};
  for (const name of Object.keys(results[0] ?? {})) {
    const parts = results.map((r) => r[name] as EngineTensor);
    out[name] = parts.length === 1 ? (parts[0] as EngineTensor) : concatRows(parts);
  }
  return out;
}

/**
 * The groups' outputs as one tensor per output with rows in the chunk's row order. Nearly every
 * chunk has one group: its tensors as they are. Groups whose output rows have one shape are
 * interleaved back (a copy per row, not per element); groups whose output shapes differ
 * (dynamic output dims) stay apart, one segment each with its ids, and only JSONL can hold them.
 */
function inRowOrder(rows: ChunkRows, scored: Array<Record<string, EngineTensor>>, names: string[]): Segment[] {
  if (rows.groups.length === 0) return [{ ids: [], outputs: [] }];
  const tensorOf = (name: string, t: EngineTensor): RowsTensor => ({
    name,
    datatype: dtypeToDatatype(t.type),
    shape: t.dims,
    data: t.data as RowsTensor['data'],
  });
  if (rows.groups.length === 1) {
    const only = scored[0] as Record<string, EngineTensor>;
    return [{ ids: rows.ids, outputs: names.map((n) => tensorOf(n, output(only, n))) }];
  }
  const sameShapes = names.every((n) => {
    const dims = scored.map((s) => output(s, n).dims.slice(1).join(','));
    return dims.every((d) => d === dims[0]);
  });
  if (!sameShapes) {
    return rows.groups.map((g, gi) => ({
      ids: g.rows.map((i) => rows.ids[i] as string | number),
      outputs: names.map((n) => tensorOf(n, output(scored[gi] as Record<string, EngineTensor>, n))),
    }));
  }
  const outputs = names.map((n) => {
    const first = output(scored[0] as Record<string, EngineTensor>, n);
    const rowSize = first.dims.slice(1).reduce((a, d) => a * d, 1);
    const total = rows.ids.length;
    const dims = [total, ...first.dims.slice(1)];
    if (Array.isArray(first.data)) {
      const data: string[] = new Array(total * rowSize);
      rows.groups.forEach((g, gi) => {
        const src = output(scored[gi] as Record<string, EngineTensor>, n).data as string[];
        g.rows.forEach((pos, r) => {
          for (let k = 0; k < rowSize; k++) data[pos * rowSize + k] = src[r * rowSize + k] as string;
        });
      });
      return tensorOf(n, { type: first.type, dims, data });
    }
    const Ctor = (first.data as Exclude<EngineTensor['data'], string[]>).constructor as new (
      n: number,
    ) => Exclude<EngineTensor['data'], string[]>;
    const data = new Ctor(total * rowSize);
    rows.groups.forEach((g, gi) => {
      const src = output(scored[gi] as Record<string, EngineTensor>, n).data as typeof data;
      g.rows.forEach((pos, r) => {
        (data as Float32Array).set((src as Float32Array).subarray(r * rowSize, (r + 1) * rowSize), pos * rowSize);
      });
    });
    return tensorOf(n, { type: first.type, dims, data });
  });
  return [{ ids: rows.ids, outputs }];
}

interface Segment {
  ids: ReadonlyArray<string | number>;
  outputs: RowsTensor[];
}

function output(scored: Record<string, EngineTensor>, name: string): EngineTensor {
  const t = scored[name];
  if (!t) throw new InvalidInputError('invalid_chunk', `the model gave no output "${name}"`);
  return t;
}
