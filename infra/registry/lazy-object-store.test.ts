/**
 * lazyObjectStore over the real S3-protocol server from global setup: nothing is made before the
 * first call, one store serves every caller, and close() closes whatever was (or is being) made.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { testServices, uniqueId } from '../../test/support/services.ts';
import { lazyObjectStore } from './lazy-object-store.ts';
import type { ObjectStore } from './object-store.ts';
import { createS3ObjectStore } from './s3-object-store.ts';

const prefix = uniqueId('lazy-store');
const made: Array<ObjectStore & { close(): void }> = [];

function realStore() {
  const { s3 } = testServices();
  const store = createS3ObjectStore({
    endpoint: s3.endpoint,
    bucket: s3.bucket,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
  made.push(store);
  return store;
}

/** A real store whose close() is counted. */
function counted() {
  const closes: number[] = [];
  let makes = 0;
  const make = async () => {
    makes++;
    const store = realStore();
    return {
      ...store,
      close() {
        closes.push(1);
        store.close();
      },
    };
  };
  return { make, closes, makes: () => makes };
}

afterAll(async () => {
  const cleanup = realStore();
  for (const o of await cleanup.list(`${prefix}/`)) await cleanup.delete(o.key);
  for (const store of made) store.close();
});

describe('lazyObjectStore', () => {
  it('makes nothing before the first call, then one store for every caller', async () => {
    const c = counted();
    const store = lazyObjectStore(c.make);
    expect(c.makes()).toBe(0);
    await Promise.all([store.put(`${prefix}/a`, 'one'), store.put(`${prefix}/b`, 'two'), store.head(`${prefix}/none`)]);
    expect(c.makes()).toBe(1);
    expect(new TextDecoder().decode((await store.getBytes(`${prefix}/a`)) ?? new Uint8Array())).toBe('one');
    expect((await store.list(`${prefix}/`)).map((o) => o.key)).toEqual([`${prefix}/a`, `${prefix}/b`]);
    await store.delete(`${prefix}/b`);
    expect(await store.get(`${prefix}/b`)).toBeNull();
    expect(c.makes()).toBe(1);
    store.close();
    store.close();
    await Promise.resolve();
    expect(c.closes).toEqual([1]);
  });

  it('closed before any call makes nothing, and refuses calls after', async () => {
    const c = counted();
    const store = lazyObjectStore(c.make);
    store.close();
    await expect(store.head(`${prefix}/a`)).rejects.toThrow('the object store is closed');
    expect(c.makes()).toBe(0);
  });

  it('closed while the store is being made closes it once made', async () => {
    const c = counted();
    let release: () => void = () => {};
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    const store = lazyObjectStore(async () => {
      await gate;
      return c.make();
    });
    const call = store.head(`${prefix}/a`);
    store.close();
    release();
    await call;
    await new Promise((r) => setTimeout(r, 0));
    expect(c.closes).toEqual([1]);
  });

  it('answers every call with the failure of a make that failed, without trying again', async () => {
    let makes = 0;
    const store = lazyObjectStore(async () => {
      makes++;
      throw new Error('module did not load');
    });
    await expect(store.head('k')).rejects.toThrow('module did not load');
    await expect(store.list('p/')).rejects.toThrow('module did not load');
    expect(makes).toBe(1);
    store.close();
  });
});
