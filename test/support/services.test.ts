// The shared services global setup started are reachable, and testEnv isolates each caller.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { describe, expect, inject, it } from 'vitest';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { TEST_SERVICE_ENV, testEnv, testServices, uniqueId } from './services.ts';

describe('test services', () => {
  it('publishes the same endpoints through env vars and provide/inject', () => {
    const provided = inject('warmpoolServices');
    expect(provided.redisUrl).toBe(process.env[TEST_SERVICE_ENV.redisUrl]);
    expect(provided.s3Endpoint).toBe(process.env[TEST_SERVICE_ENV.s3Endpoint]);
    expect(testServices().s3.bucket).toBe('warmpool-test');
  });

  it('serves a real Redis', async () => {
    // createRedis: a Cluster client when the suite runs on a Redis Cluster (WARMPOOL_TEST_REDIS=cluster).
    const client = createRedis(testServices().redisUrl, { maxRetriesPerRequest: 0 });
    const key = uniqueId('services-test');
    try {
      await client.set(key, 'ok', 'EX', 60);
      expect(await client.get(key)).toBe('ok');
      await client.del(key);
    } finally {
      await closeRedis(client);
    }
  });

  it('serves the test bucket over S3', async () => {
    const { s3 } = testServices();
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: s3.region,
      forcePathStyle: true,
      credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
    try {
      const head = await client.send(new HeadBucketCommand({ Bucket: s3.bucket }));
      expect(head.$metadata.httpStatusCode).toBe(200);
    } finally {
      client.destroy();
    }
  });

  it('makes ids that are distinct and safe as prefixes', () => {
    const ids = Array.from({ length: 200 }, () => uniqueId('my queue/label!'));
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(id).toMatch(/^[A-Za-z0-9_-]{1,40}$/);
  });

  it('gives each testEnv its own prefixes and cache folder, and applies overrides', async () => {
    const a = testEnv();
    const b = testEnv({ LOG_LEVEL: 'debug', PORT: '0' });
    expect(a.REDIS_URL).toBe(testServices().redisUrl);
    expect(a.QUEUE_PREFIX).not.toBe(b.QUEUE_PREFIX);
    expect(a.S3_PREFIX).not.toBe(b.S3_PREFIX);
    expect(a.MODEL_CACHE_DIR).not.toBe(b.MODEL_CACHE_DIR);
    expect((await stat(a.MODEL_CACHE_DIR!)).isDirectory()).toBe(true);
    expect(path.dirname(a.MODEL_CACHE_DIR!)).toBe(testServices().tmpDir);
    expect(a.API_KEYS).toBe('tenant-a:key-aaaaaaaaaaaaaaaa,tenant-b:key-bbbbbbbbbbbbbbbb');
    expect([a.LOG_LEVEL, b.LOG_LEVEL, b.PORT]).toEqual(['warn', 'debug', '0']);
  });
});
