import { describe, expect, it } from 'vitest';
import type { Forecast } from '../contracts/pool.ts';
import {
  emptyPoolPlanMemory,
  evictionOrder,
  type HeldModel,
  keepMs,
  type PoolModelInput,
  type PoolPlanInput,
  type PoolPlanSettings,
  type PoolWorkerView,
  planPool,
} from './pool-plan.ts';

const T0 = Date.UTC(2026, 0, 5, 12);
const MIN = 60_000;

const SETTINGS: PoolPlanSettings = {
  min: 0,
  max: 100,
  standby: 0,
  memoryMb: 4096,
  sloQueueWaitMs: 30_000,
  coldStartMs: 60_000,
  scaleDownStabilizationMs: 300_000,
  targetUtilization: 1,
};

function forecast(ratePerSec: number, o: { upper?: number; burst?: number } = {}): Forecast {
  return {
    ratePerSec,
    upperRatePerSec: o.upper ?? ratePerSec,
    upperQuantile: 0.9,
    burstRatePerSec: o.burst ?? ratePerSec,
    dispersion: 1,
    horizonS: 65,
    method: 'seasonal',
    components: {},
  };
}

function model(name: string, ratePerSec: number, o: Partial<PoolModelInput> & { waiting?: number; burst?: number } = {}): PoolModelInput {
  const { waiting = 0, burst, ...rest } = o;
  return {
    model: name,
    forecast: forecast(ratePerSec, burst === undefined ? {} : { burst }),
    backlog: { waiting, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: waiting > 0 ? 1_000 : 0 },
    perWorkerRatePerSec: 100,
    loadMs: 5_000,
    memoryMb: 512,
    ...rest,
  };
}

const held = (name: string, lastUsedAt: number, o: Partial<HeldModel> = {}): HeldModel => ({
  model: name,
  lastUsedAt,
  inFlight: 0,
  loading: false,
  ...o,
});

const warm = (id: string, models: HeldModel[]): PoolWorkerView => ({ id, state: 'warm', models });

function input(models: PoolModelInput[], workers: PoolWorkerView[], over: Partial<PoolPlanInput> = {}): PoolPlanInput {
  return { now: T0, settings: SETTINGS, models, workers, memory: emptyPoolPlanMemory(), ...over };
}

