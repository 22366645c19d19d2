// The result cache on a real Redis: what makes two requests the same entry, what never does, and packed outputs in and out.
import { describe, expect, it } from 'vitest';
import { useTestRedis } from '../../test/support/services.ts';
import { packTensors, type TensorToPack, tensorData } from '../contracts/packed-tensors.ts';
import { resultCacheKey } from './keys.ts';
import { createResultCache, type DigestTarget, requestDigest } from './result-cache.ts';

const { redis, prefixes } = useTestRedis();

const f32 = (values: number[]) => new Uint8Array(Float32Array.from(values).buffer);
const features = (values: number[]) => ({ name: 'features', datatype: 'FP32' as const, shape: [1, values.length], bytes: f32(values) });
const mask = (values: number[]) => ({ name: 'mask', datatype: 'BOOL' as const, shape: [1, values.length], bytes: Uint8Array.from(values) });

const target = (over: Partial<DigestTarget> = {}): DigestTarget => ({
  tenant: 'tenant-a',
  modelSha256: 'a'.repeat(64),
  tensors: [features([0.5, 1.5]), mask([1, 0])],
  ...over,
});

const outputs = (values: number[], labels: string[] = ['a']): TensorToPack[] => [
  { name: 'score', datatype: 'FP32', shape: [1, values.length], data: Float32Array.from(values) },
  { name: 'label', datatype: 'BYTES', shape: [1, labels.length], data: labels },
  { name: 'ids', datatype: 'INT64', shape: [1, 2], data: BigInt64Array.from([-(2n ** 62n), 7n]) },
];

describe('requestDigest', () => {
  it('ignores the order of inputs and of requested outputs', () => {
    const a = target({ outputs: ['b', 'a'] });
    const b = target({ tensors: [mask([1, 0]), features([0.5, 1.5])], outputs: ['a', 'b'] });
    expect(requestDigest(a)).toBe(requestDigest(b));
  });

  const base = target({ tensors: [features([0, 1.5]), mask([1, 0])] });
  it.each<[string, Partial<DigestTarget>]>([
    ['another value', { tensors: [features([0, 1.25]), mask([1, 0])] }],
    ['another BOOL', { tensors: [features([0, 1.5]), mask([0, 0])] }],
    ['another shape of the same bytes', { tensors: [{ ...features([0, 1.5]), shape: [2, 1] }, mask([1, 0])] }],
    ['another datatype of the same bytes', { tensors: [{ ...features([0, 1.5]), datatype: 'INT32' }, mask([1, 0])] }],
    ['-0 instead of 0', { tensors: [features([-0, 1.5]), mask([1, 0])] }],
    ['other model bytes', { modelSha256: 'b'.repeat(64) }],
    ['another tenant', { tenant: 'tenant-b' }],
    ['some outputs instead of all', { outputs: ['score'] }],
    ['no outputs instead of all', { outputs: [] }],
  ])('differs for %s', (_name, change) => {
    expect(requestDigest({ ...base, ...change })).not.toBe(requestDigest(base));
  });

  it('keeps model and version readable in the key, so one version never reads another’s entries', () => {
    expect(resultCacheKey('p', 'scorer', '1', requestDigest(target()))).toMatch(/^p:result:scorer:1:[0-9a-f]{64}$/);
  });
});

describe('createResultCache', () => {
  it('returns the packed outputs put, as views over aligned bytes, with the TTL given', async () => {
    const prefix = prefixes.take('rc');
    const cache = createResultCache(redis, { prefix, ttlS: 120, now: () => 1234 });
    const digest = requestDigest(target());
    expect(await cache.get('scorer', '1', digest)).toBeNull();
    const packed = packTensors(outputs([0.25, -0], ['héllo', '']));
    expect(await cache.put('scorer', '1', digest, { outputs: packed, workerId: 'w1' })).toBe(true);

    const hit = await cache.get('scorer', '1', digest);
    expect(hit).toMatchObject({ specs: packed.specs, workerId: 'w1', storedAt: 1234 });
    expect((hit?.bytes.byteOffset ?? 1) % 8).toBe(0);
    const [score, label, ids] = (hit?.specs ?? []).map((s) => tensorData(s, hit?.bytes as Buffer));
    expect(Array.from(score as Float32Array)).toEqual([0.25, -0]);
    expect(Object.is((score as Float32Array)[1], -0)).toBe(true);
    expect(label).toEqual(['héllo', '']);
    expect(Array.from(ids as BigInt64Array)).toEqual([-(2n ** 62n), 7n]);

    expect(await cache.get('scorer', '2', digest)).toBeNull();
    expect(await cache.get('scorer', '1', requestDigest(target({ tenant: 'tenant-b' })))).toBeNull();
    const ttl = await redis.ttl(resultCacheKey(prefix, 'scorer', '1', digest));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(120);
  });

  it('stores many entries at once, leaving out those past maxBytes', async () => {
    const prefix = prefixes.take('rc');
    const cache = createResultCache(redis, { prefix, maxBytes: 400 });
    const small = packTensors(outputs([1]));
    const big = packTensors([{ name: 'score', datatype: 'FP32', shape: [1, 100], data: new Float32Array(100) }]);
    const stored = await cache.putMany([
      { model: 'm', version: '1', digest: 'd1', outputs: small, workerId: 'w' },
      { model: 'm', version: '1', digest: 'd2', outputs: big, workerId: 'w' },
      { model: 'm', version: '1', digest: 'd3', outputs: packTensors(outputs([3])), workerId: 'w' },
    ]);
    expect(stored).toBe(2);
    expect((await cache.get('m', '1', 'd1'))?.specs).toEqual(small.specs);
    expect(await cache.get('m', '1', 'd2')).toBeNull();
    expect(await redis.exists(resultCacheKey(prefix, 'm', '1', 'd2'))).toBe(0);
    const third = await cache.get('m', '1', 'd3');
    expect(Array.from(tensorData(third?.specs[0] as never, third?.bytes as Buffer) as Float32Array)).toEqual([3]);
    expect(await cache.put('m', '1', 'd2', { outputs: big, workerId: 'w' })).toBe(false);
  });

  it('reads a value it did not write (an entry from before packed outputs, a truncated one) as a miss', async () => {
    const prefix = prefixes.take('rc');
    const cache = createResultCache(redis, { prefix });
    const key = resultCacheKey(prefix, 'm', '1', 'd');
    await redis.set(key, JSON.stringify({ outputs: [], workerId: 'w', storedAt: 1 }));
    expect(await cache.get('m', '1', 'd')).toBeNull();
    await cache.put('m', '1', 'd', { outputs: packTensors(outputs([1, 2])), workerId: 'w' });
    const whole = (await redis.getBuffer(key)) as Buffer;
    await redis.set(key, whole.subarray(0, whole.byteLength - 4));
    expect(await cache.get('m', '1', 'd')).toBeNull();
    await redis.set(key, Buffer.from([1, 0]));
    expect(await cache.get('m', '1', 'd')).toBeNull();
  });
});
