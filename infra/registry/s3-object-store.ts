/**
 * ObjectStore over S3 or an S3-compatible server (s3rver in development and tests), with the
 * AWS SDK v3. Nothing connects at construction: the first call opens the connection.
 *
 * Missing keys read as null; every other failure is wrapped in an Error naming the operation
 * and the s3:// URL, with the SDK's error kept as `cause` (callers treat these as transient).
 */
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { BucketUnavailableError, ObjectChangedError, type ObjectInfo, type ObjectStore } from './object-store.ts';

export interface S3ObjectStoreOptions {
  /** Unset = AWS's regional endpoint. */
  endpoint?: string;
  bucket: string;
  region: string;
  /** Path-style URLs (`endpoint/bucket/key`), needed by most S3-compatible servers. */
  forcePathStyle: boolean;
  /** Unset = the SDK's default credential chain (env, profile, instance role, …). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
  /** Attempts per request, including the first (SDK standard retry with back-off). Default 4. */
  maxAttempts?: number;
  /** Keys per list request (S3's maximum, 1000, by default); small values exercise paging. */
  listPageSize?: number;
}

/** Multipart part size for streamed uploads; S3's minimum is 5 MiB. */
const PART_SIZE_BYTES = 8 * 1024 * 1024;

export function createS3ObjectStore(options: S3ObjectStoreOptions): ObjectStore & { close(): void } {
  const client = new S3Client(clientConfig(options));
  let closed = false;
  return {
    ...bucketStore(client, options.bucket, options.listPageSize),
    close() {
      if (closed) return;
      closed = true;
      client.destroy();
    },
  };
}

/**
 * Object stores for any bucket of one endpoint over one S3 client (one connection pool, one
 * credential chain): the bucket is a parameter of each store, not a client of its own, so
 * naming more buckets costs nothing that lasts. close() destroys the client once.
 */
export function createS3BucketStores(options: Omit<S3ObjectStoreOptions, 'bucket'>): {
  forBucket(bucket: string): ObjectStore;
  close(): void;
} {
  const client = new S3Client(clientConfig(options));
  let closed = false;
  return {
    forBucket: (bucket) => bucketStore(client, bucket, options.listPageSize),
    close() {
      if (closed) return;
      closed = true;
      client.destroy();
    },
  };
}

