/**
 * What a bulk run needs from the world (infra/bulk `BulkDeps`), built from config the same way
 * for the three processes that touch runs: the API (starts, reads, cancels), the dispatcher
 * (its supervisor drives API-created runs) and the `warmpool bulk` CLI (drives its own run).
 *
 * Input and output may live in any bucket, so object stores are made per bucket on first use
 * (same endpoint and credentials as the registry's) and kept until close().
 */

import { createDeploymentStore } from '../deployments/deployment-store.ts';
import { type Clock, systemClock } from '../kernel/clock.ts';
import type { Config } from '../kernel/config.ts';
import type { Log } from '../kernel/log.ts';
import type { RedisClient } from '../redis/client.ts';
import { cacheManifests } from '../registry/manifest-cache.ts';
import { createModelRegistry } from '../registry/model-registry.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { createS3ObjectStore } from '../registry/s3-object-store.ts';
import type { BulkDeps } from './bulk-runs.ts';

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
  /** Closes the object stores it made; idempotent. */
  close(): void;
}

export function createBulkWiring(config: Config, options: BulkWiringOptions): BulkWiring {
  const clock = options.clock ?? systemClock;
  const stores = new Map<string, ObjectStore & { close(): void }>();
  const storeFor = (bucket: string): ObjectStore => {
    let store = stores.get(bucket);
    if (!store) {
      // Spelled out: config.s3.credentials is non-enumerable (never serialised), so a spread drops it.
      store = createS3ObjectStore({ ...config.s3, credentials: config.s3.credentials, bucket });
      stores.set(bucket, store);
    }
    return store;
  };
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
    getManifest,
    servingVersion: async (model) => (await deployments.get(model))?.version ?? null,
    clock,
    log: options.log,
    jobs: { attempts: config.jobs.attempts, retentionS: config.jobs.retentionS },
    ...(options.notify ? { notify: options.notify } : {}),
  };
  return {
    deps,
    close() {
      for (const store of stores.values()) store.close();
      stores.clear();
    },
  };
}
