/**
 * cli-errors.ts against the errors the real clients throw: ioredis and the AWS SDK against a
 * port nobody listens on, and the test suite's S3 server refusing a bucket or a key.
 */
import net from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, InvalidInputError, NotFoundError } from '../../infra/kernel/errors.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { testServices } from '../../test/support/services.ts';
import { describeFailure, type FailureContext, unexpectedFailure } from './cli-errors.ts';
import { UsageError } from './cli-spec.ts';
import { checkRedisReachable } from './redis-check.ts';

let deadPort: number;

beforeAll(async () => {
  // A port that was free a moment ago: connecting to it is refused.
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  deadPort = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
});

function context(overrides: Partial<FailureContext> = {}): FailureContext {
  return {
    command: 'models list',
    redis: { url: `redis://127.0.0.1:${deadPort}`, source: 'dev-env' },
    s3: { endpoint: `http://127.0.0.1:${deadPort + 1}`, bucket: 'warmpool', source: 'dev-env', credentialsSource: 'dev-env' },
    devEnvFile: '.warmpool/dev.env',
    devEnvWrittenAt: 0,
    now: 3 * 3_600_000,
    ...overrides,
  };
}

describe('Redis not running', () => {
  it('from dev.env: names the endpoint and the file, asks whether `warmpool dev` runs, and calls the file stale', async () => {
    const redis = createRedis(`redis://127.0.0.1:${deadPort}`, { maxRetriesPerRequest: 0, retryStrategy: () => null });
    const err = await redis.ping().catch((e: unknown) => e);
    await closeRedis(redis);
    expect(describeFailure(err, context())).toEqual({
      lines: [
        `warmpool models list: cannot reach Redis at redis://127.0.0.1:${deadPort} (from .warmpool/dev.env): is \`warmpool dev\` (npm start) running in this folder?`,
        '.warmpool/dev.env is stale: the `warmpool dev` that wrote it 3 h ago no longer answers there. Start `warmpool dev` (npm start) again, which rewrites it, or delete the file and set REDIS_URL.',
      ],
      exitCode: 1,
    });
  });

  it('the check before a command fails at once, and its error reads the same; from the environment it names REDIS_URL', async () => {
    const err = await checkRedisReachable(`redis://127.0.0.1:${deadPort}`).catch((e: unknown) => e);
    expect(
      describeFailure(err, context({ command: 'deployments', redis: { url: `redis://127.0.0.1:${deadPort}`, source: 'env' } })),
    ).toEqual({
      lines: [`warmpool deployments: cannot reach Redis at redis://127.0.0.1:${deadPort} (REDIS_URL): is Redis running there?`],
      exitCode: 1,
    });
    const defaulted = describeFailure(err, context({ redis: { url: 'redis://127.0.0.1:6379', source: 'default' } }));
    expect(defaulted?.lines.join('\n')).toMatch(/REDIS_URL is unset and there is no \.warmpool\/dev\.env here\)\nstart `warmpool dev`/);
  });
});

describe('S3', () => {
  const s3 = () => testServices().s3;
  const store = (options: { endpoint?: string; bucket?: string; accessKeyId?: string; secretAccessKey?: string }) =>
    createS3ObjectStore({
      endpoint: options.endpoint ?? s3().endpoint,
      bucket: options.bucket ?? s3().bucket,
      region: s3().region,
      forcePathStyle: true,
      credentials: {
        accessKeyId: options.accessKeyId ?? s3().accessKeyId,
        secretAccessKey: options.secretAccessKey ?? s3().secretAccessKey,
      },
      maxAttempts: 1,
    });
  const failureOf = async (options: Parameters<typeof store>[0], ctx: Partial<FailureContext['s3']> = {}) => {
    const client = store(options);
    const err = await client.list('').catch((e: unknown) => e);
    client.close();
    // Redis on another port: the refused port says which service it was.
    const redis = { url: `redis://127.0.0.1:${deadPort + 1}`, source: 'dev-env' as const };
    return describeFailure(err, context({ redis, s3: { ...context().s3, endpoint: options.endpoint ?? s3().endpoint, ...ctx } }));
  };
  it('not running: the endpoint, by the port that refused', async () => {
    const endpoint = `http://127.0.0.1:${deadPort}`;
    const failure = await failureOf({ endpoint }, { source: 'env' });
    expect(failure?.lines).toEqual([`warmpool models list: cannot reach S3 at ${endpoint} (S3_ENDPOINT): is S3 running there?`]);
  });

  it('a bucket that does not exist: says so and what to set', async () => {
    const failure = await failureOf({ bucket: 'no-such-bucket-here' }, { bucket: 'no-such-bucket-here' });
    expect(failure).toEqual({
      lines: [
        `warmpool models list: S3 bucket "no-such-bucket-here" does not exist at ${s3().endpoint}`,
        'create it, or set S3_BUCKET to a bucket that exists (S3_BUCKET is "no-such-bucket-here")',
      ],
      exitCode: 1,
    });
  });

  it('credentials refused (s3rver checks the key id): names the variables and where they came from', async () => {
    const failure = await failureOf({ accessKeyId: 'NOT-A-KEY' });
    expect(failure?.lines[0]).toBe(`warmpool models list: S3 at ${s3().endpoint} refused the credentials (InvalidAccessKeyId)`);
    expect(failure?.lines[1]).toMatch(/^check AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \(keys from \.warmpool\/dev\.env\)/);
  });
});

describe('the rest', () => {
  it('a model that is not published: the registry says which, the hint says how to look', () => {
    const failure = describeFailure(new NotFoundError('model_not_found', 'no model named nope in the registry'), context());
    expect(failure).toEqual({
      lines: [
        'warmpool models list: no model named nope in the registry',
        '`warmpool models list` shows what is published; `warmpool models publish` adds a model',
      ],
      exitCode: 1,
    });
  });

  it('usage, configuration and input errors exit 2 with their message', () => {
    expect(describeFailure(new UsageError("warmpool deploy: unknown option '--x'"), context())?.exitCode).toBe(2);
    expect(describeFailure(new ConfigError('invalid_config', 'PORT: expected a number'), context())?.lines).toEqual([
      'warmpool: configuration error: PORT: expected a number',
    ]);
    expect(describeFailure(new InvalidInputError('invalid_argument', '--min must be a non-negative integer'), context())).toEqual({
      lines: ['warmpool models list: --min must be a non-negative integer'],
      exitCode: 2,
    });
  });

  it('anything else is unexpected: its message and where the stack trace is (not under --debug, which prints it)', () => {
    const err = new TypeError('cannot read properties of undefined');
    expect(describeFailure(err, context())).toBeUndefined();
    expect(unexpectedFailure(err, 'bench', false).lines).toEqual([
      'warmpool bench: TypeError: cannot read properties of undefined',
      '(unexpected: run it again with --debug, or WARMPOOL_DEBUG=1, for the stack trace)',
    ]);
    expect(unexpectedFailure(err, 'bench', true).lines).toHaveLength(1);
  });
});
