import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../infra/kernel/seeded-random.ts';
import {
  arrivalTimesMs,
  hitRow,
  type LoadSample,
  loadRows,
  lruHitRatio,
  MissRouter,
  type PoolLoadPlan,
  poolJobCounts,
  type ZipfFigures,
  zipfPicker,
  zipfTraffic,
} from './pool-load.ts';

const plan: PoolLoadPlan = { loads: 2, models: 10, fits: 3, ratePerS: 10, durationS: 20, checked: 5, seed: 31 };

describe('zipfPicker', () => {
  it('draws index k about 1/(k+1) as often as index 0 (s = 1)', () => {
    const pick = zipfPicker(10, 1, seededRandom(1));
    const counts = new Array<number>(10).fill(0);
    for (let i = 0; i < 100_000; i++) {
      const k = pick();
      counts[k] = (counts[k] ?? 0) + 1;
    }
    const share0 = (counts[0] ?? 0) / 100_000;
    // H(10) ≈ 2.929: P(0) ≈ 0.341, P(1) ≈ 0.171, P(9) ≈ 0.034.
    expect(share0).toBeCloseTo(0.341, 1);
    expect((counts[1] ?? 0) / (counts[0] ?? 1)).toBeCloseTo(0.5, 1);
    expect((counts[9] ?? 0) / (counts[0] ?? 1)).toBeCloseTo(0.1, 1);
  });

  it('never draws outside 0…n−1, even at u close to 1', () => {
    const pick = zipfPicker(3, 1, () => 0.999_999_999_9);
    expect(pick()).toBe(2);
  });
});

describe('arrivalTimesMs and zipfTraffic', () => {
  it('gives about rate × duration increasing arrivals inside the window', () => {
    const times = arrivalTimesMs(50, 100, seededRandom(2));
    expect(times.length / 5000).toBeCloseTo(1, 1);
    expect(times.every((t, i) => t < 100_000 && (i === 0 || t > (times[i - 1] as number)))).toBe(true);
  });

  it('is the same traffic for the same seed, and other traffic for another', () => {
    expect(zipfTraffic(plan)).toEqual(zipfTraffic(plan));
    expect(zipfTraffic({ ...plan, seed: 32 })).not.toEqual(zipfTraffic(plan));
    expect(zipfTraffic(plan).every((j) => j.model >= 0 && j.model < plan.models)).toBe(true);
  });
});

describe('lruHitRatio', () => {
  it('counts hits of an LRU of the capacity, the least recently used evicted', () => {
    // cap 2: 0m 1m 0h 2m(evicts 1) 1m(evicts 0) 2h → 2 hits of 6.
    expect(lruHitRatio([0, 1, 0, 2, 1, 2], 2)).toBeCloseTo(2 / 6);
    expect(lruHitRatio([0, 0, 0], 1)).toBeCloseTo(2 / 3);
    expect(lruHitRatio([], 3)).toBeNaN();
  });
});

describe('poolJobCounts', () => {
  it('sums warmpool_pool_jobs_total by resident over every series, and nothing else', () => {
    const text = [
      '# TYPE warmpool_pool_jobs_total counter',
      'warmpool_pool_jobs_total{pool="p",resident="hit"} 40',
      'warmpool_pool_jobs_total{resident="hit",pool="q"} 2',
      'warmpool_pool_jobs_total{pool="p",resident="miss"} 7',
      'warmpool_pool_model_loads_total{pool="p",outcome="loaded",cache="miss"} 9',
    ].join('\n');
    expect(poolJobCounts(text)).toEqual({ hit: 42, miss: 7 });
    expect(poolJobCounts('')).toEqual({ hit: 0, miss: 0 });
  });
});

