/**
 * The scaling policy as plain steps on a fake clock: decide() is called with an advancing `now`
 * and the memory it returned last time. Scenario tests drive a small fluid simulation (FIFO
 * cohorts of jobs, workers that take coldStartMs to warm up) so "capacity ready ahead of the ramp"
 * and "the burst backlog clears within the SLO" are measured, not asserted by construction.
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
import { seededRandom } from '../kernel/seeded-random.ts';
import { decide } from './policy.ts';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 8, 0, 0); // a Monday, midnight
const at = (h: number, m = 0, s = 0) => T0 + ((h * 60 + m) * 60 + s) * 1000;

const SETTINGS: PolicySettings = {
  min: 1,
  max: 20,
  standby: 1,
  sloQueueWaitMs: 10_000,
  coldStartMs: 120_000,
  scaleDownStabilizationMs: 10 * MIN,
  targetUtilization: 0.8,
};
const RATE = 100; // rows/s one worker sustains: 80/s planned at 0.8 utilisation

function forecastOf(ratePerSec: number, burstRatePerSec = ratePerSec, method: Forecast['method'] = 'seasonal'): Forecast {
  return { ratePerSec, burstRatePerSec, horizonS: 150, method, components: {} };
}
const noBacklog: Backlog = { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };
const pool = (active: number, standby = 0, starting = 0): WorkerCounts => ({ starting, standby, active, draining: 0 });

function inputOf(over: Partial<PolicyInput> = {}): PolicyInput {
  return {
    now: at(12),
    forecast: forecastOf(0),
    backlog: noBacklog,
    workers: pool(0),
    perWorkerRatePerSec: RATE,
    settings: SETTINGS,
    memory: emptyPolicyMemory(),
    ...over,
  };
}

interface SimOptions {
  settings: PolicySettings;
  start: number;
  /** Arrivals per second at time t. */
  demand: (t: number) => number;
  /** The forecast the policy is given at a tick. */
  forecast: (sim: Sim) => Forecast;
  workers: WorkerCounts;
  tickMs?: number;
}

/** Workers and a FIFO queue in one-second steps; the policy decides every tickMs and is obeyed. */
class Sim {
  now: number;
  memory: PolicyMemory = emptyPolicyMemory();
  last: PolicyDecision | undefined;
  decisions: Array<{ now: number; before: WorkerCounts; decision: PolicyDecision }> = [];
  arrivals: number[] = [];
  maxWaitMs = 0;
  private queue: Array<{ at: number; n: number }> = [];
  private starting: number[] = []; // ready times
  standby: number;
  active: number;

  constructor(private readonly o: SimOptions) {
    this.now = o.start;
    this.active = o.workers.active;
    this.standby = o.workers.standby;
  }

  counts(): WorkerCounts {
    return pool(this.active, this.standby, this.starting.length);
  }

  backlog(): Backlog {
    const waiting = this.queue.reduce((s, c) => s + c.n, 0);
    const head = this.queue[0];
    return { ...noBacklog, waiting, oldestAgeMs: head ? this.now - head.at : 0 };
  }

  tick(): PolicyDecision {
    const before = this.counts();
    const input = { now: this.now, forecast: this.o.forecast(this), backlog: this.backlog(), workers: before };
    const decision = decide({ ...input, perWorkerRatePerSec: RATE, settings: this.o.settings, memory: this.memory });
    this.memory = decision.memory;
    this.last = decision;
    this.decisions.push({ now: this.now, before, decision });
    this.apply(decision);
    return decision;
  }

  /** Drains starting workers first, then standby, then active; launches; rebalances the warm ones. */
  private apply(d: PolicyDecision): void {
    let drain = d.drain;
    for (; drain > 0 && this.starting.length > 0; drain--) this.starting.pop();
    const warm = this.active + this.standby - drain;
    for (let i = 0; i < d.launch; i++) this.starting.push(this.now + this.o.settings.coldStartMs);
    this.active = Math.min(d.active, warm);
    this.standby = warm - this.active;
  }

