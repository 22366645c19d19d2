/**
 * The bulk formats' readers and writers for this worker, loaded with the tabular codecs (and their
 * Parquet library) when the first chunk arrives: most workers never score one.
 */
import type { ChunkReadLimits } from '../infra/tabular/index.ts';
import type { ChunkFormats } from './bulk-chunk.ts';

let loaded: Promise<ChunkFormats> | undefined;

/** `limits`: what a chunk's reads may cost (PARQUET_FOOTER_MAX_BYTES), the same for every chunk of this process. */
export function loadChunkFormats(limits: ChunkReadLimits = {}): Promise<ChunkFormats> {
  loaded ??= import('../infra/tabular/index.ts').then((tabular) => ({
    read: (spec, store, inputs) => tabular.readChunkRows(spec, store, inputs, limits),
    write: tabular.encodePart,
    contentType: (spec) => tabular.PART_CONTENT_TYPES[spec.outputFormat],
  }));
  return loaded;
}
