/**
 * `_manifest.json`, written once every chunk's part exists: what was scored (model, version, the
 * model's sha256), from what (the pinned input listing), into what (every part with its rows,
 * bytes and sha256), what was skipped (bad rows: count and samples) and how long it took. It is
 * written last, so its presence means the output is complete.
 */

import { type BadRow, type BulkPartResult, type BulkRunSpec, manifestKey } from '../contracts/bulk.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import type { PinnedObject } from './run-store.ts';
import { formatS3Url } from './s3-url.ts';

export interface RunManifest {
  runId: string;
  model: string;
  version: string;
  modelSha256: string;
  input: string;
  output: string;
  chunkRows: number;
  inputs: PinnedObject[];
  parts: Array<BulkPartResult & { chunk: number }>;
  rows: number;
  badRows: number;
  badRowSamples: BadRow[];
  timings: { createdAt: string; startedAt: string; finishedAt: string; durationMs: number; rowsPerSecond: number };
}

export interface ManifestInput {
  spec: BulkRunSpec;
  model: Pick<ModelManifest, 'sha256'>;
  listing: PinnedObject[];
  parts: Map<number, BulkPartResult>;
  badRows: number;
  samples: BadRow[];
  startedAt: number;
  finishedAt: number;
}

export function buildRunManifest(input: ManifestInput): RunManifest {
  const { spec } = input;
  const parts = [...input.parts.entries()].sort(([a], [b]) => a - b).map(([chunk, part]) => ({ chunk, ...part }));
  const rows = parts.reduce((sum, p) => sum + p.rows, 0);
  const durationMs = Math.max(0, input.finishedAt - input.startedAt);
  return {
    runId: spec.id,
    model: spec.model,
    version: spec.version,
    modelSha256: input.model.sha256,
    input: formatS3Url(spec.input),
    output: formatS3Url(spec.output),
    chunkRows: spec.chunkRows,
    inputs: input.listing,
    parts,
    rows,
    badRows: input.badRows,
    badRowSamples: input.samples,
    timings: {
      createdAt: new Date(spec.createdAt).toISOString(),
      startedAt: new Date(input.startedAt).toISOString(),
      finishedAt: new Date(input.finishedAt).toISOString(),
      durationMs,
      rowsPerSecond: durationMs > 0 ? Math.round((rows / durationMs) * 1000 * 10) / 10 : 0,
    },
  };
}

/** Writes the manifest; returns its s3:// URL. */
export async function writeRunManifest(store: ObjectStore, input: ManifestInput): Promise<string> {
  const key = manifestKey(input.spec.output);
  await store.put(key, `${JSON.stringify(buildRunManifest(input), null, 2)}\n`, { contentType: 'application/json' });
  return formatS3Url(input.spec.output, key);
}
