/**
 * What a drive reads from S3 besides the rows: the input listing a run pins at its first drive
 * (and how a later listing differs from it: a resume reads the same objects or fails, since chunk
 * numbers, job ids and part names are only stable over a fixed input), and a part an earlier
 * attempt wrote, read back for the run's record.
 */
import { createHash } from 'node:crypto';
import type { BulkFormat, BulkPartResult } from '../contracts/bulk.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { parquetPartRows } from '../tabular/index.ts';
import type { PinnedObject } from './run-store.ts';

/** The objects under the input prefix in key order (folder markers left out). */
export async function listInput(store: ObjectStore, prefix: string): Promise<PinnedObject[]> {
  return (await store.list(prefix))
    .filter((o) => !o.key.endsWith('/'))
    .map((o) => (o.etag ? { key: o.key, sizeBytes: o.sizeBytes, etag: o.etag } : { key: o.key, sizeBytes: o.sizeBytes }));
}

/**
 * A written part's result (its rows, the checksum of its bytes); undefined when it is not there.
 * Its chunk's bad rows are not in the part: a part read back without its job counts none.
 */
export async function readPart(store: ObjectStore, key: string, format: BulkFormat): Promise<BulkPartResult | undefined> {
  const bytes = await store.getBytes(key);
  if (!bytes) return undefined;
  let rows: number;
  if (format === 'parquet') rows = parquetPartRows(bytes);
  else {
    rows = 0;
    for (const b of bytes) if (b === 0x0a) rows++;
    // A CSV part's first line is its header.
    if (format === 'csv' && rows > 0) rows--;
  }
  return { key, rows, bytes: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
}

/** The first difference in words (added, removed or changed object), or undefined when the same. */
export function describeListingChange(pinned: PinnedObject[], now: PinnedObject[], url: (key: string) => string): string | undefined {
  const before = new Map(pinned.map((o) => [o.key, o]));
  const after = new Map(now.map((o) => [o.key, o]));
  for (const o of now) if (!before.has(o.key)) return `${url(o.key)} was added`;
  for (const o of pinned) {
    const current = after.get(o.key);
    if (!current) return `${url(o.key)} was removed`;
    if (current.sizeBytes !== o.sizeBytes) return `${url(o.key)} changed size (${o.sizeBytes} → ${current.sizeBytes} bytes)`;
    if (o.etag && current.etag && o.etag !== current.etag) return `${url(o.key)} changed (etag ${o.etag} → ${current.etag})`;
  }
  return undefined;
}