function bucketStore(client: S3Client, bucket: string, listPageSize: number | undefined): ObjectStore {
  const url = (key: string) => `s3://${bucket}/${key}`;
  const wrap = <T>(what: string, fn: () => Promise<T>) => wrapErrors(bucket, what, fn);
  const wrapMissing = <T>(what: string, fn: () => Promise<T>) => wrapErrorsMissing(bucket, what, fn);

  const head = async (key: string): Promise<ObjectInfo | null> => {
    const res = await wrapMissing(`head ${url(key)}`, () => client.send(new HeadObjectCommand({ Bucket: bucket, Key: key })));
    if (!res) return null;
    return info(key, res.ContentLength, res.ETag, res.LastModified);
  };

  return {
    async put(key, body, putOptions) {
      const contentType = putOptions?.contentType;
      await wrap(`put ${url(key)}`, async () => {
        if (body instanceof Readable) {
          // Upload buffers parts and switches to multipart once the body outgrows one part.
          const upload = new Upload({
            client,
            params: { Bucket: bucket, Key: key, Body: body, ContentType: contentType },
            partSize: PART_SIZE_BYTES,
            queueSize: 4,
          });
          await upload.done();
        } else {
          await client.send(new PutObjectCommand({ Bucket: bucket, Key: key, Body: body, ContentType: contentType }));
        }
      });
    },

    async get(key) {
      const res = await wrapMissing(`get ${url(key)}`, () => client.send(new GetObjectCommand({ Bucket: bucket, Key: key })));
      if (!res) return null;
      // In Node the SDK's body is an http.IncomingMessage: a Readable with SDK helpers mixed in.
      if (!(res.Body instanceof Readable)) throw new Error(`get ${url(key)}: response body is not a Node stream`);
      return res.Body;
    },

    async getRange(key, start, endExclusive, readOptions) {
      if (!Number.isSafeInteger(start) || !Number.isSafeInteger(endExclusive) || start < 0) {
        throw new RangeError(`getRange ${url(key)}: bad range [${start}, ${endExclusive})`);
      }
      const ifMatch = readOptions?.ifMatch;
      // HTTP has no empty range: whether the key exists (and is the pinned version) is all such a read can tell.
      if (endExclusive <= start) {
        const found = await head(key);
        if (found === null) return null;
        if (ifMatch !== undefined) pinned(url(key), key, ifMatch, found.etag);
        return emptyStream();
      }
      const what = `get ${url(key)} bytes ${start}-${endExclusive - 1}`;
      const command = new GetObjectCommand({
        Bucket: bucket,
        Key: key,
        Range: `bytes=${start}-${endExclusive - 1}`,
        ...(ifMatch !== undefined ? { IfMatch: ifMatch } : {}),
      });
      const res = await wrapMissing(what, () => preconditioned(url(key), key, ifMatch, unsatisfiable(client.send(command))));
      if (res === null) return null;
      // A start at or past the end of an existing object: nothing exists there.
      if (res === UNSATISFIABLE) return emptyStream();
      if (!(res.Body instanceof Readable)) throw new Error(`${what}: response body is not a Node stream`);
      // S3 answers 412 to If-Match; a server that ignores it (s3rver) still says which version it sent.
      if (ifMatch !== undefined) {
        try {
          pinned(url(key), key, ifMatch, res.ETag);
        } catch (err) {
          res.Body.destroy();
          throw err;
        }
      }
      const answered = /^bytes (\d+)-\d+\/(\d+)$/.exec(res.ContentRange ?? '');
      // A server that ignores Range answers 200 with the whole object: refuse it rather than read wrong bytes.
      if (Number(answered?.[1]) !== start) {
        res.Body.destroy();
        throw new Error(`${what}: the server answered Content-Range ${JSON.stringify(res.ContentRange ?? null)}`);
      }
      // s3rver answers a range of an empty object with `bytes 0-0/0` and a body that never comes (S3: 416).
      if (start >= Number(answered?.[2])) {
        res.Body.destroy();
        return emptyStream();
      }
      return res.Body;
    },

    async getBytes(key) {
      return wrapMissing(`get ${url(key)}`, async () => {
        const res = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
        if (!res.Body) return new Uint8Array(0);
        return res.Body.transformToByteArray();
      });
    },

    head,

    async list(prefix) {
      // ListObjects (v1) paged by marker rather than v2 continuation tokens: s3rver mints v2
      // tokens with DES, which Node ≥17's OpenSSL refuses, so any truncated v2 listing fails
      // with a 500 there. v1 marker paging is equally exact on S3 (keys come in UTF-8 order).
      const out: ObjectInfo[] = [];
      let marker: string | undefined;
      for (;;) {
        const page = await wrap(`list ${url(prefix)}`, () =>
          client.send(new ListObjectsCommand({ Bucket: bucket, Prefix: prefix, Marker: marker, MaxKeys: listPageSize })),
        );
        const contents = page.Contents ?? [];
        for (const o of contents) {
          if (o.Key !== undefined) out.push(info(o.Key, o.Size, o.ETag, o.LastModified));
        }
        const last = contents[contents.length - 1]?.Key;
        if (!page.IsTruncated || last === undefined) break;
        marker = page.NextMarker ?? last;
      }
      return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    },

    async delete(key) {
      await wrap(`delete ${url(key)}`, () => client.send(new DeleteObjectCommand({ Bucket: bucket, Key: key })));
    },
  };
}

function clientConfig(options: Omit<S3ObjectStoreOptions, 'bucket'>): S3ClientConfig {
  return {
    region: options.region,
    forcePathStyle: options.forcePathStyle,
    maxAttempts: options.maxAttempts ?? 4,
    // The SDK's default CRC32 request/response checksums are not understood by every
    // S3-compatible server (s3rver rejects or mangles them); compute them only where S3 demands.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    ...(options.credentials ? { credentials: options.credentials } : {}),
  };
}

