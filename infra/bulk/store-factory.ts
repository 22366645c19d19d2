/**
 * Object stores per bucket, for bulk inputs and outputs that may live in any bucket: the same
 * endpoint, region and credentials as the registry's store, with the bucket replaced, made on
 * first use and kept until close(). Credentials are passed on explicitly: config.s3 keeps them
 * non-enumerable (so they never serialise), and a spread would silently drop them.
 */
import type { Config } from '../kernel/config.ts';
import type { ObjectStore } from '../registry/object-store.ts';
import { createS3ObjectStore } from '../registry/s3-object-store.ts';

export interface StoreFactory {
  storeFor(bucket: string): ObjectStore;
  close(): void;
}

export function createStoreFactory(s3: Config['s3']): StoreFactory {
  const stores = new Map<string, ObjectStore & { close(): void }>();
  return {
    storeFor(bucket) {
      let store = stores.get(bucket);
      if (!store) {
        store = createS3ObjectStore({
          ...s3,
          bucket,
          ...(s3.credentials ? { credentials: s3.credentials } : {}),
        });
        stores.set(bucket, store);
      }
      return store;
    },
    close() {
      for (const store of stores.values()) store.close();
      stores.clear();
    },
  };
}
