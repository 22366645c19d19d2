import { describe, expect, it } from 'vitest';
import { ManualClock } from '../kernel/clock.ts';
import { cacheDeployments } from './deployment-cache.ts';
import type { Deployment, DeploymentStore } from './deployment-store.ts';

function fakeStore() {
  const records = new Map<string, Deployment>();
  let reads = 0;
  const record = (model: string, version: string): Deployment =>
    ({ model, version, versions: [{ version, weight: 100 }], revision: 1 }) as unknown as Deployment;
  const store = {
    async get(model: string) {
      reads++;
      return records.get(model) ?? null;
    },
    async list() {
      return [...records.values()];
    },
    async put(input: { model: string; version: string }) {
      const d = record(input.model, input.version);
      records.set(input.model, d);
      return d;
    },
    async update(model: string) {
      return records.get(model) as Deployment;
    },
    async rollback(model: string) {
      return records.get(model) as Deployment;
    },
    async history() {
      return [];
    },
    async remove(model: string) {
      return records.delete(model);
    },
  } as unknown as DeploymentStore;
  return { store, records, record, reads: () => reads };
}

describe('cacheDeployments', () => {
  it('answers from memory within the ttl, absent deployments too, and reads again after it', async () => {
    const clock = new ManualClock(1000);
    const { store, records, record, reads } = fakeStore();
    const cached = cacheDeployments(store, { clock, ttlMs: 1000 });
    expect(await cached.get('m')).toBeNull();
    records.set('m', record('m', '2'));
    expect(await cached.get('m')).toBeNull(); // another process's write: seen within the ttl
    expect(reads()).toBe(1);
    await clock.advance(1000);
    expect((await cached.get('m'))?.version).toBe('2');
    expect(reads()).toBe(2);
  });

  it("this process's writes are seen at once", async () => {
    const clock = new ManualClock(1000);
    const { store } = fakeStore();
    const cached = cacheDeployments(store, { clock });
    expect(await cached.get('m')).toBeNull();
    await cached.put({ model: 'm', version: '3' } as never);
    expect((await cached.get('m'))?.version).toBe('3');
    await cached.remove('m');
    expect(await cached.get('m')).toBeNull();
  });

  it('a clock that went backwards reads again', async () => {
    const clock = new ManualClock(10_000);
    const { store, reads } = fakeStore();
    const cached = cacheDeployments(store, { clock });
    await cached.get('m');
    clock.set(5_000);
    await cached.get('m');
    expect(reads()).toBe(2);
  });
});