  /** One second: warmed workers join, jobs arrive, active workers serve the queue in order. */
  step(): void {
    const ready = this.starting.filter((t) => t <= this.now).length;
    this.starting = this.starting.filter((t) => t > this.now);
    for (let i = 0; i < ready; i++) {
      if (this.active < (this.last?.active ?? 0)) this.active++;
      else this.standby++;
    }
    const arriving = this.o.demand(this.now);
    this.arrivals.push(arriving);
    if (arriving > 0) this.queue.push({ at: this.now, n: arriving });
    this.now += 1000;
    let capacity = this.active * RATE;
    while (capacity > 1e-9 && this.queue.length > 0) {
      const head = this.queue[0]!;
      const served = Math.min(head.n, capacity);
      head.n -= served;
      capacity -= served;
      this.maxWaitMs = Math.max(this.maxWaitMs, this.now - head.at);
      if (head.n <= 1e-9) this.queue.shift();
    }
  }

  crash(active: number): void {
    this.active -= active;
  }

  /** Runs to `until`, deciding every tick; `each` sees every second. */
  run(until: number, each: (sim: Sim) => void = () => {}): void {
    const tickMs = this.o.tickMs ?? 5000;
    while (this.now < until) {
      if ((this.now - this.o.start) % tickMs === 0) this.tick();
      this.step();
      each(this);
    }
  }

  /** A reactive forecaster: mean and peak of the last minute's arrivals. */
  recent(): Forecast {
    const last = this.arrivals.slice(-60);
    const mean = last.length ? last.reduce((s, x) => s + x, 0) / last.length : 0;
    return forecastOf(mean, Math.max(0, ...last), 'reactive');
  }
}

