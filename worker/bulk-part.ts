/**
 * A scored bulk chunk becomes its part: JSONL, one line per row in row order,
 * `{"id": <the row's id>, "<outputName>": <that row's values as nested arrays>, …}`, written to
 * the run's output prefix in one put. The put is atomic by key, so a retried chunk (a worker
 * killed after writing, before its job completed) overwrites the same part instead of adding a
 * second one. The result (key, rows, bytes, sha256) goes back through the job, not the rows.
 */
import { createHash } from 'node:crypto';
import { type BulkChunkSpec, type BulkPartResult, partKey } from '../infra/contracts/bulk.ts';
import type { OipTensor } from '../infra/contracts/oip.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';

export type BulkPartWriter = (chunk: BulkChunkSpec, outputs: OipTensor[]) => Promise<BulkPartResult>;

export function createBulkPartWriter(storeFor: (bucket: string) => ObjectStore): BulkPartWriter {
  return async (chunk, outputs) => {
    const body = Buffer.from(serialisePart(chunk.ids, outputs));
    const key = partKey(chunk.output, chunk.chunk);
    await storeFor(chunk.output.bucket).put(key, body, { contentType: 'application/x-ndjson' });
    const rows = chunk.ids.length;
    return { key, rows, bytes: body.length, sha256: createHash('sha256').update(body).digest('hex') };
  };
}

/** The part's text; throws when an output's rows do not match the ids (a model that changed the batch axis). */
export function serialisePart(ids: ReadonlyArray<string | number>, outputs: readonly OipTensor[]): string {
  const lines: string[] = [];
  const shaped = outputs.map((t) => {
    if (t.shape[0] !== ids.length) throw new Error(`output "${t.name}" has ${t.shape[0]} rows for ${ids.length} ids`);
    const dims = t.shape.slice(1);
    return { t, dims, size: dims.reduce((n, d) => n * d, 1) };
  });
  for (let r = 0; r < ids.length; r++) {
    const row: Record<string, unknown> = { id: ids[r] };
    for (const { t, dims, size } of shaped) row[t.name] = nest(t.data.slice(r * size, (r + 1) * size), dims);
    lines.push(JSON.stringify(row));
  }
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

/** Flat row-major values → nested arrays of `dims` (a scalar row when dims is empty). */
function nest(flat: OipTensor['data'], dims: readonly number[]): unknown {
  if (dims.length === 0) return flat[0];
  if (dims.length === 1) return flat;
  const [first, ...rest] = dims as [number, ...number[]];
  const step = flat.length / Math.max(1, first);
  return Array.from({ length: first }, (_, i) => nest(flat.slice(i * step, (i + 1) * step), rest));
}
