import { describe, expect, it } from 'vitest';
import { type PoolScaler, type PoolWorld, simulatePool } from './many-model-world.ts';

const START = Date.UTC(2026, 0, 5);

function world(counts: number[][], over: Partial<PoolWorld> = {}): PoolWorld {
  return {
    models: counts.map((_, k) => ({ name: `m${k}`, loadMs: 4_000, memoryMb: 1_000 })),
    counts,
    startMs: START,
    fromMinute: 0,
    toMinute: counts[0]?.length ?? 0,
    pattern: { kind: 'uniform' },
    seed: 1,
    coldStartMs: 60_000,
    maxBatch: 8,
    serviceMs: (batch) => 10 * batch,
    tickMs: 5_000,
    sloMs: 30_000,
    memoryMb: 2_000,
    ...over,
  };
}

/** A scaler that holds the pool as it started and does nothing: the world's router alone places models. */
const still = (initial: number[][]): PoolScaler => ({ name: 'still', initial: () => initial, tick: () => [] });

describe('simulatePool', () => {
  it('loads a model nobody holds once, however many of its jobs arrive meanwhile', () => {
    // The load outlasts the minute, so all 50 arrive while it is under way.
    const slow = [{ name: 'm0', loadMs: 120_000, memoryMb: 1_000 }];
    const run = simulatePool(still([[]]), world([[50]], { models: slow }));
    expect(run.modelLoads).toBe(1);
    expect(run.jobs).toBe(50);
    expect(run.hitRatio).toBe(0);
  });

  it('serves a model only on a worker holding it: jobs of a held model hit, others wait for a load', () => {
    const slow = ['m0', 'm1'].map((name) => ({ name, loadMs: 120_000, memoryMb: 1_000 }));
    const run = simulatePool(still([[0]]), world([[6], [6]], { models: slow }));
    expect(run.modelLoads).toBe(1);
    expect(run.hitRatio).toBe(0.5);
    expect(run.sloAttainment).toBeLessThan(1);
  });

  it('evicts the least recently used model when memory is full', () => {
    // Budget 2 models: m0 and m1 held, m1 used last; m2 arrives and takes m0's room.
    const counts = [
      [1, 0, 0],
      [0, 1, 0],
      [0, 0, 1],
    ];
    const run = simulatePool(still([[0, 1]]), world(counts));
    expect(run.evictions).toBe(1);
    expect(run.modelLoads).toBe(1);
    expect(run.hitRatio).toBeCloseTo(2 / 3);
  });

  it('bills a warm worker holding nothing as standby and one holding a model as active', () => {
    const run = simulatePool(still([[0], []]), world([[0, 0]]));
    expect(run.workerSeconds.active).toBe(120);
    expect(run.workerSeconds.standby).toBe(120);
  });

  it('takes loads and batches in turn, a load for a model with jobs waiting before loads made ahead of demand', () => {
    // Worker 0 holds m0; on its first tick the scaler asks for five 8-s loads ahead of demand (m1..m5).
    // Meanwhile m0's jobs keep arriving and one job comes for m6, which nobody holds. Loads first
    // and in order would hold m0's jobs up to 40 s and m6's job behind all five.
    const models = Array.from({ length: 7 }, (_, k) => ({ name: `m${k}`, loadMs: 8_000, memoryMb: 1_000 }));
    const counts = [[12], [0], [0], [0], [0], [0], [1]];
    let asked = false;
    const ahead: PoolScaler = {
      name: 'ahead',
      initial: () => [[0]],
      tick: (obs) => {
        if (asked) return [];
        asked = true;
        const id = obs.workers[0]?.id ?? '';
        return [1, 2, 3, 4, 5].map((model) => ({ action: 'load' as const, workerId: id, model }));
      },
    };
    const run = simulatePool(ahead, world(counts, { models, memoryMb: 10_000, sloMs: 20_000 }));
    expect(run.modelLoads).toBe(6);
    expect(run.sloAttainment).toBe(1);
  });
});
