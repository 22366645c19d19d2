/**
 * The SLO-sized policy (issue 17) on a fake clock: decide() called with an advancing `now` and
 * the memory it returned, obeyed by a small pool that tracks each worker's launch time, so "no
 * worker is launched and drained within its minimum lifetime" is measured per worker. Also: the
 * SLO sizing's terms, standby following a stepped burst, the backlog in rows, and clock jumps.
 */
import { describe, expect, it } from 'vitest';
import {
  type Backlog,
  emptyPolicyMemory,
  type Forecast,
  type PolicyDecision,
  type PolicyInput,
  type PolicyMemory,
  type PolicySettings,
  type WorkerCounts,
} from '../contracts/pool.ts';
import { SCALER_DEFAULTS } from '../kernel/config.ts';
import { COLD_START_SAMPLES, coldStartEstimateMs } from './cold-start-estimate.ts';
import { decide, SLO_TAIL } from './policy.ts';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 8, 12, 0);
const RATE = 100; // rows/s one worker sustains at a full batch
const SETTINGS: PolicySettings = {
  min: 1,
  max: 40,
  standby: 0,
  sloQueueWaitMs: 10_000,
  coldStartMs: 60_000,
  scaleDownStabilizationMs: 0,
  targetUtilization: 1,
  minLifetimeColdStarts: 3,
};
const noBacklog: Backlog = { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };

function forecastOf(ratePerSec: number, extra: Partial<Forecast> = {}): Forecast {
  return { ratePerSec, burstRatePerSec: ratePerSec, horizonS: 65, method: 'seasonal', components: {}, ...extra };
}

function inputOf(over: Partial<PolicyInput> = {}): PolicyInput {
  return {
    now: T0,
    forecast: forecastOf(0),
    backlog: noBacklog,
    workers: { starting: 0, standby: 0, active: 1, draining: 0 },
    perWorkerRatePerSec: RATE,
    settings: SETTINGS,
    memory: emptyPolicyMemory(),
    ...over,
  };
}

interface PoolWorker {
  launchedAt: number;
  state: 'starting' | 'standby' | 'active';
}

/** A pool that obeys every decision as the controller does (drains starting, then standby, then active; newest first). */
class FakePool {
  workers: PoolWorker[] = [];
  memory: PolicyMemory = emptyPolicyMemory();
  /** Age of every worker drained, in ms. */
  drainedAges: number[] = [];
  launches = 0;
  decisions: Array<{ now: number; decision: PolicyDecision }> = [];

  constructor(
    private readonly settings: PolicySettings,
    active: number,
  ) {
    for (let i = 0; i < active; i++) this.workers.push({ launchedAt: T0 - 3_600_000, state: 'active' });
  }

  counts(): WorkerCounts {
    const n = (s: PoolWorker['state']) => this.workers.filter((w) => w.state === s).length;
    return { starting: n('starting'), standby: n('standby'), active: n('active'), draining: 0 };
  }

  tick(now: number, forecast: Forecast, backlog: Backlog = noBacklog): PolicyDecision {
    for (const w of this.workers) if (w.state === 'starting' && now - w.launchedAt >= this.settings.coldStartMs) w.state = 'standby';
    const d = decide({
      now,
      forecast,
      backlog,
      workers: this.counts(),
      perWorkerRatePerSec: RATE,
      settings: this.settings,
      memory: this.memory,
    });
    this.memory = d.memory;
    this.decisions.push({ now, decision: d });
    const order = { starting: 0, standby: 1, active: 2 } as const;
    for (let i = 0; i < d.drain; i++) {
      const victim = [...this.workers].sort((a, b) => order[a.state] - order[b.state] || b.launchedAt - a.launchedAt)[0];
      if (!victim) break;
      this.drainedAges.push(now - victim.launchedAt);
      this.workers.splice(this.workers.indexOf(victim), 1);
    }
    for (let i = 0; i < d.launch; i++) this.workers.push({ launchedAt: now, state: 'starting' });
    this.launches += d.launch;
    const warm = this.workers.filter((w) => w.state !== 'starting');
    warm.forEach((w, i) => {
      w.state = i < d.active ? 'active' : 'standby';
    });
    return d;
  }
}

/** 100 rows/s and 500 rows/s taking turns every `periodMs`, ticked every 5 s for an hour. */
function flap(settings: PolicySettings, periodMs: number): FakePool {
  const pool = new FakePool(settings, 2);
  for (let t = T0; t < T0 + 60 * MIN; t += 5_000) {
    const high = Math.floor((t - T0) / periodMs) % 2 === 1;
    pool.tick(t, forecastOf(high ? 500 : 100));
  }
  return pool;
}

