/**
 * A chunk job's data: where its rows are (an object and a range of it, chunk-plan.ts), where its
 * part goes and how the run maps columns to the model. No rows: the worker reads them itself, so
 * a job is a few hundred bytes in Redis whatever the chunk's size.
 *
 * The job id `bulk:<ref>:<chunk>` and the part name depend on the chunk number alone, and chunk
 * numbers on the pinned listing and the plan, so a resume finds every job and part it had.
 */
import { type BulkChunkSource, type BulkRunSpec, DEFAULT_ID_COLUMN } from '../contracts/bulk.ts';
import type { ChunkData } from '../contracts/queue-job.ts';

/** Chunk `chunk` of the run `ref` (run-store.ts `runRef`): a place in an object, no rows. */
export function chunkJobData(ref: string, spec: BulkRunSpec, chunk: number, source: BulkChunkSource, now: number): ChunkData {
  return {
    tenant: spec.tenant,
    model: spec.model,
    version: spec.version,
    bulk: {
      runId: ref,
      chunk,
      source,
      output: spec.output,
      outputFormat: spec.outputFormat ?? 'jsonl',
      idColumn: spec.idColumn ?? DEFAULT_ID_COLUMN,
      ...(spec.columns ? { columns: spec.columns } : {}),
    },
    submittedAt: now,
  };
}
