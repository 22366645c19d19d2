/**
 * The narrow interface warmpool needs from an object store (S3 or an S3-compatible server).
 * The registry, the model cache and bulk runs depend on this, never on the AWS SDK directly.
 */
import type { Readable } from 'node:stream';

export interface ObjectInfo {
  key: string;
  sizeBytes: number;
  etag?: string;
  lastModified?: Date;
}

/** How a read is pinned to the bytes a caller listed. */
export interface ReadOptions {
  /**
   * The etag the caller listed: the read answers those bytes or throws ObjectChangedError (S3's
   * `If-Match`, 412 Precondition Failed), never bytes of a newer version of the object.
   */
  ifMatch?: string;
}

export interface ObjectStore {
  /** Writes the whole object (multipart for large bodies); an existing key is replaced atomically. */
  put(key: string, body: Uint8Array | Readable | string, options?: { contentType?: string }): Promise<void>;
  /** A stream of the object's bytes, or null when there is no such key. */
  get(key: string): Promise<Readable | null>;
  /**
   * A stream of the bytes [start, endExclusive) (an HTTP Range `bytes=start-(endExclusive-1)`), or
   * null when there is no such key. A range past the object's end gives what exists (nothing when
   * `start` is at or past it), so a reader need not know the exact size to read on.
   * With `ifMatch`, an object whose etag is another throws ObjectChangedError.
   */
  getRange(key: string, start: number, endExclusive: number, options?: ReadOptions): Promise<Readable | null>;
  /** The whole object in memory, or null; for small objects such as manifests. */
  getBytes(key: string): Promise<Uint8Array | null>;
  head(key: string): Promise<ObjectInfo | null>;
  /** Every object under the prefix, in key order (follows continuation tokens). */
  list(prefix: string): Promise<ObjectInfo[]>;
  delete(key: string): Promise<void>;
}

/**
 * The bucket itself cannot be used: it does not exist, this service's credentials may not use
 * it, or it lives in another region. Not transient (a retry answers the same); the caller
 * decides whether its own caller may be told (bulk runs answer 422 `location_unavailable` for a
 * tenant's own location).
 */
export class BucketUnavailableError extends Error {
  constructor(
    readonly bucket: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'BucketUnavailableError';
  }
}

/**
 * The object is there but is not the version the caller pinned (its etag is another: S3 answered
 * 412 to `If-Match`, or a server that ignores If-Match answered another ETag). Not transient: a
 * retry reads the same newer bytes.
 */
export class ObjectChangedError extends Error {
  constructor(
    readonly key: string,
    readonly expectedEtag: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ObjectChangedError';
  }
}