describe('decide: scenarios on a fake clock', () => {
  // 20/s until 06:00, a straight ramp to 800/s at 06:30, then flat.
  const morning = (t: number) => 20 + 780 * Math.min(1, Math.max(0, (t - at(6)) / (30 * MIN)));

  function runRamp(forecastAt: (now: number) => number) {
    const settings = { ...SETTINGS, standby: 0 };
    const forecast = (s: Sim) => forecastOf(forecastAt(s.now));
    const sim = new Sim({ settings, start: at(5, 50), demand: morning, forecast, workers: pool(1) });
    let shortSeconds = 0;
    sim.run(at(7), (s) => {
      if (s.active * RATE < morning(s.now)) shortSeconds++;
    });
    return { sim, shortSeconds };
  }
  const leadMs = SETTINGS.coldStartMs + 5000; // a cold start plus one tick, as the controller asks

  it('morning ramp: capacity is launched a cold start ahead, so it is warm before the demand', () => {
    const { sim, shortSeconds } = runRamp((now) => morning(now + leadMs));
    expect(shortSeconds).toBe(0);
    expect(sim.maxWaitMs).toBeLessThanOrEqual(SETTINGS.sloQueueWaitMs);
    expect(sim.active).toBe(Math.ceil(800 / (RATE * 0.8)));
    expect(sim.decisions.every((d) => d.decision.drain === 0)).toBe(true);
    // The same policy fed only the present demand is late on this ramp: the lead time matters.
    expect(runRamp(morning).shortSeconds).toBeGreaterThan(0);
    // Fed the mean over the lead window (what a forecaster returns), utilisation headroom and the
    // backlog term keep the queue wait within the SLO.
    const mean = (now: number) => {
      let sum = 0;
      for (let t = 0; t < leadMs; t += 1000) sum += morning(now + t);
      return sum / (leadMs / 1000);
    };
    expect(runRamp(mean).sim.maxWaitMs).toBeLessThanOrEqual(SETTINGS.sloQueueWaitMs);
  });

  it('burst: standby is activated at once, then replenished by launching; the backlog clears within the SLO', () => {
    const settings = { ...SETTINGS, standby: 2 };
    const burstAt = at(12, 1);
    const demand = (t: number) => (t >= burstAt && t < burstAt + 90_000 ? 350 : 100);
    const sim = new Sim({ settings, start: at(12), demand, forecast: (s) => s.recent(), workers: pool(2, 2) });
    sim.arrivals = Array<number>(60).fill(100); // the last minute's history
    let clearedAt: number | undefined;
    sim.run(at(12, 5), (s) => {
      if (s.now > burstAt && clearedAt === undefined && s.backlog().waiting === 0) clearedAt = s.now;
    });
    const first = sim.decisions.find((d) => d.decision.active > d.before.active)!;
    expect(first.now).toBeGreaterThan(burstAt);
    expect(first.now - burstAt).toBeLessThanOrEqual(10_000); // the first tick or two of the burst
    expect(first.decision.active - first.before.active).toBeLessThanOrEqual(first.before.standby); // warm standby covers it
    expect(first.decision.launch).toBe(first.decision.active + first.decision.standby - 4); // launches refill standby
    expect(first.decision.reasons.some((r) => r.startsWith('activate'))).toBe(true);
    expect(sim.maxWaitMs).toBeLessThanOrEqual(settings.sloQueueWaitMs);
    // Cleared before any worker launched for the burst could have warmed up: standby absorbed it.
    expect(clearedAt! - first.now).toBeLessThan(settings.coldStartMs);
  });

  it('a burst bigger than standby activates all of it and launches the rest', () => {
    const d = decide(inputOf({ forecast: forecastOf(800), workers: pool(2, 2), memory: emptyPolicyMemory() }));
    expect(d.active).toBe(10);
    expect(d.standby).toBe(1);
    expect(d.launch).toBe(10 + 1 - 4);
    expect(d.reasons).toContain('activate 2 standby');
  });

  it('a forecast burst raises standby above the setting; max cuts standby before active', () => {
    // 160/s needs 2 active; a 600/s burst over a 120 s cold start with a 10 s SLO needs
    // 600 × 120 / 130 ≈ 554/s warm, 6 workers at full rate, so 4 standby beyond them.
    const d = decide(inputOf({ forecast: forecastOf(160, 600), workers: pool(2, 1) }));
    expect(d).toMatchObject({ active: 2, standby: 4, launch: 3, drain: 0 });
    expect(d.terms).toMatchObject({ burstStandby: 4, standbySetBy: 'burst', activeSetBy: 'slo-sizing' });
    expect(d.reasons).toContain('burst 600.0/s lasting 120.0s (cold start 120.0s) needs 553.8/s warm: standby 4 (setting 1)');
    const capped = decide(inputOf({ forecast: forecastOf(160, 600), workers: pool(2, 1), settings: { ...SETTINGS, max: 4 } }));
    expect(capped).toMatchObject({ active: 2, standby: 2, launch: 1 });
    const full = decide(inputOf({ forecast: forecastOf(400, 600), workers: pool(2, 1), settings: { ...SETTINGS, max: 4 } }));
    expect(full).toMatchObject({ active: 4, standby: 0, launch: 1 });
  });

  it('backlog: cleared within half the SLO, faster once the oldest job is late, by warm workers when they suffice', () => {
    const queued = (oldestAgeMs: number): Backlog => ({ ...noBacklog, waiting: 1600, prioritized: 300, delayed: 100, oldestAgeMs });
    // 2000 jobs in 5 s (half the 10 s SLO) would be 400/s, 5 workers at 80/s; but none is warm, and
    // launched workers arrive a cold start later, to clear what is left within the SLO (S′, the
    // SLO less a batch: 10 s here): 200/s, 3 workers.
    expect(decide(inputOf({ backlog: queued(1000), workers: pool(0) }))).toMatchObject({ active: 3, launch: 4 });
    // The oldest job 12 s old, past the SLO: within 1.25 s, 1600/s, the 20 warm standby workers.
    const late = decide(inputOf({ backlog: queued(12_000), workers: pool(0, 20) }));
    expect(late.active).toBe(20);
    expect(late.reasons.some((r) => r.includes('past the 10.0s SLO'))).toBe(true);
    // With none warm, launched workers arrive a cold start later: sized to clear the 2000 rows
    // within S′ then (200/s, 3 workers), not within 1.25 s (20).
    const cold = decide(inputOf({ backlog: queued(12_000), workers: pool(0) }));
    expect(cold).toMatchObject({ active: 3, launch: 4 });
    expect(cold.reasons).toContain('0 warm workers leave 2000 rows after a cold start: 3 more for them');
    // Two active and two standby clear 2000 jobs in 2000 / (400 − 100) ≈ 6.7 s, long before a
    // 120 s cold start: activate the standby, launch only to refill it.
    const warm = decide(inputOf({ forecast: forecastOf(100), backlog: queued(1000), workers: pool(2, 2) }));
    expect(warm).toMatchObject({ active: 4, standby: 1, launch: 1 });
    expect(warm.reasons.some((r) => r.includes('within a cold start plus the SLO'))).toBe(true);
  });

  it('overnight trough: scales in only after the window, by draining, never below min, back to standby', () => {
    const settings = { ...SETTINGS, min: 1, standby: 1 };
    // 400/s all evening; 10/s from 23:00, with two short 150/s spikes; nothing from 02:00.
    const demand = (t: number) =>
      t < at(23) ? 400 : t >= at(26) ? 0 : (t >= at(23, 4) && t < at(23, 5)) || (t >= at(23, 8) && t < at(23, 9)) ? 150 : 10;
    const sim = new Sim({
      settings,
      start: at(22),
      demand,
      forecast: (s) => forecastOf(demand(s.now)),
      workers: pool(5, 1),
      tickMs: 30_000,
    });
    sim.run(at(28));
    const ticks = sim.decisions;
    const tickAt = (t: number) => ticks.find((d) => d.now >= t)!;
    // 400/s needed 5 active until 23:00: nothing drains for the 10-minute window after it...
    expect(ticks.filter((d) => d.now < at(23, 10)).every((d) => d.decision.drain === 0)).toBe(true);
    // ...then it drains to the most the window still asks for: 2 active for the 150/s spikes,
    expect(tickAt(at(23, 10))).toMatchObject({ now: at(23, 10), decision: { active: 2, standby: 1, drain: 3 } });
    // and to 1 only 10 minutes after the last spike (its need held until the 23:09 tick).
    expect(ticks.filter((d) => d.now < at(23, 19)).every((d) => d.decision.active >= 2)).toBe(true);
    expect(tickAt(at(23, 19)).decision).toMatchObject({ active: 1, standby: 1, drain: 1 });
    expect(ticks.filter((d) => d.now >= at(23)).every((d) => d.decision.launch === 0)).toBe(true); // no flapping
    for (const { decision } of ticks) expect(decision.active + decision.standby).toBeGreaterThanOrEqual(settings.min);
    expect(sim.counts()).toEqual(pool(0, 1)); // traffic gone: just the standby setting
    const night = tickAt(at(25));
    expect(night.before).toEqual(pool(1, 1)); // 10/s needs one active, plus one standby
  });

  it('clock skew backwards: drops future entries, holds the pool, scales down one window later', () => {
    let d = decide(inputOf({ now: at(12), forecast: forecastOf(400), workers: pool(5, 1) }));
    expect(d.active).toBe(5);
    const back = at(11);
    d = decide(inputOf({ now: back, forecast: forecastOf(10), workers: pool(5, 1), memory: d.memory }));
    expect(d).toMatchObject({ active: 5, standby: 1, launch: 0, drain: 0 });
    expect(d.memory.recentDesired.every((e) => e.at <= back)).toBe(true);
    expect(d.reasons.some((r) => r.startsWith('clock went back 3600.0s'))).toBe(true);
    let t = back;
    while (d.drain === 0 && t < back + 3 * SETTINGS.scaleDownStabilizationMs) {
      t += 30_000;
      d = decide(inputOf({ now: t, forecast: forecastOf(10), workers: pool(5, 1), memory: d.memory }));
    }
    // The held 5 was in force until the next tick; one window after that it goes: not wedged until 12:00.
    expect(t).toBe(back + 30_000 + SETTINGS.scaleDownStabilizationMs);
    expect(d).toMatchObject({ active: 1, standby: 1, drain: 4 });
  });

  it('clock skew forwards: a gap does not expire the window by itself', () => {
    let d = decide(inputOf({ now: at(12), forecast: forecastOf(400), workers: pool(5, 1) }));
    const jump = at(14);
    d = decide(inputOf({ now: jump, forecast: forecastOf(10), workers: pool(5, 1), memory: d.memory }));
    expect(d).toMatchObject({ active: 5, drain: 0 });
    d = decide(
      inputOf({ now: jump + SETTINGS.scaleDownStabilizationMs - 1, forecast: forecastOf(10), workers: pool(5, 1), memory: d.memory }),
    );
    expect(d.drain).toBe(0);
    d = decide(inputOf({ now: jump + SETTINGS.scaleDownStabilizationMs, forecast: forecastOf(10), workers: pool(5, 1), memory: d.memory }));
    expect(d).toMatchObject({ active: 1, standby: 1, drain: 4 });
  });

  it('no history: a reactive forecast drives the same rules', () => {
    const sim = new Sim({ settings: SETTINGS, start: at(9), demand: () => 300, forecast: (s) => s.recent(), workers: pool(0) });
    sim.run(at(9, 40));
    expect(sim.decisions[0]!.decision.reasons[0]).toContain('reactive');
    expect(sim.counts()).toEqual(pool(4, 1)); // 300/s at 80/s planned per worker, plus one standby
  });

  it('no throughput profile yet: assumes a slow worker, never divides by zero, holds scale-down', () => {
    for (const perWorkerRatePerSec of [0, -5, Number.NaN, Number.POSITIVE_INFINITY]) {
      const d = decide(inputOf({ perWorkerRatePerSec, forecast: forecastOf(3), workers: pool(1, 1) }));
      expect(d.active).toBe(4); // 3/s at the fallback 1/s × 0.8
      expect(d.launch).toBe(4 + 1 - 2);
      expect(d.memory.recentDesired).toEqual([]); // a guess is not remembered
      const idle = decide(inputOf({ perWorkerRatePerSec, forecast: forecastOf(0), workers: pool(6, 1) }));
      expect(idle).toMatchObject({ active: 6, drain: 0 });
    }
  });

  it('min 0, sporadic requests before any profile: one cold start, the worker launched for the first is not drained when its profile arrives', () => {
    const settings = { ...SETTINGS, min: 0, standby: 0, coldStartMs: 5_000, scaleDownStabilizationMs: 120_000 };
    const queued: Backlog = { ...noBacklog, waiting: 1, oldestAgeMs: 100 };
    // The live forecaster's reactive level: the arrivals of the last completed minute.
    const arrivalAt = (s: number) => s % 20 === 0 && s < 300;
    const lastMinute = (s: number) => {
      const start = (Math.floor(s / 60) - 1) * 60;
      return start < 0 ? 0 : Array.from({ length: 60 }, (_, i) => start + i).filter(arrivalAt).length / 60;
    };
    let memory = emptyPolicyMemory();
    let workers = pool(0);
    const launches: number[] = [];
    const drains: number[] = [];
    // A request every 20 s for five minutes, then none. A launched worker is warm at the next
    // tick, serves what waits at once, and only then reports its rate.
    for (let s = 0; s < 600; s += 2) {
      const warm = workers.active > 0;
      const d = decide({
        now: at(3, 0, s),
        forecast: forecastOf(lastMinute(s), lastMinute(s), 'reactive'),
        backlog: arrivalAt(s) && !warm ? queued : noBacklog,
        workers,
        perWorkerRatePerSec: warm ? RATE : 0,
        settings,
        memory,
      });
      memory = d.memory;
      if (d.launch > 0) launches.push(s);
      if (d.drain > 0) drains.push(s);
      workers = pool(Math.max(0, workers.active + workers.starting - d.drain), 0, d.launch);
    }
    expect(launches).toEqual([0]);
    expect(drains).toHaveLength(1);
    expect(drains[0]).toBeGreaterThan(300); // only after the requests stopped
  });

  it("says the wait budget is the SLO less a batch's service where it is", () => {
    const settings = { ...SETTINGS, sloQueueWaitMs: 2_000 };
    const slow = decide(inputOf({ settings, batchServiceMs: 1_000, forecast: forecastOf(50), workers: pool(1) }));
    expect(slow.reasons.join(' | ')).toContain("keeps queue waits under 1.0s (the 2.0s SLO less a batch's service)");
    const fast = decide(inputOf({ settings, forecast: forecastOf(50), workers: pool(1) }));
    expect(fast.reasons.join(' | ')).toMatch(/keeps queue waits under 2\.0s at/);
  });

  it('worker crash: counts drop, standby takes over at once and the pool is relaunched once', () => {
    const settings = { ...SETTINGS, standby: 1 };
    const sim = new Sim({ settings, start: at(10), demand: () => 300, forecast: () => forecastOf(300), workers: pool(4, 1) });
    sim.run(at(10, 1));
    expect(sim.counts()).toEqual(pool(4, 1));
    sim.crash(2);
    const d = sim.tick();
    expect(d).toMatchObject({ active: 4, standby: 1, launch: 2, drain: 0 });
    expect(sim.counts()).toEqual(pool(3, 0, 2)); // the standby was activated
    sim.run(at(10, 2));
    expect(sim.decisions.slice(-12).every((x) => x.decision.launch === 0)).toBe(true); // starting ones count
    sim.run(at(10, 4));
    expect(sim.counts()).toEqual(pool(4, 1));
  });

  it('min 0 with standby 1 and no traffic: zero active and one warmed standby', () => {
    const settings = { ...SETTINGS, min: 0, standby: 1 };
    const sim = new Sim({ settings, start: at(3), demand: () => 0, forecast: () => forecastOf(0), workers: pool(0) });
    expect(sim.tick()).toMatchObject({ active: 0, standby: 1, launch: 1, drain: 0 });
    sim.step();
    expect(sim.tick()).toMatchObject({ launch: 0 });
    sim.run(at(3, 30));
    expect(sim.counts()).toEqual(pool(0, 1));
  });
});