describe('minimum lifetime', () => {
  it('under a flapping arrival series no worker is launched and drained within the minimum lifetime', () => {
    const lifetimeMs = 3 * SETTINGS.coldStartMs;
    const pool = flap(SETTINGS, 2 * MIN);
    expect(pool.launches).toBeGreaterThan(0);
    // Two-minute swings never leave a surplus for the three-minute lifetime: launched once, held.
    expect(pool.drainedAges.every((age) => age >= lifetimeMs)).toBe(true);
    expect(pool.launches).toBe(4); // once, at the first high phase: 2 → 6
    expect(pool.drainedAges).toEqual([]);
    const held = pool.decisions.filter((d) => d.decision.terms?.activeSetBy === 'min-lifetime');
    expect(held.length).toBeGreaterThan(0);
    expect(held[0]?.decision.reasons.some((r) => r.startsWith('pool held at'))).toBe(true);
    // Slower swings (five minutes) do drain, each worker only after its lifetime.
    const slow = flap(SETTINGS, 5 * MIN);
    expect(slow.drainedAges.length).toBeGreaterThan(0);
    expect(slow.drainedAges.every((age) => age >= lifetimeMs)).toBe(true);
    // Without it the same series launches and drains workers that have not even warmed up.
    const churn = flap({ ...SETTINGS, minLifetimeColdStarts: 0 }, 2 * MIN);
    expect(churn.drainedAges.some((age) => age < lifetimeMs)).toBe(true);
    expect(churn.launches).toBeGreaterThan(pool.launches);
  });

  it('defaults to the config when a setting leaves it out, and never goes below the stabilisation window', () => {
    const { minLifetimeColdStarts: _omitted, ...rest } = SETTINGS;
    const d = decide(inputOf({ forecast: forecastOf(100), settings: rest }));
    expect(d.terms?.minLifetimeMs).toBe(SCALER_DEFAULTS.minLifetimeColdStarts * SETTINGS.coldStartMs);
    expect(SCALER_DEFAULTS.minLifetimeColdStarts).toBe(1); // one cold start: the ski-rental hold (kernel/config.ts)
    const longer = decide(inputOf({ forecast: forecastOf(100), settings: { ...SETTINGS, scaleDownStabilizationMs: 20 * MIN } }));
    expect(longer.terms?.minLifetimeMs).toBe(20 * MIN);
  });
});

