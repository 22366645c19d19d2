/** Where a first request's model goes at once: the planner's order, on the same worker views. */
import { describe, expect, it } from 'vitest';
import { chooseLanding } from './pool-placement.ts';
import type { PoolWorkerView } from './pool-plan.ts';

const NOW = 1_700_000_000_000;

describe('chooseLanding', () => {
  const mb = () => 100;
  const w = (id: string, models: string[], inFlight = 0, state: PoolWorkerView['state'] = 'warm'): PoolWorkerView => ({
    id,
    state,
    models: models.map((model) => ({ model, lastUsedAt: NOW, inFlight, loading: false })),
  });

  it('does nothing for a model a worker holds or loads', () => {
    expect(chooseLanding([w('w1', ['x']), w('w2', ['m'])], 'm', mb, 1000)).toEqual({ kind: 'held', workerId: 'w2' });
  });

  it('prefers the least-loaded worker with room, then a standby, then the least-loaded worker (it evicts)', () => {
    expect(chooseLanding([w('busy', ['a'], 5), w('idle', ['b'], 0), w('sb', [])], 'm', mb, 1000)).toMatchObject({
      kind: 'load',
      workerId: 'idle',
    });
    expect(chooseLanding([w('full', ['a', 'b']), w('sb', [])], 'm', mb, 250)).toMatchObject({
      kind: 'load',
      workerId: 'sb',
      why: 'standby',
    });
    expect(chooseLanding([w('f1', ['a', 'b'], 3), w('f2', ['c', 'd'], 1)], 'm', mb, 250)).toMatchObject({ kind: 'load', workerId: 'f2' });
  });

  it('finds no landing while no worker is warm', () => {
    expect(chooseLanding([w('s', [], 0, 'starting'), w('d', ['a'], 0, 'draining')], 'm', mb, 1000)).toEqual({ kind: 'none' });
  });
});
