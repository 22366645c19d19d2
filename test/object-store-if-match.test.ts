/**
 * ObjectStore.getRange pinned to an etag (issue 33 row 12), one behaviour for every store: the
 * S3 store on the real S3-protocol server (s3rver, which ignores If-Match: the answered ETag
 * tells), the lazy store over it, and the S3 store against a server that answers If-Match as S3
 * does (412 Precondition Failed).
 */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lazyObjectStore } from '../infra/registry/lazy-object-store.ts';
import { ObjectChangedError, type ObjectStore } from '../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../infra/registry/s3-object-store.ts';
import { testServices, uniqueId } from './support/services.ts';

const services = testServices();
const s3 = createS3ObjectStore({ ...services.s3, forcePathStyle: true, credentials: services.s3 });
const prefix = `${uniqueId('if-match')}/`;

async function text(stream: Readable | null): Promise<string | null> {
  if (stream === null) return null;
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString();
}

afterAll(async () => {
  for (const o of await s3.list(prefix)) await s3.delete(o.key);
  s3.close();
});

describe.each([
  ['the S3 store (s3rver)', () => s3],
  ['the lazy store over it', () => lazyObjectStore(async () => s3)],
] as Array<[string, () => ObjectStore]>)('%s', (_name, storeOf) => {
  it('answers the pinned version, and ObjectChangedError once the object is another one', async () => {
    const store = storeOf();
    const key = `${prefix}${uniqueId('obj')}`;
    await store.put(key, '0123456789');
    const etag = (await store.head(key))?.etag as string;
    expect(etag).toBeTruthy();
    // The listing's etag is what a run pins: it must be the one GETs answer with.
    expect((await store.list(key))[0]?.etag).toBe(etag);
    expect(await text(await store.getRange(key, 2, 5, { ifMatch: etag }))).toBe('234');
    await store.put(key, 'abcdefghij');
    const changed = await store.getRange(key, 2, 5, { ifMatch: etag }).catch((e: unknown) => e);
    expect(changed).toBeInstanceOf(ObjectChangedError);
    expect((changed as ObjectChangedError).key).toBe(key);
    expect((changed as ObjectChangedError).expectedEtag).toBe(etag);
    // An empty range asks HEAD: pinned the same.
    await expect(store.getRange(key, 4, 4, { ifMatch: etag })).rejects.toBeInstanceOf(ObjectChangedError);
    // Unpinned, the new bytes; pinned to a missing key, null as ever.
    expect(await text(await store.getRange(key, 2, 5))).toBe('cde');
    expect(await store.getRange(`${prefix}missing`, 0, 4, { ifMatch: etag })).toBeNull();
  });
});

describe('a server that answers If-Match as S3 does', () => {
  let server: Server;
  const seen: IncomingHttpHeaders[] = [];
  let store: ReturnType<typeof createS3ObjectStore>;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers);
      res.writeHead(412, { 'content-type': 'application/xml' });
      res.end(
        '<?xml version="1.0" encoding="UTF-8"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>',
      );
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    store = createS3ObjectStore({
      endpoint: `http://127.0.0.1:${port}`,
      bucket: 'b',
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'k', secretAccessKey: 's' },
    });
  });

  afterAll(async () => {
    store?.close();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  it('sends If-Match and reads its 412 as ObjectChangedError, once (the SDK does not retry it; 4 attempts allowed)', async () => {
    const err = await store.getRange('in/a.parquet', 0, 8, { ifMatch: '"v1"' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ObjectChangedError);
    expect((err as Error).message).toContain('s3://b/in/a.parquet');
    expect((err as Error).message).toContain('412 Precondition Failed');
    expect(seen.map((h) => h['if-match'])).toEqual(['"v1"']);
  });
});