describe('SLO sizing', () => {
  it('sizes active for the queue wait at the SLO, from the mean with its noise and the upper quantile over a cold start', () => {
    // 1000 rows/s, Poisson (dispersion 1), SLO 10 s less a 1 s batch: capacity ≥ (λ + √(λ² + 2λ ln(1/ε) / 9)) / 2.
    const lambda = 1000;
    const steady = (lambda + Math.sqrt(lambda * lambda + (2 * lambda * Math.log(1 / SLO_TAIL)) / 9)) / 2;
    const d = decide(inputOf({ forecast: forecastOf(lambda), batchServiceMs: 1000 }));
    expect(d.active).toBe(Math.ceil(steady / RATE)); // 11: 10 workers would run at exactly the mean
    expect(d.terms).toMatchObject({ sloActive: 11, activeSetBy: 'slo-sizing', quantile: 0.5, upperRatePerSec: 1000 });
    // Burstier arrivals need more headroom at the same mean: at 195 rows/s two workers hold
    // Poisson arrivals (capacity ≥ 195.3/s), not arrivals of dispersion 30 (≥ 202.4/s).
    expect(decide(inputOf({ forecast: forecastOf(195), batchServiceMs: 1000 })).active).toBe(2);
    expect(decide(inputOf({ forecast: forecastOf(195, { dispersion: 30 }), batchServiceMs: 1000 })).active).toBe(3);
    // An upper quantile of 1500/s must be absorbed for the 60 s cold start: 1500 × 60 / 69 ≈ 1304/s.
    const upper = decide(inputOf({ forecast: forecastOf(lambda, { upperRatePerSec: 1500, upperQuantile: 0.9 }), batchServiceMs: 1000 }));
    expect(upper.active).toBe(14);
    expect(upper.terms).toMatchObject({ quantile: 0.9, upperRatePerSec: 1500, sloActive: 14 });
    // The same upper quantile behind a 5 s cold start: the queue rides it out; the mean sizes the pool.
    const quick = decide(
      inputOf({
        forecast: forecastOf(lambda, { upperRatePerSec: 1500, upperQuantile: 0.9 }),
        batchServiceMs: 1000,
        settings: { ...SETTINGS, coldStartMs: 5_000 },
      }),
    );
    expect(quick.active).toBe(11);
    // A utilisation cap below 1 still binds on top of the SLO.
    expect(decide(inputOf({ forecast: forecastOf(lambda), settings: { ...SETTINGS, targetUtilization: 0.5 } })).active).toBe(20);
  });

  it('the backlog counts rows: multi-row jobs ask for more workers than the same number of one-row jobs', () => {
    const queued = (rowsPerJob?: number): Backlog => ({
      ...noBacklog,
      waiting: 100,
      oldestAgeMs: 1_000,
      ...(rowsPerJob === undefined ? {} : { rowsPerJob }),
    });
    const workers = { starting: 0, standby: 0, active: 0, draining: 0 };
    // 100 one-row jobs in 5 s (half the SLO) is 20 rows/s on top of 100/s: 2 workers.
    const single = decide(inputOf({ forecast: forecastOf(100), backlog: queued(), workers }));
    expect(single.terms?.backlogActive).toBe(2);
    // 100 jobs of 16 rows: 1600 rows in 5 s, 320 rows/s more: 5 workers.
    const multi = decide(inputOf({ forecast: forecastOf(100), backlog: queued(16), workers }));
    expect(multi.terms?.backlogActive).toBe(5);
    expect(multi).toMatchObject({ active: 5, launch: 5 });
    expect(multi.terms?.activeSetBy).toBe('backlog');
    expect(multi.reasons).toContain('backlog 1600 rows (100 jobs × 16.0) to clear within 5.0s adds 320.0/s');
    // Nonsense rows per job count as one.
    expect(decide(inputOf({ forecast: forecastOf(100), backlog: queued(Number.NaN), workers })).terms?.backlogActive).toBe(2);
  });

  it('launches nothing for a backlog the warm workers empty within a cold start plus the SLO, and sizes launches with their spare', () => {
    // 2 warm workers (200 rows/s) against 100 rows/s arriving: 100 rows/s spare. Cold start 60 s, SLO 10 s.
    const queued = (waiting: number): Backlog => ({ ...noBacklog, waiting, oldestAgeMs: 1_000 });
    const workers = { starting: 0, standby: 0, active: 2, draining: 0 };
    // 6,500 rows take 65 s: past the cold start, but every job arriving once a launch could be warm
    // (60 s) waits at most 5 s. A launch would help no job's SLO.
    const within = decide(inputOf({ forecast: forecastOf(100), backlog: queued(6_500), workers }));
    expect(within).toMatchObject({ active: 2, launch: 0 });
    expect(within.reasons).toContain('2 warm workers clear it in 65.0s, within a cold start plus the SLO: no launch for it');
    // 9,000 rows take 90 s: 3,000 are left when a launch arrives, which it and the warm ones' 100
    // rows/s spare clear within the 10 s SLO: (3000 / 10 − 100) / 100 = 2 more workers, not the 5
    // that clearing 3,000 rows in half the SLO from scratch would ask.
    const beyond = decide(inputOf({ forecast: forecastOf(100), backlog: queued(9_000), workers }));
    expect(beyond).toMatchObject({ active: 4, launch: 2 });
    expect(beyond.reasons).toContain('2 warm workers leave 3000 rows after a cold start: 2 more for them');
  });
});

describe('standby for the burst a cold start cannot absorb', () => {
  it('tracks a stepped burst up at once, holds the pool for its lifetime, then drains', () => {
    const pool = new FakePool(SETTINGS, 2);
    // 150 rows/s throughout; the forecast's burst rate steps 150 → 400 → 800 → 150, ten minutes each.
    const burstAt = (t: number) => [150, 400, 800, 150, 150][Math.floor((t - T0) / (10 * MIN))] ?? 150;
    const seen: Array<{ t: number; active: number; standby: number; burst: number }> = [];
    for (let t = T0; t < T0 + 50 * MIN; t += 5_000) {
      const d = pool.tick(t, forecastOf(150, { burstRatePerSec: burstAt(t) }));
      seen.push({ t, active: d.active, standby: d.standby, burst: d.terms?.burstStandby ?? -1 });
    }
    const at = (min: number) => seen.find((s) => s.t === T0 + min * MIN);
    // Warm capacity for a burst b: b × 60 s / (60 s + 10 s); 2 active serve 150/s.
    expect(at(5)).toMatchObject({ active: 2, standby: 0 }); // 150 × 60/70 = 129/s: the active ones absorb it
    expect(at(10)).toMatchObject({ active: 2, standby: 2, burst: 2 }); // 400 → 343/s warm: 4 workers, 2 of them standby
    expect(at(20)).toMatchObject({ active: 2, standby: 5, burst: 5 }); // 800 → 686/s warm: 7 workers
    // The burst is over at 30 min: the pool of 7 is held for its lifetime (3 cold starts), as active.
    expect(at(30)).toMatchObject({ active: 7, standby: 0, burst: 0 });
    expect(at(32.5)).toMatchObject({ active: 7, standby: 0 });
    expect(at(33)).toMatchObject({ active: 2, standby: 0 });
    expect(pool.drainedAges.every((age) => age >= 3 * SETTINGS.coldStartMs)).toBe(true);
    expect(pool.counts()).toEqual({ starting: 0, standby: 0, active: 2, draining: 0 });
  });
});

