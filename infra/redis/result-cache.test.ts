// The result cache on a real Redis: what makes two requests the same entry, and what never does.
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import type { OipTensor } from '../contracts/oip.ts';
import { resultCacheKey } from './keys.ts';
import { type CacheTarget, createResultCache, requestDigest } from './result-cache.ts';

const { redis, prefixes } = useTestRedis();

/** Where the cache keeps `t`'s entry. */
function entryKey(prefix: string, t: CacheTarget): string {
  return resultCacheKey(prefix, t.model, t.version, requestDigest(t));
}

function newPrefix(): string {
  return prefixes.take('rc');
}

const features = (data: number[]): OipTensor => ({ name: 'features', datatype: 'FP32', shape: [1, data.length], data });
const mask = (data: boolean[]): OipTensor => ({ name: 'mask', datatype: 'BOOL', shape: [1, data.length], data });

const target = (over: Partial<CacheTarget> = {}): CacheTarget => ({
  tenant: 'tenant-a',
  model: 'scorer',
  version: '1',
  modelSha256: 'a'.repeat(64),
  inputs: [features([0.5, 1.5]), mask([true, false])],
  ...over,
});

const outputs: OipTensor[] = [{ name: 'score', datatype: 'FP32', shape: [1, 1], data: [0.25] }];

describe('requestDigest', () => {
  it('ignores the order of inputs and of requested outputs, parameters and the request id', () => {
    const a = target({ outputs: [{ name: 'b' }, { name: 'a' }] });
    const b = target({
      inputs: [mask([true, false]), { ...features([0.5, 1.5]), parameters: { note: 'x' } }],
      outputs: [{ name: 'a', parameters: { binary_data: false } }, { name: 'b' }],
    });
    expect(requestDigest(a)).toBe(requestDigest(b));
  });

  const base = target({ inputs: [features([0, 1.5]), mask([true, false])] });
  it.each<[string, Partial<CacheTarget>]>([
    ['another value', { inputs: [features([0, 1.25]), mask([true, false])] }],
    ['another BOOL', { inputs: [features([0, 1.5]), mask([false, false])] }],
    ['another shape of the same data', { inputs: [{ ...features([0, 1.5]), shape: [2, 1] }, mask([true, false])] }],
    ['-0 instead of 0', { inputs: [features([-0, 1.5]), mask([true, false])] }],
    ['other model bytes', { modelSha256: 'b'.repeat(64) }],
    ['some outputs instead of all', { outputs: [{ name: 'score' }] }],
  ])('differs for %s', (_name, change) => {
    expect(requestDigest({ ...base, ...change })).not.toBe(requestDigest(base));
  });

  it('keeps model and version readable in the key, so one version never reads another’s entries', () => {
    expect(entryKey('p', target())).toMatch(/^p:result:scorer:1:[0-9a-f]{64}$/);
    expect(entryKey('p', target({ version: '2' }))).not.toBe(entryKey('p', target()));
  });
});

describe('createResultCache', () => {
  it('returns what was put, for the same request only, with the TTL given', async () => {
    const prefix = newPrefix();
    const cache = createResultCache(redis, { prefix, ttlS: 120, now: () => 1234 });
    expect(await cache.get(target())).toBeNull();
    expect(await cache.put(target(), { outputs, workerId: 'w1' })).toBe(true);
    expect(await cache.get(target({ inputs: [mask([true, false]), features([0.5, 1.5])] }))).toEqual({
      outputs,
      workerId: 'w1',
      storedAt: 1234,
    });
    expect(await cache.get(target({ version: '2' }))).toBeNull();
    expect(await cache.get(target({ modelSha256: 'c'.repeat(64) }))).toBeNull();
    const ttl = await redis.ttl(entryKey(prefix, target()));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(120);
  });

  it('never answers one tenant with what another tenant sent', async () => {
    const cache = createResultCache(redis, { prefix: newPrefix() });
    await cache.put(target({ tenant: 'tenant-a' }), { outputs: [], workerId: 'w' });
    expect(await cache.get(target({ tenant: 'tenant-a' }))).not.toBeNull();
    expect(await cache.get(target({ tenant: 'tenant-b' }))).toBeNull();
  });

  it('does not store a result larger than maxBytes', async () => {
    const prefix = newPrefix();
    const cache = createResultCache(redis, { prefix, maxBytes: 200 });
    const big: OipTensor[] = [{ name: 'score', datatype: 'FP32', shape: [1, 100], data: new Array(100).fill(0.123456) }];
    expect(await cache.put(target(), { outputs: big, workerId: 'w1' })).toBe(false);
    expect(await cache.get(target())).toBeNull();
    expect(await redis.exists(entryKey(prefix, target()))).toBe(0);
  });

  it('reads an entry it cannot parse as a miss', async () => {
    const prefix = newPrefix();
    const cache = createResultCache(redis, { prefix });
    await redis.set(entryKey(prefix, target()), '{"outputs": "not a list"}');
    expect(await cache.get(target())).toBeNull();
    await redis.set(entryKey(prefix, target()), '{truncated');
    expect(await cache.get(target())).toBeNull();
  });
});