describe('MissRouter', () => {
  it('asks once for a model not held, not while it loads, and calls a job of an active model a hit', () => {
    let now = 0;
    const asked: string[] = [];
    const router = new MissRouter(
      (m) => asked.push(m),
      () => now,
      1000,
    );
    expect(router.route('a')).toBe(false);
    expect(router.route('a')).toBe(false);
    expect(asked).toEqual(['a']);
    router.observe([{ model: 'a', state: 'loading' }]);
    expect(router.route('a')).toBe(false);
    router.observe([{ model: 'a', state: 'active' }]);
    expect(router.route('a')).toBe(true);
    expect(router.resident).toBe(1);
    // Evicted: the next job asks again.
    router.observe([{ model: 'a', state: 'evicted' }]);
    expect(router.route('a')).toBe(false);
    expect(asked).toEqual(['a', 'a']);
    // An ask the worker never showed is made again after the TTL, not before.
    now = 500;
    router.observe([]);
    router.route('a');
    now = 1500;
    router.observe([]);
    router.route('a');
    expect(asked).toEqual(['a', 'a', 'a']);
  });
});

describe('loadRows', () => {
  const s = (kind: LoadSample['kind'], workerMs: number, outsideMs: number, fits = true): LoadSample => ({
    kind,
    workerMs,
    outsideMs,
    cacheHit: kind === 'seen' ? fits : !fits,
    reused: kind === 'seen' ? fits : !fits,
  });

  it("takes the worker's own loadMs as the value and the outside figure in the detail", () => {
    const rows = loadRows([s('cold', 400, 450), s('cold', 400, 450), s('seen', 100, 130), s('seen', 100, 130)], 10);
    expect(rows.map((r) => [r.name, r.value])).toEqual([
      ['pool_load_cold_p50_ms', 400],
      ['pool_load_cold_p99_ms', 400],
      ['pool_load_seen_p50_ms', 100],
      ['pool_load_seen_p99_ms', 100],
      ['pool_load_seen_vs_cold_p50', 0.25],
    ]);
    expect(rows[0]?.detail).toContain("the worker's own loadMs");
    expect(rows[0]?.detail).toContain('from outside (askLoad → heartbeat model state active, polled every 10 ms) p50 450 ms');
    expect(rows[2]?.detail).not.toContain('NOT');
  });

  it('says when a load was not of its kind, and is n/a for a kind with no loads', () => {
    const rows = loadRows([s('cold', 400, 450, false)], 10);
    expect(rows[0]?.detail).toContain('1 loads were NOT cold');
    expect(rows[2]?.value).toBeNaN();
    expect(rows[4]?.value).toBeNaN();
  });
});

describe('hitRow', () => {
  const figures: ZipfFigures = {
    jobs: 100,
    metric: { hit: 80, miss: 20 },
    benchHits: 78,
    lru: 0.85,
    plan,
    memoryMb: 31,
    heldMax: 3,
    heldMean: 2.6,
    loads: 25,
    checked: 5,
    wrong: 0,
    router: 'router: plain',
  };

  it("is the metric's hit share, with the bench's own count and the LRU reference beside it", () => {
    const row = hitRow(figures);
    expect(row).toMatchObject({ name: 'pool_hit_ratio_zipf', value: 0.8, unit: 'ratio' });
    expect(row.detail).toContain('80 hit / 20 miss, all 100 jobs counted');
    expect(row.detail).toContain("the bench's own count (model active in the last heartbeat when routed) 0.78");
    expect(row.detail).toContain('an LRU of 3 with instant loads over the same sequence 0.85');
    expect(row.detail).toContain('held ≤ 3 (mean 2.6), 25 loads; router: plain; 5 sampled outputs equal');
  });

  it('says when the counts differ, and is n/a when an output was wrong', () => {
    expect(hitRow({ ...figures, metric: { hit: 80, miss: 10 } }).detail).toContain('90 counted of 100 jobs submitted: COUNTS DIFFER');
    const wrong = hitRow({ ...figures, wrong: 1 });
    expect(wrong.value).toBeNaN();
    expect(wrong.detail).toContain('1 of 5 checked outputs WRONG');
  });
});
