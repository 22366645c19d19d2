import { describe, expect, it } from 'vitest';
import { MIN_CHUNK_BYTES, MIN_CHUNKS_PER_RUN, maxChunkBytesFor } from './chunk-plan.ts';

describe('maxChunkBytesFor', () => {
  it('cuts a run into MIN_CHUNKS_PER_RUN chunks at least, never below MIN_CHUNK_BYTES', () => {
    expect(maxChunkBytesFor(80 * 2 ** 20)).toBe(Math.ceil((80 * 2 ** 20) / MIN_CHUNKS_PER_RUN));
    expect(maxChunkBytesFor(100)).toBe(MIN_CHUNK_BYTES);
    expect(maxChunkBytesFor(0)).toBe(MIN_CHUNK_BYTES);
  });
});