function info(key: string, size: number | undefined, etag: string | undefined, lastModified: Date | undefined): ObjectInfo {
  return {
    key,
    sizeBytes: size ?? 0,
    ...(etag !== undefined ? { etag } : {}),
    ...(lastModified !== undefined ? { lastModified } : {}),
  };
}

const UNSATISFIABLE = Symbol('unsatisfiable range');

/** S3's 416 InvalidRange (a start at or past the end of an object that exists) as a value, not a throw. */
async function unsatisfiable<T>(request: Promise<T>): Promise<T | typeof UNSATISFIABLE> {
  try {
    return await request;
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
    if (e?.name === 'InvalidRange' || e?.$metadata?.httpStatusCode === 416) return UNSATISFIABLE;
    throw err;
  }
}

/** Etags compare without their quotes and weak marker (`"abc"`, `W/"abc"` and `abc` are one). */
function bareEtag(etag: string): string {
  return etag.replace(/^W\//, '').replace(/^"(.*)"$/, '$1');
}

/** Throws ObjectChangedError unless the etag answered is the one pinned (an answer without one is taken as it is). */
function pinned(url: string, key: string, expected: string, answered: string | undefined): void {
  if (answered === undefined || bareEtag(answered) === bareEtag(expected)) return;
  throw new ObjectChangedError(key, expected, `${url} is no longer the version read before (etag ${expected}, now ${answered})`);
}

/** S3's 412 PreconditionFailed to If-Match as ObjectChangedError, not a transient fault. */
async function preconditioned<T>(url: string, key: string, ifMatch: string | undefined, request: Promise<T>): Promise<T> {
  try {
    return await request;
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
    if (ifMatch !== undefined && (e?.name === 'PreconditionFailed' || e?.$metadata?.httpStatusCode === 412)) {
      throw new ObjectChangedError(key, ifMatch, `${url} is no longer the version read before (etag ${ifMatch}): 412 Precondition Failed`, {
        cause: err,
      });
    }
    throw err;
  }
}

function emptyStream(): Readable {
  const stream = new Readable({ read() {} });
  stream.push(null);
  return stream;
}

/** True for "no such key": GetObject says NoSuchKey; HEAD has no body, so only NotFound/404. */
function isMissing(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  if (e.name === 'NoSuchKey' || e.name === 'NotFound') return true;
  // A bucket that does not exist is a configuration problem, not an absent object.
  return e.$metadata?.httpStatusCode === 404 && e.name !== 'NoSuchBucket';
}

/** The bucket itself is unusable: missing, not ours to use, or in another region (S3's codes; a 404 only where no key was asked for). */
const BUCKET_UNAVAILABLE = new Set([
  'NoSuchBucket',
  'AccessDenied',
  'AllAccessDisabled',
  'PermanentRedirect',
  'AuthorizationHeaderMalformed',
]);

function isBucketUnavailable(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: string; Code?: string };
  return BUCKET_UNAVAILABLE.has(e.name ?? '') || BUCKET_UNAVAILABLE.has(e.Code ?? '');
}

async function wrapErrorsMissing<T>(bucket: string, what: string, fn: () => Promise<T>): Promise<T | null> {
  try {
    return await fn();
  } catch (err) {
    if (isMissing(err)) return null;
    if (err instanceof ObjectChangedError) throw err;
    throw wrapped(bucket, what, err);
  }
}

async function wrapErrors<T>(bucket: string, what: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw wrapped(bucket, what, err);
  }
}

function wrapped(bucket: string, what: string, err: unknown): Error {
  const detail = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  const message = `S3 ${what} failed: ${detail}`;
  return isBucketUnavailable(err) ? new BucketUnavailableError(bucket, message, { cause: err }) : new Error(message, { cause: err });
}
