/**
 * What an in-process bulk driver needs, over a test stack (support/stack.ts): its Redis, an S3
 * store factory, tenant-a's bulk locations, the stack's registry and deployments, the system
 * clock and a silent log. The caller closes `redis` and `stores`.
 */
import type { BulkDeps } from '../../infra/bulk/bulk-runs.ts';
import { createBulkLocations } from '../../infra/bulk/locations.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { createStoreFactory, type StoreFactory } from '../../infra/registry/store-factory.ts';
import { TEST_BUCKET, testBulkPrefix, uniqueId } from './services.ts';
import type { TestStack } from './stack.ts';

export function bulkDeps(stack: TestStack): { deps: BulkDeps; redis: RedisClient; stores: StoreFactory } {
  const redis = createRedis(stack.config.redisUrl);
  const stores = createStoreFactory(stack.config.s3);
  const deps: BulkDeps = {
    redis,
    prefix: stack.config.queuePrefix,
    storeFor: stores.storeFor,
    locations: createBulkLocations(stack.config),
    getManifest: (model, version) => stack.registry.getManifest(model, version),
    servingVersion: async (model) => (await stack.deployments.get(model))?.version ?? null,
    clock: systemClock,
    log: createLogger('silent'),
  };
  return { deps, redis, stores };
}

/** A fresh input/output pair in tenant-a's bulk location (testEnv's BULK_LOCATIONS): keys and s3:// URLs. */
export function bulkLocations(stack: TestStack, label: string) {
  const base = `${testBulkPrefix(stack.config.s3.prefix, 'tenant-a')}${uniqueId(label)}`;
  return {
    inPrefix: `${base}/in/`,
    outPrefix: `${base}/out/`,
    input: `s3://${TEST_BUCKET}/${base}/in/`,
    output: `s3://${TEST_BUCKET}/${base}/out/`,
  };
}
