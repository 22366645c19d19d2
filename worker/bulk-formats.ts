/**
 * The bulk formats' readers and writers for this worker, loaded with the bulk subsystem (and its
 * Parquet library) when the first chunk arrives: most workers never score one.
 */
import type { ChunkFormats } from './bulk-chunk.ts';

let loaded: Promise<ChunkFormats> | undefined;

export function loadChunkFormats(): Promise<ChunkFormats> {
  loaded ??= import('../infra/bulk/index.ts').then((bulk) => ({
    read: bulk.readChunkRows,
    write: bulk.encodePart,
    contentType: (spec) => bulk.PART_CONTENT_TYPES[spec.outputFormat],
  }));
  return loaded;
}
