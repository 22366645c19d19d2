/** The pool controller's view of a shared pool: members, workers and what each holds, measurements. */
import { describe, expect, it } from 'vitest';
import type { Deployment } from '../deployments/deployment-store.ts';
import type { HeartbeatPayload, PoolModelView } from '../fleet/worker-states.ts';
import { batchTimes, measure, memberRefs, poolWorkerViews, scaleForecast, standInRate } from './pool-observe.ts';

const NOW = 1_700_000_000_000;

function deployment(model: string, pool: string | undefined, versions: Array<[string, number]>): Deployment {
  return {
    model,
    version: versions[0]?.[0] ?? '1',
    versions: versions.map(([version, weight]) => ({ version, weight })),
    min: 0,
    max: 1,
    standby: 0,
    ...(pool ? { pool } : {}),
  } as Deployment;
}

function held(model: string, state: PoolModelView['state'], extra: Partial<PoolModelView> = {}): PoolModelView {
  return { model, version: '1', state, residentBytes: 0, lastUsedAt: NOW - 1000, jobsInFlight: 0, ...extra };
}

function beat(
  id: string,
  state: HeartbeatPayload['state'],
  models: PoolModelView[],
  extra: Partial<HeartbeatPayload> = {},
): HeartbeatPayload {
  return {
    id,
    model: '',
    version: '',
    state,
    pid: 1,
    host: 'h',
    startedAt: NOW - 60_000,
    updatedAt: NOW,
    rowsPerS: 0,
    jobsInFlight: 0,
    memory: { rssBytes: 1, heapUsedBytes: 1 },
    pool: 'tail',
    models,
    ...extra,
  } as HeartbeatPayload;
}

describe('memberRefs', () => {
  it("lists each weighted version of the pool's deployments with its share, and nothing of other pools", () => {
    const refs = memberRefs('tail', [
      deployment('a', 'tail', [
        ['1', 90],
        ['2', 10],
        ['0', 0],
      ]),
      deployment('b', 'tail', [['3', 100]]),
      deployment('c', undefined, [['1', 100]]),
      deployment('d', 'other', [['1', 100]]),
    ]);
    expect(refs).toEqual([
      { key: 'a@1', model: 'a', version: '1', share: 0.9 },
      { key: 'a@2', model: 'a', version: '2', share: 0.1 },
      { key: 'b@3', model: 'b', version: '3', share: 1 },
    ]);
  });

  it('scales every rate of a forecast by the share', () => {
    const f = {
      ratePerSec: 10,
      burstRatePerSec: 20,
      upperRatePerSec: 15,
      burstsBySpan: [{ spanS: 10, ratePerSec: 30 }],
      horizonS: 60,
      method: 'reactive' as const,
      components: {},
    };
    expect(scaleForecast(f, 0.5)).toMatchObject({
      ratePerSec: 5,
      burstRatePerSec: 10,
      upperRatePerSec: 7.5,
      burstsBySpan: [{ spanS: 10, ratePerSec: 15 }],
    });
  });
});

