/**
 * What a bulk run needs from the world (infra/bulk `BulkDeps`), built from config the same way
 * for the three processes that touch runs: the API (starts, reads, cancels), the dispatcher
 * (its supervisor drives API-created runs) and the `warmpool bulk` CLI (drives its own run).
 *
 * Input and output may live in other buckets than the registry's: one S3 client (same endpoint
 * and credentials as the registry's) serves every bucket (store-factory.ts), and which locations
 * a tenant may name is BULK_LOCATIONS (locations.ts).
 */

import { createDeploymentStore } from '../deployments/deployment-store.ts';
import { type Clock, systemClock } from '../kernel/clock.ts';
import type { Config } from '../kernel/config.ts';
import type { Log } from '../kernel/log.ts';
import type { RedisClient } from '../redis/client.ts';
import { cacheManifests } from '../registry/manifest-cache.ts';
import { createModelRegistry } from '../registry/model-registry.ts';
import { createStoreFactory, type StoreFactory } from '../registry/store-factory.ts';
import type { BulkDeps } from './bulk-runs.ts';
import { createBulkLocations } from './locations.ts';

export interface BulkWiringOptions {
  /** Used, not closed: the caller owns it. */
  redis: RedisClient;
  log: Log;
  clock?: Clock;
  /** Manifest lookups; default: the registry through a short-lived cache. */
  getManifest?: BulkDeps['getManifest'];
  notify?: BulkDeps['notify'];
}

export interface BulkWiring {
  deps: BulkDeps;
  /** The object stores behind deps.storeFor (its `clients` count is what tests watch). */
  stores: Pick<StoreFactory, 'clients'>;
  /** Closes the object stores it made; idempotent. */
  close(): void;
}

export function createBulkWiring(config: Config, options: BulkWiringOptions): BulkWiring {
  const clock = options.clock ?? systemClock;
  const stores = createStoreFactory(config.s3);
  const { storeFor } = stores;
  const deployments = createDeploymentStore(options.redis, config.queuePrefix);
  const getManifest =
    options.getManifest ??
    ((): BulkDeps['getManifest'] => {
      const catalog = cacheManifests(createModelRegistry({ store: storeFor(config.s3.bucket), prefix: config.s3.prefix }), { clock });
      return (model, version) => catalog.getManifest(model, version);
    })();
  const deps: BulkDeps = {
    redis: options.redis,
    prefix: config.queuePrefix,
    storeFor,
    locations: createBulkLocations(config),
    getManifest,
    servingVersion: async (model) => (await deployments.get(model))?.version ?? null,
    clock,
    log: options.log,
    jobs: { attempts: config.jobs.attempts, retentionS: config.jobs.retentionS },
    parquetFooterMaxBytes: config.bulk.parquetFooterMaxBytes,
    activeRuns: { perTenant: config.bulk.maxActiveRunsPerTenant, overall: config.bulk.maxActiveRuns },
    ...(options.notify ? { notify: options.notify } : {}),
  };
  return {
    deps,
    stores,
    close() {
      stores.close();
    },
  };
}
