/**
 * Object stores for bulk inputs and outputs, which may live in other buckets than the
 * registry's: the same endpoint, region and credentials as the registry's store, with the bucket
 * a parameter. One S3 client per factory (so per endpoint: config names one), made on first use
 * and kept until close(); a store per bucket is a few closures over that client, made per call
 * and never cached, so no number of bucket names can grow what the process holds. (A cache of a
 * client per bucket, as before, kept one connection pool per name a request gave until the
 * process ended.) Which buckets a run may name at all is locations.ts's to say, before this is
 * asked for a store. Credentials are passed on explicitly: config.s3 keeps them non-enumerable
 * (so they never serialise), and a spread would silently drop them.
 */
import type { Config } from '../kernel/config.ts';
import type { ObjectStore } from './object-store.ts';
import { createS3BucketStores } from './s3-object-store.ts';

export interface StoreFactory {
  storeFor(bucket: string): ObjectStore;
  /** S3 clients this factory made (0 or 1): what a test asserts stays bounded. */
  readonly clients: number;
  close(): void;
}

export function createStoreFactory(s3: Config['s3']): StoreFactory {
  let stores: ReturnType<typeof createS3BucketStores> | undefined;
  let clients = 0;
  let closed = false;
  return {
    storeFor(bucket) {
      if (closed) throw new Error('the bulk store factory is closed');
      if (!stores) {
        stores = createS3BucketStores({ ...s3, ...(s3.credentials ? { credentials: s3.credentials } : {}) });
        clients++;
      }
      return stores.forBucket(bucket);
    },
    get clients() {
      return clients;
    },
    close() {
      closed = true;
      stores?.close();
    },
  };
}
