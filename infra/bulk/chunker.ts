/**
 * Cuts an object's rows into chunks of `chunkRows` and turns a chunk into a chunk job's inputs.
 *
 * Chunks never span objects, and chunk numbers count on across objects in key order, so with the
 * run's input listing pinned the same input always gives the same chunks under the same numbers
 * (the job id `bulk:<runId>:<chunk>` and the part name depend on nothing else). Bad lines pass
 * through in order, between the chunks.
 */
import { type BinaryTensor, encodeBinaryTensor, isBinaryDatatype } from '../contracts/binary-tensor.ts';
import type { BulkRunSpec } from '../contracts/bulk.ts';
import type { JobData } from '../contracts/job.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import type { OipTensor } from '../contracts/oip.ts';
import type { BadLine, GoodRow, RowEvent } from './row-reader.ts';

export interface Chunk {
  kind: 'chunk';
  index: number;
  rows: GoodRow[];
  /** Bytes of the object read up to the end of the chunk's last row. */
  offset: number;
}

export type ChunkEvent = Chunk | BadLine;

/** Chunks of one object, numbered from `firstIndex`; the last one may be short. */
export async function* chunkRows(events: AsyncIterable<RowEvent>, chunkRows: number, firstIndex: number): AsyncGenerator<ChunkEvent> {
  let index = firstIndex;
  let rows: GoodRow[] = [];
  for await (const event of events) {
    if (event.kind === 'bad') {
      yield event;
      continue;
    }
    rows.push(event);
    if (rows.length >= chunkRows) {
      yield { kind: 'chunk', index: index++, rows, offset: event.offset };
      rows = [];
    }
  }
  const last = rows.at(-1);
  if (last) yield { kind: 'chunk', index, rows, offset: last.offset };
}

/**
 * The chunk job's inputs: the rows stacked along a new first axis, in the manifest's input order.
 * Numeric inputs are packed (infra/contracts/binary-tensor.ts): JSON numbers cost the driver and the
 * worker far more than the forward pass. BYTES inputs stay OIP JSON.
 */
export function chunkTensors(rows: readonly GoodRow[], manifest: Pick<ModelManifest, 'inputs'>): Array<OipTensor | BinaryTensor> {
  return manifest.inputs.map((spec) => {
    const dims = rows[0]?.values[spec.name]?.dims ?? [];
    const shape = [rows.length, ...dims];
    const values = rows.map((row) => row.values[spec.name]?.data ?? []);
    if (isBinaryDatatype(spec.datatype)) return encodeBinaryTensor(spec.name, spec.datatype, shape, values);
    return { name: spec.name, datatype: spec.datatype, shape, data: values.flat() };
  });
}

/** A chunk job of the run `ref` (run-store.ts `runRef`): the rows as OIP inputs, no result cache, and where the worker writes the part. */
export function chunkJobData(
  ref: string,
  spec: BulkRunSpec,
  manifest: Pick<ModelManifest, 'inputs'>,
  chunk: Chunk,
  now: number,
): JobData & { bulk: NonNullable<JobData['bulk']> } {
  return {
    tenant: spec.tenant,
    model: spec.model,
    version: spec.version,
    inputs: chunkTensors(chunk.rows, manifest),
    cache: false,
    bulk: { runId: ref, chunk: chunk.index, ids: chunk.rows.map((r) => r.id), output: spec.output },
    submittedAt: now,
  };
}