describe('poolWorkerViews', () => {
  it('reads what each worker holds from its heartbeat, shows claims as loads on their way, and drops dead workers', () => {
    const beats = [
      beat('w1', 'active', [held('a', 'active', { jobsInFlight: 2 }), held('b', 'loading'), held('c', 'evicted'), held('d', 'no-room')], {
        busyFraction: 0.4,
      }),
      beat('w2', 'standby', []),
    ];
    const listed = [
      { id: 'w1', state: 'active' as const, handle: '1' },
      { id: 'w2', state: 'standby' as const, handle: '2' },
      { id: 'pending-9', state: 'launching' as const, handle: '9' },
      { id: 'w3', state: 'stopped' as const, handle: '3' },
    ];
    const views = poolWorkerViews(beats, listed, new Map([['w2', ['e@1']]]), NOW);
    expect(views).toEqual([
      {
        id: 'w1',
        state: 'warm',
        busyFraction: 0.4,
        models: [
          { model: 'a@1', lastUsedAt: NOW - 1000, inFlight: 2, loading: false },
          { model: 'b@1', lastUsedAt: NOW - 1000, inFlight: 0, loading: true },
        ],
      },
      { id: 'w2', state: 'warm', models: [{ model: 'e@1', lastUsedAt: NOW, inFlight: 0, loading: true }] },
      { id: 'pending-9', state: 'starting', models: [] },
    ]);
    // No busy share where the heartbeat has none, or there is no heartbeat yet: not measured, not idle.
    expect(views.slice(1).some((v) => 'busyFraction' in v)).toBe(false);
  });

  it('passes a busy share of 0 on: measured idle', () => {
    const [view] = poolWorkerViews([beat('w1', 'standby', [], { busyFraction: 0 })], undefined, new Map(), NOW);
    expect(view?.busyFraction).toBe(0);
  });

  it('remembers load time, resident memory and warm-up rate, the newest rate replacing the last', () => {
    const first = measure({}, [
      beat('w1', 'active', [
        held('a', 'active', { loadMs: 800, residentBytes: 64 * 1024 * 1024, profile: { threads: 1, chosenBatch: 8, rowsPerS: 400 } }),
      ]),
    ]);
    expect(first).toEqual({ 'a@1': { loadMs: 800, memoryMb: 64, rowsPerSec: 400, batchServiceMs: 20 } });
    const second = measure(first, [
      beat('w2', 'active', [held('a', 'active', { profile: { threads: 1, chosenBatch: 8, rowsPerS: 300 } }), held('b', 'loading')]),
    ]);
    expect(second).toEqual({ 'a@1': { loadMs: 800, memoryMb: 64, rowsPerSec: 300, batchServiceMs: (8 / 300) * 1000 } });
  });

  it("keeps a profile's batch of one with its rate: the best profile of the tick, replaced whole by the next", () => {
    const profile = (rowsPerS: number, batchOneMs?: number) => ({
      threads: 1,
      chosenBatch: 16,
      rowsPerS,
      ...(batchOneMs !== undefined ? { batchOneMs } : {}),
    });
    const first = measure({}, [
      beat('w1', 'active', [held('a', 'active', { profile: profile(800, 2.5) })]),
      beat('w2', 'active', [held('a', 'active', { profile: profile(400, 4) })]),
    ]);
    expect(first['a@1']).toEqual({ rowsPerSec: 800, batchServiceMs: 20, batchOneMs: 2.5 });
    // The next profile measured no batch of one: the last one's would not match its rate.
    const second = measure(first, [beat('w3', 'active', [held('a', 'active', { profile: profile(1600) })])]);
    expect(second['a@1']).toEqual({ rowsPerSec: 1600, batchServiceMs: 10 });
    // A heartbeat without a profile changes nothing.
    expect(measure(first, [beat('w1', 'active', [held('a', 'active')])])).toEqual(first);
  });
});

describe('batchTimes', () => {
  it('gives the planner batch times only from a measured profile, and a batch of one only beside a full batch', () => {
    expect(batchTimes({})).toEqual({});
    expect(batchTimes({ loadMs: 900, memoryMb: 10 })).toEqual({});
    expect(batchTimes({ batchOneMs: 2 })).toEqual({});
    expect(batchTimes({ rowsPerSec: 800, batchServiceMs: 20 })).toEqual({ batchServiceMs: 20 });
    expect(batchTimes({ rowsPerSec: 800, batchServiceMs: 20, batchOneMs: 2.5 })).toEqual({ batchServiceMs: 20, batchOneMs: 2.5 });
  });
});

describe('standInRate', () => {
  it("is the median of the pool's measured rates, 0 before any", () => {
    expect(standInRate({})).toBe(0);
    expect(standInRate({ a: { loadMs: 5 } })).toBe(0);
    expect(standInRate({ a: { rowsPerSec: 100 }, b: { rowsPerSec: 300 }, c: { rowsPerSec: 200 } })).toBe(200);
    expect(standInRate({ a: { rowsPerSec: 100 }, b: { rowsPerSec: 300 } })).toBe(200);
  });
});
