/**
 * vitest globalSetup: one redis-server and one S3-protocol server for the whole run, in a temp
 * folder removed at the end. Tests isolate themselves by key prefix (see test/support/services.ts),
 * so sharing two servers is safe and far cheaper than one per file.
 *
 * `WARMPOOL_TEST_REDIS=cluster` runs the suite against a local 3-master Redis Cluster instead
 * (scripts/dev/redis-cluster.ts): REDIS_URL is then its `redis+cluster://` URL.
 *
 * The endpoints reach tests two ways: environment variables (inherited by the forked test
 * workers and by any process a test spawns) and vitest's `provide`/`inject`.
 *
 * Tests run the TypeScript; the `warmpool` processes they spawn run dist/ (bin/warmpool.mjs).
 * A stale dist/ is built here once, so no test pays for the build or sees its line on stderr.
 */
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildDist, staleReason } from '../scripts/build.mjs';
import { startRedisCluster } from '../scripts/dev/redis-cluster.ts';
import { ensureRedisServer, startRedisServer } from '../scripts/dev/redis-server.ts';
import { startS3Server } from '../scripts/dev/s3-server.ts';
import { type ProvidedServices, TEST_BUCKET, TEST_SERVICE_ENV } from './support/services.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    warmpoolServices: ProvidedServices;
  }
}

/**
 * vitest.config.ts has two projects (unit, integration) and each runs the global setup: the
 * services start once, on the first call, and the others share them. Both calls run in vitest's
 * main process, so the shared start lives on globalThis; the last teardown stops them.
 */
interface SharedStart {
  started: Promise<{ services: ProvidedServices; teardown: () => Promise<void> }>;
  users: number;
}
const SHARED = Symbol.for('warmpool.test.globalSetup');
type WithShared = typeof globalThis & { [SHARED]?: SharedStart };

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const holder = globalThis as WithShared;
  holder[SHARED] ??= { started: start(), users: 0 };
  const shared = holder[SHARED];
  shared.users += 1;
  const { services, teardown } = await shared.started.catch((err: unknown) => {
    delete holder[SHARED];
    throw err;
  });
  publish(project, services);
  let done = false;
  return async () => {
    if (done) return;
    done = true;
    shared.users -= 1;
    if (shared.users > 0) return;
    delete holder[SHARED];
    await teardown();
  };
}

async function start(): Promise<{ services: ProvidedServices; teardown: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'warmpool-test-'));
  const cleanups: (() => Promise<void>)[] = [() => rm(dir, { recursive: true, force: true })];
  // Newest first (servers stop before their folder goes), and every one runs even if one fails.
  const teardown = async () => {
    const errors: unknown[] = [];
    for (const cleanup of cleanups.splice(0).reverse()) {
      await cleanup().catch((err: unknown) => errors.push(err));
    }
    if (errors.length > 0) throw new AggregateError(errors, 'test services teardown failed');
  };
  try {
    await buildIfStale();
    const binary = await ensureRedisServer({ install: 'auto', log: (line) => console.log(`[global-setup] ${line}`) });
    const redis =
      process.env.WARMPOOL_TEST_REDIS === 'cluster'
        ? await startRedisCluster({ binary, dir: path.join(dir, 'redis-cluster') })
        : await startRedisServer({ binary, dir });
    cleanups.push(() => redis.close());
    const s3 = await startS3Server({ directory: path.join(dir, 's3'), buckets: [TEST_BUCKET] });
    cleanups.push(() => s3.close());
    const services: ProvidedServices = {
      redisUrl: redis.url,
      s3Endpoint: s3.endpoint,
      s3Bucket: TEST_BUCKET,
      s3AccessKeyId: s3.accessKeyId,
      s3SecretAccessKey: s3.secretAccessKey,
      tmpDir: path.join(dir, 'tmp'),
    };
    await mkdir(services.tmpDir);
    return { services, teardown };
  } catch (err) {
    await teardown();
    throw err;
  }
}

async function buildIfStale(): Promise<void> {
  const stale = staleReason();
  if (!stale) return;
  try {
    await buildDist({ quiet: true });
    console.log(`[global-setup] ${stale}: built dist/ for the warmpool processes tests start`);
  } catch (err) {
    // Not fatal: bin/warmpool.mjs then runs the sources through tsx, saying why on stderr.
    const first = err instanceof Error ? (err.message.split('\n').find((l) => l.includes('ERROR')) ?? err.message) : String(err);
    console.log(`[global-setup] dist/ could not be built (${first.trim()}): spawned warmpool processes will run the sources`);
  }
}

function publish(project: TestProject, services: ProvidedServices): void {
  for (const field of Object.keys(TEST_SERVICE_ENV) as (keyof ProvidedServices)[]) {
    process.env[TEST_SERVICE_ENV[field]] = services[field];
  }
  project.provide('warmpoolServices', services);
}
