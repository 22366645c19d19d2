/**
 * An ObjectStore made on first use. The AWS SDK takes 75–110 ms of a 2-core host's CPU to
 * import, more than anything else a worker loads; a process whose first use of S3 comes after
 * other work (the worker reports `downloading` before its first GET) loads it then, by a dynamic
 * import inside `make`, instead of before its first line runs.
 *
 * One `make` for all callers, concurrent or not; a failed `make` is the answer to every later
 * call too (a module that does not load will not load on the next try). close() is idempotent:
 * before first use it makes nothing, during `make` it closes what `make` returns, and calls after
 * it reject.
 */
import type { ObjectStore } from './object-store.ts';

export type ClosableObjectStore = ObjectStore & { close(): void };

export function lazyObjectStore(make: () => Promise<ObjectStore & { close?(): void }>): ClosableObjectStore {
  let made: Promise<ObjectStore & { close?(): void }> | undefined;
  let closed = false;
  const store = async () => {
    if (closed) throw new Error('the object store is closed');
    made ??= make();
    return made;
  };
  return {
    put: async (key, body, options) => (await store()).put(key, body, options),
    get: async (key) => (await store()).get(key),
    getRange: async (key, start, endExclusive, options) => (await store()).getRange(key, start, endExclusive, options),
    getBytes: async (key) => (await store()).getBytes(key),
    head: async (key) => (await store()).head(key),
    list: async (prefix) => (await store()).list(prefix),
    delete: async (key) => (await store()).delete(key),
    close() {
      if (closed) return;
      closed = true;
      // A make that failed has nothing to close.
      made?.then(
        (s) => s.close?.(),
        () => undefined,
      );
    },
  };
}
