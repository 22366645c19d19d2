import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand, S3Client, type S3ClientConfig } from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPortOpen } from './free-port.ts';
import { type S3ServerHandle, startS3Server } from './s3-server.ts';

const BUCKET = 'unit-bucket';

function clientFor(server: S3ServerHandle): S3Client {
  const config: S3ClientConfig = {
    endpoint: server.endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    credentials: { accessKeyId: server.accessKeyId, secretAccessKey: server.secretAccessKey },
    // s3rver does not understand the CRC checksums the SDK sends by default.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  };
  return new S3Client(config);
}

describe('s3-server', () => {
  let dir: string;
  let server: S3ServerHandle;
  let s3: S3Client;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 's3-server-test-'));
    server = await startS3Server({ directory: dir, buckets: [BUCKET] });
    s3 = clientFor(server);
  });

  afterAll(async () => {
    s3.destroy();
    await server.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('puts, gets and lists objects in a configured bucket', async () => {
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'a/one.txt', Body: 'first' }));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'a/two.txt', Body: 'second' }));
    await s3.send(new PutObjectCommand({ Bucket: BUCKET, Key: 'b/three.txt', Body: 'third' }));

    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'a/two.txt' }));
    expect(await got.Body?.transformToString()).toBe('second');

    const listed = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'a/' }));
    expect(listed.Contents?.map((o) => o.Key)).toEqual(['a/one.txt', 'a/two.txt']);
  });

  it('accepts a multipart upload and returns the same bytes', async () => {
    const bytes = randomBytes(11 * 1024 * 1024 + 123); // three parts at the 5 MiB minimum
    const upload = new Upload({
      client: s3,
      params: { Bucket: BUCKET, Key: 'big/blob.bin', Body: bytes },
      partSize: 5 * 1024 * 1024,
      queueSize: 2,
    });
    const parts: number[] = [];
    upload.on('httpUploadProgress', (p) => parts.push(p.part ?? 0));
    await upload.done();
    expect(new Set(parts).size).toBe(3);

    const got = await s3.send(new GetObjectCommand({ Bucket: BUCKET, Key: 'big/blob.bin' }));
    const back = Buffer.from(await got.Body!.transformToByteArray());
    expect(back.length).toBe(bytes.length);
    expect(back.equals(bytes)).toBe(true);
  });

  it('stops listening on close, and close is safe to call twice', async () => {
    const other = await startS3Server({ directory: path.join(dir, 'other'), buckets: ['second-bucket'] });
    const client = clientFor(other);
    try {
      await client.send(new PutObjectCommand({ Bucket: 'second-bucket', Key: 'k', Body: 'v' }));
    } finally {
      client.destroy();
    }
    const port = Number(new URL(other.endpoint).port);
    expect(await isPortOpen(port)).toBe(true);
    await other.close();
    await other.close();
    expect(await isPortOpen(port)).toBe(false);
  });
});
