import { describe, expect, it } from 'vitest';
import type { ModelManifest } from '../contracts/manifest.ts';
import { ManualClock } from '../kernel/clock.ts';
import { NotFoundError } from '../kernel/errors.ts';
import { cacheManifests } from './manifest-cache.ts';

function fakeRegistry() {
  const calls: string[] = [];
  let version = '1';
  let missing = false;
  return {
    calls,
    setLatest: (v: string) => (version = v),
    setMissing: (m: boolean) => (missing = m),
    registry: {
      async getManifest(name: string, v?: string) {
        calls.push(`${name}@${v ?? ''}`);
        if (missing) throw new NotFoundError('model_not_found', `no model ${name}`);
        return { name, version: v ?? version } as ModelManifest;
      },
      list: async () => [],
      listVersions: async () => [],
    },
  };
}

describe('cacheManifests', () => {
  it('serves a version from memory until its TTL, then reads again', async () => {
    const clock = new ManualClock(1000);
    const fake = fakeRegistry();
    const catalog = cacheManifests(fake.registry, { clock, ttlMs: 100 });
    await catalog.getManifest('m', '1');
    await catalog.getManifest('m', '1');
    expect(fake.calls).toEqual(['m@1']);
    await clock.advance(101);
    await catalog.getManifest('m', '1');
    expect(fake.calls).toEqual(['m@1', 'm@1']);
  });

  it('re-resolves "latest" on its shorter TTL so a new version appears', async () => {
    const clock = new ManualClock(0);
    const fake = fakeRegistry();
    const catalog = cacheManifests(fake.registry, { clock, ttlMs: 1000, latestTtlMs: 10 });
    expect((await catalog.getManifest('m')).version).toBe('1');
    fake.setLatest('2');
    expect((await catalog.getManifest('m')).version).toBe('1');
    await clock.advance(11);
    expect((await catalog.getManifest('m')).version).toBe('2');
  });

  it('does not cache misses', async () => {
    const clock = new ManualClock(0);
    const fake = fakeRegistry();
    const catalog = cacheManifests(fake.registry, { clock });
    fake.setMissing(true);
    await expect(catalog.getManifest('m', '1')).rejects.toBeInstanceOf(NotFoundError);
    fake.setMissing(false);
    expect((await catalog.getManifest('m', '1')).version).toBe('1');
    expect(fake.calls).toEqual(['m@1', 'm@1']);
  });

  it('treats an entry as expired when the clock goes backwards past its TTL', async () => {
    const clock = new ManualClock(10_000);
    const fake = fakeRegistry();
    const catalog = cacheManifests(fake.registry, { clock, ttlMs: 100 });
    await catalog.getManifest('m', '1');
    clock.set(0);
    await catalog.getManifest('m', '1');
    expect(fake.calls).toEqual(['m@1', 'm@1']);
  });
});
