/**
 * `_manifest.json`, written once every chunk's part exists: what was scored (model, version, the
 * model's sha256), from what (the pinned input listing), into what (every part with its rows,
 * bytes and sha256), what was skipped (bad rows: count and samples) and how long it took. It is
 * written last, so its presence means the output is complete.
 *
 * Streamed: a 10,000-part run's parts are read from the run's record a page at a time and
 * written as they come (a multipart upload past one S3 part), never held all at once.
 */
import { Readable } from 'node:stream';

import { type BadRow, type BulkPartResult, type BulkRunSpec, manifestKey } from '../contracts/bulk.ts';
import type { ModelManifest } from '../contracts/manifest.ts';
import { InvalidInputError } from '../kernel/errors.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { runRowsPerSecond } from './progress.ts';
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
  /** Chunks in the run: parts 0 … chunks-1, each must exist. */
  chunks: number;
  /** Parts of chunks [from, to), in order; undefined for a chunk without one. */
  parts(from: number, to: number): Promise<Array<BulkPartResult | undefined>>;
  /** Rows of all parts (the run's rowsDone). */
  rows: number;
  badRows: number;
  samples: BadRow[];
  startedAt: number;
  finishedAt: number;
}

/** Parts read from the record per page. */
export const MANIFEST_PAGE = 500;

/** Everything but the parts. */
export function manifestHead(input: ManifestInput): Omit<RunManifest, 'parts'> {
  const { spec, rows } = input;
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
    rows,
    badRows: input.badRows,
    badRowSamples: input.samples,
    timings: {
      createdAt: new Date(spec.createdAt).toISOString(),
      startedAt: new Date(input.startedAt).toISOString(),
      finishedAt: new Date(input.finishedAt).toISOString(),
      durationMs,
      rowsPerSecond: runRowsPerSecond(rows, input.startedAt, input.finishedAt),
    },
  };
}

/** The manifest's text, a page of parts at a time; throws InvalidInputError (`chunk_lost`) at a chunk without a part. */
export async function* manifestText(input: ManifestInput): AsyncGenerator<string> {
  const head = JSON.stringify(manifestHead(input), null, 2);
  yield `${head.slice(0, head.lastIndexOf('}')).trimEnd()},\n  "parts": [`;
  for (let from = 0; from < input.chunks; from += MANIFEST_PAGE) {
    const to = Math.min(input.chunks, from + MANIFEST_PAGE);
    const page = await input.parts(from, to);
    const lines = page.map((part, i) => {
      if (!part) throw new InvalidInputError('chunk_lost', `chunk ${from + i} has no part`);
      const { badSamples: _samples, ...kept } = part;
      return `    ${JSON.stringify({ chunk: from + i, ...kept })}`;
    });
    yield `${from === 0 ? '\n' : ',\n'}${lines.join(',\n')}`;
  }
  yield `${input.chunks > 0 ? '\n  ' : ''}]\n}\n`;
}

/** Writes the manifest; returns its s3:// URL. */
export async function writeRunManifest(store: ObjectStore, input: ManifestInput): Promise<string> {
  const key = manifestKey(input.spec.output);
  // Every part is there before a byte is written: a run with a hole fails instead of leaving half a manifest.
  await checkParts(input);
  await store.put(key, Readable.from(manifestText(input)), { contentType: 'application/json' });
  return formatS3Url(input.spec.output, key);
}

async function checkParts(input: ManifestInput): Promise<void> {
  const missing: number[] = [];
  for (let from = 0; from < input.chunks && missing.length < 10; from += MANIFEST_PAGE) {
    const page = await input.parts(from, Math.min(input.chunks, from + MANIFEST_PAGE));
    page.forEach((p, i) => {
      if (!p && missing.length < 10) missing.push(from + i);
    });
  }
  if (missing.length > 0) throw new InvalidInputError('chunk_lost', `chunks ${missing.join(', ')} have no part`);
}