function randomInput(r: () => number): PolicyInput {
  const int = (n: number) => Math.floor(r() * n);
  const odd = <T>(value: () => number, ...specials: T[]) => (r() < 0.1 ? specials[int(specials.length)]! : value());
  const now = at(12) + int(1000) * 5000;
  const min = int(5);
  const entries = Array.from({ length: int(6) }, () => ({ at: now + (int(400) - 350) * 5000, active: int(25) }));
  return {
    now,
    forecast: { ...forecastOf(odd(() => r() * 2000, 0, Number.NaN, -3)), burstRatePerSec: odd(() => r() * 3000, Number.NaN, 0) },
    backlog: {
      waiting: odd(() => int(20_000), Number.NaN),
      prioritized: int(500),
      delayed: int(50),
      active: int(50),
      oldestAgeMs: int(60_000),
    },
    workers: { starting: int(5), standby: int(5), active: odd(() => int(25), -1, Number.NaN), draining: int(3) },
    perWorkerRatePerSec: odd(() => 1 + r() * 300, 0, Number.NaN, -1),
    settings: {
      ...SETTINGS,
      min,
      max: min + int(20) - (r() < 0.05 ? 3 : 0),
      standby: int(4),
      sloQueueWaitMs: 1000 + int(60_000),
      coldStartMs: 1000 + int(180_000),
      scaleDownStabilizationMs: int(30) * MIN,
      targetUtilization: odd(() => 0.3 + r() * 0.7, 0, 1.5),
    },
    memory: { recentDesired: entries.sort((a, b) => a.at - b.at) },
  };
}