describe('planPool', () => {
  it('sizes the burst standby for the aggregate, far below the sum of per-model standbys', () => {
    // 40 models, each bursting to 5× its mean; alone, each burst needs a standby worker.
    const models = Array.from({ length: 40 }, (_, k) => model(`m${k}`, 2, { burst: 10, perWorkerRatePerSec: 5 }));
    const workers = Array.from({ length: 20 }, (_, k) => warm(`w${k}`, [held(`m${2 * k}`, T0), held(`m${2 * k + 1}`, T0)]));
    const plan = planPool(input(models, workers));
    expect(plan.terms.perModelStandbySum).toBe(40);
    expect(plan.terms.pooledBurstStandby).toBeLessThan(plan.terms.perModelStandbySum / 4);
    expect(plan.standby).toBe(plan.terms.pooledBurstStandby);
  });

  it('loads a cold model with a backlog onto the least-loaded worker with room, once', () => {
    const workers = [warm('busy', [held('a', T0, { inFlight: 8 })]), warm('quiet', [held('b', T0)]), warm('spare', [])];
    const models = [model('a', 60), model('b', 1), model('c', 0, { waiting: 50 })];
    const plan = planPool(input(models, workers, { settings: { ...SETTINGS, min: 3 } }));
    expect(plan.loads.filter((l) => l.model === 'c')).toEqual([{ workerId: 'quiet', model: 'c', reason: 'cold: no worker holds it' }]);
    expect(plan.evictions).toEqual([]);
  });

  it('loads a cold model onto a standby when no worker holding models has room', () => {
    const full = Array.from({ length: 8 }, (_, k) => held(`f${k}`, T0));
    const plan = planPool(
      input([model('c', 0, { waiting: 3 }), ...full.map((h) => model(h.model, 1))], [warm('full', full), warm('spare', [])]),
    );
    expect(plan.loads.find((l) => l.model === 'c')?.workerId).toBe('spare');
  });

  it('evicts the least recently used idle model for room, never one in flight or used within its keep time while an older one can go', () => {
    const worker = warm('w', [
      held('recent', T0 - 1_000),
      held('old', T0 - 30 * MIN),
      held('older', T0 - 20 * MIN),
      held('running', T0 - 60 * MIN, { inFlight: 4 }),
      ...Array.from({ length: 4 }, (_, k) => held(`x${k}`, T0 - 2_000)),
    ]);
    const models = [model('new', 0, { waiting: 5 }), ...worker.models.map((h) => model(h.model, 0))];
    const plan = planPool(input(models, [worker]));
    expect(plan.evictions.map((e) => e.model)).toEqual(['old']);
    expect(plan.loads).toEqual([{ workerId: 'w', model: 'new', reason: 'cold: no worker holds it' }]);
  });

  it('orders evictable models stale first, then least recently used, and never in-flight, loading or queued ones', () => {
    const byModel = new Map(
      ['fresh', 'stale', 'busy', 'loading', 'queued'].map((m) => [
        m,
        { keepMs: 40_000, input: model(m, 0, { waiting: m === 'queued' ? 1 : 0 }) },
      ]),
    );
    const order = evictionOrder(
      [
        held('fresh', T0 - 10_000),
        held('stale', T0 - 50_000),
        held('busy', T0 - 90_000, { inFlight: 1 }),
        held('loading', T0 - 90_000, { loading: true }),
        held('queued', T0 - 90_000),
      ],
      byModel,
      T0,
    );
    expect(order.map((h) => h.model)).toEqual(['stale', 'fresh']);
  });

  it('gives a model whose demand exceeds one worker copies, and drops them once demand has stayed low for the stabilisation window', () => {
    const one = [warm('a', [held('hot', T0)]), warm('b', []), warm('c', []), warm('d', [])];
    const up = planPool(input([model('hot', 250)], one));
    expect(up.terms.perModel[0]?.copies).toBeGreaterThanOrEqual(3);
    expect(up.loads.filter((l) => l.model === 'hot').length).toBe((up.terms.perModel[0]?.copies ?? 0) - 1);
    // min 3 keeps the workers, so the copies must go by eviction (a drain would take them too).
    const three = ['a', 'b', 'c'].map((id) => warm(id, [held('hot', T0)]));
    const settings = { ...SETTINGS, min: 3 };
    const soon = planPool(input([model('hot', 20)], three, { now: T0 + MIN, memory: up.memory, settings }));
    expect(soon.evictions).toEqual([]);
    const later = planPool(input([model('hot', 20)], three, { now: T0 + 20 * MIN, memory: soon.memory, settings }));
    expect(later.evictions).toHaveLength(1);
    expect(later.evictions[0]?.reason).toMatch(/demand fell/);
  });

  it('holds workers for the memory of models worth keeping', () => {
    const models = Array.from({ length: 20 }, (_, k) => model(`m${k}`, 1, { memoryMb: 1024 }));
    const workers = Array.from({ length: 5 }, (_, w) =>
      warm(
        `w${w}`,
        [0, 1, 2, 3].map((i) => held(`m${4 * w + i}`, T0)),
      ),
    );
    const plan = planPool(input(models, workers));
    expect(plan.terms.memoryActive).toBe(5);
    expect(plan.terms.activeSetBy).toBe('memory');
    expect(plan.active).toBe(5);
  });

  it('drains standby workers first once the pool is over its target and the hold has passed', () => {
    const workers = [warm('a', [held('m', T0)]), warm('s1', []), warm('s2', [])];
    let memory = emptyPoolPlanMemory();
    let plan = planPool(input([model('m', 10)], workers, { memory }));
    for (let t = 1; t <= 30; t++) {
      memory = plan.memory;
      plan = planPool(input([model('m', 10)], workers, { now: T0 + t * MIN, memory }));
      if (plan.drain.length > 0) break;
    }
    expect(plan.drain.sort()).toEqual(['s1', 's2']);
  });

  it('drops hold entries from the future when the clock goes back', () => {
    const models = Array.from({ length: 24 }, (_, k) => model(`m${k}`, 1, { memoryMb: 1024 }));
    const first = planPool(input(models, []));
    expect(first.workers).toBeGreaterThanOrEqual(6);
    const back = planPool(input([model('m0', 1)], [], { now: T0 - 10 * MIN, memory: first.memory }));
    expect(back.memory.recentTotal?.every((e) => e.at <= T0 - 10 * MIN)).toBe(true);
    expect(back.workers).toBeLessThan(first.workers);
  });

  it('hands a model of a busy worker whose jobs wait past the SLO to one with engine time to spare, then drops the old copy once the new one is ready', () => {
    const late = { waiting: 5, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 40_000 };
    const models = [model('m1', 0.5, { backlog: late }), model('m2', 0.5), model('m3', 0.1)];
    const busy = { ...warm('a', [held('m1', T0), held('m2', T0)]), busyFraction: 0.95 };
    const idle = { ...warm('b', [held('m3', T0)]), busyFraction: 0.1 };
    // min 2: the pool keeps both workers, so the move is the only thing that can help.
    const settings = { ...SETTINGS, min: 2 };
    const plan = planPool(input(models, [busy, idle], { settings }));
    expect(plan.loads).toEqual([{ workerId: 'b', model: 'm1', reason: expect.stringMatching(/relieve a/) }]);
    // Not dropped from 'a' while the new copy loads: it would serve nobody meanwhile.
    expect(plan.evictions).toEqual([]);
    const both = [
      { ...busy, busyFraction: 0.7 },
      { ...warm('b', [held('m3', T0), held('m1', T0)]), busyFraction: 0.4 },
    ];
    const next = planPool(
      input([model('m1', 0.5), model('m2', 0.5), model('m3', 0.1)], both, { now: T0 + 5_000, memory: plan.memory, settings }),
    );
    expect(next.evictions).toEqual([{ workerId: 'a', model: 'm1', reason: expect.stringMatching(/demand fell/) }]);
  });

  it('moves nothing without measured busy shares, where the move would not lower the busier worker, or while a load is under way', () => {
    const late = { waiting: 5, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 40_000 };
    const models = [model('m1', 0.5, { backlog: late }), model('m2', 0.1), model('m3', 0.1)];
    const settings = { ...SETTINGS, min: 2 };
    const unmeasured = planPool(input(models, [warm('a', [held('m1', T0), held('m2', T0)]), warm('b', [held('m3', T0)])], { settings }));
    expect(unmeasured.loads).toEqual([]);
    // m1 is most of a's work: on b it would make b busier than a is now.
    const close = planPool(
      input(
        models,
        [
          { ...warm('a', [held('m1', T0), held('m2', T0)]), busyFraction: 0.8 },
          { ...warm('b', [held('m3', T0)]), busyFraction: 0.5 },
        ],
        { settings },
      ),
    );
    expect(close.loads).toEqual([]);
    // While the pool still places models (a load under way here), nothing is handed over.
    const placing = planPool(
      input(
        models,
        [
          { ...warm('a', [held('m1', T0), held('m2', T0)]), busyFraction: 0.95 },
          { ...warm('b', [held('m3', T0), held('m4', T0, { loading: true })]), busyFraction: 0.1 },
        ],
        { settings },
      ),
    );
    expect(placing.loads).toEqual([]);
  });

  it("counts the per-batch time of batches of a few rows, from the profile's batch of one and the SLO", () => {
    // 40 models on 2-rows/s workers (32 rows in 16 s): 0.2 rows/s each fills no batch in an SLO.
    const base = { perWorkerRatePerSec: 2, batchServiceMs: 16_000 };
    const held40 = Array.from({ length: 8 }, (_, w) =>
      warm(
        `w${w}`,
        [0, 1, 2, 3, 4].map((i) => held(`m${5 * w + i}`, T0)),
      ),
    );
    const plan = (batchOneMs: number) =>
      planPool(
        input(
          Array.from({ length: 40 }, (_, k) => model(`m${k}`, 0.2, { ...base, batchOneMs })),
          held40,
        ),
      );
    const fixed = plan(2_050); // 1.6 s a batch + 0.45 s a row
    const none = plan(500); // 0.5 s a row and nothing a batch: the full-batch rate is right
    expect(none.reasons.some((r) => /per-batch time/.test(r))).toBe(false);
    expect(fixed.reasons.some((r) => /per-batch time/.test(r))).toBe(true);
    // Each model: 0.2 rows/s, at most one batch per SLO (30 s): 40 × 1.6 s × (1/30 − 0.2/32) = 1.73 workers more.
    expect(fixed.terms.meanWorkers - none.terms.meanWorkers).toBeCloseTo(40 * 1.6 * (1 / 30 - 0.2 / 32), 1);
    expect(fixed.terms.computeActive).toBeGreaterThan(none.terms.computeActive);
  });

  it('does not mutate its input', () => {
    const i = input([model('a', 5, { waiting: 3 })], [warm('w', [held('b', T0 - 30 * MIN)])]);
    const copy = structuredClone(i);
    planPool(i);
    expect(i).toEqual(copy);
  });
});

describe('keepMs', () => {
  it('is the break-even idle time: a reload over the memory share holding costs', () => {
    expect(keepMs({ loadMs: 5_000, memoryMb: 512 }, { memoryMb: 4096 })).toBe(40_000);
    expect(keepMs({ loadMs: 5_000, memoryMb: 4096 }, { memoryMb: 4096 })).toBe(5_000);
  });
});