describe('bursts by how long they last', () => {
  it('holds warm only what the queue cannot absorb of each burst: a one-minute spike needs less than a cold-start-long one', () => {
    // 100 rows/s (1 worker); cold start 60 s, SLO 10 s. A 700 rows/s burst lasting a minute needs
    // 700 × 60 / 70 = 600 rows/s warm; the same rate lasting the whole 2-minute horizon the same,
    // since a launch arrives after 60 s either way. A 30 s spike of 1,400 rows/s needs 1400 × 30 / 40 = 1,050.
    const settings = { ...SETTINGS, coldStartMs: 60_000 };
    // decide() with these bursts ([span s, rate rows/s], shortest first) behind a 100 rows/s forecast.
    const withBursts = (...spans: Array<[number, number]>) => {
      const bursts = spans.map(([spanS, ratePerSec]) => ({ spanS, ratePerSec }));
      return decide(
        inputOf({ settings, forecast: forecastOf(100, { burstRatePerSec: bursts.at(-1)?.ratePerSec ?? 100, burstsBySpan: bursts }) }),
      );
    };
    const minute = withBursts([60, 700], [120, 200]);
    expect(minute.active).toBe(2); // 100 rows/s with its noise needs more than one worker's 100
    expect(minute.terms?.burstStandby).toBe(4); // 600/s warm: 6 workers, 2 of them active
    expect(minute.reasons).toContain('burst 700.0/s lasting 60.0s (cold start 60.0s) needs 600.0/s warm: standby 4 (setting 0)');
    expect(withBursts([30, 1400], [120, 200]).terms?.burstStandby).toBe(9); // 1,050/s warm: 11 workers
    // A horizon-long burst at the one-minute rate asks the same as the minute: the queue absorbs a
    // cold start's worth at most, whatever comes after is a launch's to serve.
    const long = withBursts([60, 700], [120, 700]);
    expect(long.terms?.burstStandby).toBe(4);
    // Without spans the forecast's burst rate is taken to last a cold start, as before.
    expect(decide(inputOf({ settings, forecast: forecastOf(100, { burstRatePerSec: 700 }) })).terms?.burstStandby).toBe(4);
  });
});

describe('clock jumps', () => {
  it('a jump forwards holds the pool: its window restarts from the last value in force', () => {
    const pool = new FakePool(SETTINGS, 2);
    pool.tick(T0, forecastOf(800)); // launches to 9 (800/s + noise at 100/s per worker)
    expect(pool.counts().starting).toBeGreaterThan(0);
    const jump = T0 + 2 * 3_600_000;
    const after = pool.tick(jump, forecastOf(100));
    expect(after.drain).toBe(0);
    expect(after.terms?.activeSetBy).toBe('min-lifetime');
    const lifetimeMs = 3 * SETTINGS.coldStartMs;
    expect(pool.tick(jump + lifetimeMs - 1, forecastOf(100)).drain).toBe(0);
    expect(pool.tick(jump + lifetimeMs, forecastOf(100)).drain).toBeGreaterThan(0);
  });

  it('a jump backwards drops the future, holds the pool and drains nothing that tick', () => {
    let d = decide(inputOf({ forecast: forecastOf(800), workers: { starting: 0, standby: 0, active: 9, draining: 0 } }));
    const back = T0 - 3_600_000;
    d = decide(
      inputOf({ now: back, forecast: forecastOf(10), workers: { starting: 0, standby: 0, active: 9, draining: 0 }, memory: d.memory }),
    );
    expect(d).toMatchObject({ active: 9, launch: 0, drain: 0 });
    expect([...d.memory.recentDesired, ...(d.memory.recentPool ?? [])].every((e) => e.at <= back)).toBe(true);
    expect(d.reasons.some((r) => r.includes('dropped 1 future pool entries'))).toBe(true);
  });
});

describe('cold start learnt from the pool', () => {
  it('is a high quantile of the newest samples, not their median', () => {
    expect(coldStartEstimateMs([])).toBeUndefined();
    const samples = Array.from({ length: 30 }, (_, i) => (i < 10 ? 500_000 : 60_000 + i * 1000));
    // The ten oldest (slow) samples are past the newest 20; of those the 90th percentile is the 19th.
    expect(samples.slice(-COLD_START_SAMPLES)).toHaveLength(20);
    expect(coldStartEstimateMs(samples)).toBe(60_000 + 28 * 1000);
    expect(coldStartEstimateMs([60_000, 60_000, 180_000, Number.NaN, -5])).toBe(180_000);
  });
});