describe('decide: properties over random inputs (seeded)', () => {
  const cases = Array.from({ length: 2000 }, (_, i) => randomInput(seededRandom(1000 + i)));

  it('keeps every invariant', () => {
    for (const input of cases) {
      const frozen = structuredClone(input);
      const d = decide(input);
      expect(input).toEqual(frozen); // the input is not mutated
      expect(decide(frozen)).toEqual(d); // and the answer is a function of it alone
      const { min } = input.settings;
      const max = Math.max(min, input.settings.max);
      for (const n of [d.active, d.standby, d.launch, d.drain]) expect(Number.isInteger(n) && n >= 0).toBe(true);
      expect(d.active + d.standby).toBeGreaterThanOrEqual(min);
      expect(d.active + d.standby).toBeLessThanOrEqual(max);
      expect(d.launch === 0 || d.drain === 0).toBe(true); // never both
      const w = input.workers;
      const have = [w.active, w.standby, w.starting].reduce((s, n) => s + (n > 0 ? n : 0), 0);
      if (d.launch > 0) expect(have + d.launch).toBe(d.active + d.standby);
      if (d.drain > 0) {
        expect(have - d.drain).toBe(d.active + d.standby); // drains only the excess, never below min
        expect(input.memory.recentDesired.every((e) => e.at <= input.now)).toBe(true); // never on a skewed tick
        expect(input.perWorkerRatePerSec > 0).toBe(true); // never on a guessed profile
      }
      const kept = d.memory.recentDesired;
      expect(kept.every((e) => e.at <= input.now)).toBe(true);
      for (let i = 1; i < kept.length; i++) {
        expect(kept[i]!.at).toBeGreaterThan(kept[i - 1]!.at);
        expect(kept[i]!.active).toBeLessThan(kept[i - 1]!.active);
      }
      expect(d.reasons.length).toBeGreaterThan(0);
    }
  });

  it('never plans fewer active workers than clear the backlog within the SLO (launched ones: what is left when they arrive), unless max binds or warm ones clear it within a cold start plus the SLO', () => {
    let checked = 0;
    for (const input of cases.map((c) => ({ ...c, settings: { ...c.settings, max: c.settings.min + 1000 } }))) {
      const { settings: s, forecast: f, backlog: b, perWorkerRatePerSec: rate, workers: w } = input;
      const valid = rate > 0 && f.ratePerSec >= 0 && b.waiting >= 0 && s.targetUtilization > 0 && s.targetUtilization <= 1 && w.active >= 0;
      const d = decide(input);
      if (!valid || d.active + d.standby === Math.max(s.min, s.max)) continue;
      const queued = b.waiting + b.prioritized + b.delayed;
      const warm = w.active + w.standby;
      const spare = warm * rate - f.ratePerSec;
      // S′: the SLO less a full batch, at least a quarter of it (these cases give no batch time).
      const budgetMs = Math.max(s.sloQueueWaitMs / 4, s.sloQueueWaitMs - (input.batchServiceMs ?? 0));
      // Warm ones empty the queue by a cold start plus S′: a launch would change no job's wait.
      if (spare > 0 && (queued / spare) * 1000 <= s.coldStartMs + budgetMs) continue;
      checked++;
      const full = f.ratePerSec + (queued * 1000) / s.sloQueueWaitMs;
      // Launched workers arrive to what the warm ones leave and clear it, with the warm ones' spare, within S′.
      const left = queued - (spare * s.coldStartMs) / 1000;
      const launched = warm * rate * s.targetUtilization + (left * 1000) / budgetMs - spare;
      expect(d.active * rate * s.targetUtilization).toBeGreaterThanOrEqual(Math.min(full, launched) - 1e-6);
    }
    expect(checked).toBeGreaterThan(200); // the rule was exercised, not skipped
  });

  it('is monotone: more backlog or a higher forecast never lowers desired active', () => {
    for (const input of cases) {
      const base = decide(input).active;
      const moreBacklog = { ...input.backlog, waiting: (input.backlog.waiting || 0) + 1000 };
      expect(decide({ ...input, backlog: moreBacklog }).active).toBeGreaterThanOrEqual(base);
      const higher = { ...input.forecast, ratePerSec: (input.forecast.ratePerSec || 0) + 50 };
      expect(decide({ ...input, forecast: higher }).active).toBeGreaterThanOrEqual(base);
    }
  });
});
