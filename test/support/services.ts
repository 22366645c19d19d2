/**
 * What a test needs to reach the shared services started by test/global-setup.ts, and a
 * complete, isolated environment for warmpool processes under test.
 *
 * Isolation: every call to testEnv() gets its own QUEUE_PREFIX, S3_PREFIX and MODEL_CACHE_DIR,
 * so tests running in parallel against the same Redis and bucket never see each other's data.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, inject } from 'vitest';
import { closeRedis, createRedis, deleteMany, isCluster, type KeyScanner, type RedisClient, scanKeys } from '../../infra/redis/client.ts';

export const TEST_BUCKET = 'warmpool-test';
export const TEST_REGION = 'us-east-1';
export const TEST_API_KEYS = 'tenant-a:key-aaaaaaaaaaaaaaaa,tenant-b:key-bbbbbbbbbbbbbbbb';

/** The environment variables global setup sets (and forked workers and child processes inherit). */
export const TEST_SERVICE_ENV = {
  redisUrl: 'WARMPOOL_TEST_REDIS_URL',
  s3Endpoint: 'WARMPOOL_TEST_S3_ENDPOINT',
  s3Bucket: 'WARMPOOL_TEST_S3_BUCKET',
  s3AccessKeyId: 'WARMPOOL_TEST_S3_KEY',
  s3SecretAccessKey: 'WARMPOOL_TEST_S3_SECRET',
  /** A folder global setup removes at the end; testEnv's cache folders live in it. */
  tmpDir: 'WARMPOOL_TEST_TMPDIR',
} as const;

/** The same values, as handed to vitest's `provide`. */
export type ProvidedServices = Record<keyof typeof TEST_SERVICE_ENV, string>;

export interface TestServices {
  redisUrl: string;
  tmpDir: string;
  s3: { endpoint: string; bucket: string; region: string; accessKeyId: string; secretAccessKey: string };
}

export function testServices(): TestServices {
  const s = fromEnv() ?? fromProvide();
  if (s === undefined) {
    throw new Error(
      `Test services are not running: ${TEST_SERVICE_ENV.redisUrl} is unset. ` +
        'Run tests through vitest with vitest.config.ts (globalSetup: test/global-setup.ts), e.g. `npx vitest run`.',
    );
  }
  return {
    redisUrl: s.redisUrl,
    tmpDir: s.tmpDir,
    s3: {
      endpoint: s.s3Endpoint,
      bucket: s.s3Bucket,
      region: TEST_REGION,
      accessKeyId: s.s3AccessKeyId,
      secretAccessKey: s.s3SecretAccessKey,
    },
  };
}

function fromEnv(): ProvidedServices | undefined {
  const entries = Object.entries(TEST_SERVICE_ENV).map(([field, name]) => [field, process.env[name]] as const);
  if (entries.some(([, value]) => value === undefined || value === '')) return undefined;
  return Object.fromEntries(entries) as ProvidedServices;
}

function fromProvide(): ProvidedServices | undefined {
  try {
    return inject('warmpoolServices');
  } catch {
    // inject() only works inside a vitest worker; outside one there is nothing to read.
    return undefined;
  }
}

let counter = 0;

/**
 * A short id unique per call, e.g. `queue-k3f9a2-7`: [A-Za-z0-9_-] only, so it is valid as a
 * QUEUE_PREFIX, a Redis key part and an S3 prefix. The random part keeps ids distinct across
 * parallel test workers; the counter, across calls in one.
 */
export function uniqueId(label: string): string {
  const safe =
    label
      .replace(/[^A-Za-z0-9_-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 24) || 't';
  return `${safe}-${randomBytes(4).toString('hex')}-${(counter++).toString(36)}`;
}

/** A complete environment for a warmpool process under test, isolated from every other call. */
export function testEnv(overrides: Record<string, string> = {}): NodeJS.ProcessEnv {
  const services = testServices();
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    REDIS_URL: services.redisUrl,
    QUEUE_PREFIX: uniqueId('q'),
    S3_ENDPOINT: services.s3.endpoint,
    S3_BUCKET: services.s3.bucket,
    S3_PREFIX: uniqueId('s3'),
    AWS_REGION: services.s3.region,
    AWS_ACCESS_KEY_ID: services.s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: services.s3.secretAccessKey,
    MODEL_CACHE_DIR: mkdtempSync(path.join(services.tmpDir, 'model-cache-')),
    API_KEYS: TEST_API_KEYS,
    ADMIN_TENANTS: 'tenant-a',
    LOG_LEVEL: 'warn',
    ...overrides,
  };
  // Each test tenant's bulk runs may use its own folder under this env's S3 prefix (testBulkPrefix).
  env.BULK_LOCATIONS =
    overrides.BULK_LOCATIONS ?? TEST_TENANTS.map((t) => `${t}:s3://${env.S3_BUCKET}/${testBulkPrefix(env.S3_PREFIX ?? '', t)}`).join(';');
  return env;
}

const TEST_TENANTS = ['tenant-a', 'tenant-b'] as const;

/**
 * The key prefix testEnv grants `tenant` in BULK_LOCATIONS (unless overridden): its bulk runs
 * read and write under `s3://<S3_BUCKET>/<S3_PREFIX>/bulk/<tenant>/` and nowhere else.
 */
export function testBulkPrefix(s3Prefix: string, tenant: string): string {
  const root = s3Prefix.replace(/^\/+|\/+$/g, '');
  return `${root ? `${root}/` : ''}bulk/${tenant}/`;
}

/**
 * Key prefixes on the test Redis that a suite deletes after each test: `take(label)` hands out a
 * fresh one (or `track` records one made elsewhere), `cleanup()` — in the suite's afterEach —
 * deletes every key under the prefixes handed out since the last cleanup.
 */
export function redisPrefixes(
  redis: { keys(pattern: string): Promise<string[]>; del(...keys: string[]): Promise<number> } & Partial<KeyScanner>,
) {
  const taken: string[] = [];
  const track = (prefix: string): string => {
    taken.push(prefix);
    return prefix;
  };
  return {
    track,
    take: (label: string): string => track(uniqueId(label)),
    /** The prefix handed out last. */
    last: (): string | undefined => taken.at(-1),
    async cleanup(): Promise<void> {
      for (const prefix of taken.splice(0)) {
        if (isCluster(redis)) {
          // KEYS sees one node and DEL one slot: scan every master, delete key by key.
          for await (const keys of scanKeys(redis, `${prefix}:*`)) await deleteMany(redis, keys);
          continue;
        }
        const keys = await redis.keys(`${prefix}:*`);
        if (keys.length > 0) await redis.del(...keys);
      }
    },
  };
}

/**
 * The suite's Redis for a test file (or a describe block): one client, the key prefixes handed
 * out through `prefixes` deleted after each test, the client closed after all of them. Call it
 * where hooks may be registered: at the top level of a test file or inside a describe.
 */
export function useTestRedis(): { redis: RedisClient; prefixes: ReturnType<typeof redisPrefixes> } {
  const redis = createRedis(testServices().redisUrl);
  const prefixes = redisPrefixes(redis);
  afterEach(() => prefixes.cleanup());
  afterAll(() => closeRedis(redis));
  return { redis, prefixes };
}
