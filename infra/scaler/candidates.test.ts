/**
 * The portfolio's candidates as plain steps on a fake clock: decideCandidate() is called with an
 * advancing `now` and the memory it returned last time, the pool as the previous decision left it.
 */
import { describe, expect, it } from 'vitest';
import {
  type Backlog,
  type Candidate,
  emptyPolicyMemory,
  type Forecast,
  type PolicyDecision,
  type PolicyInput,
  type PolicySettings,
  type WorkerCounts,
} from '../contracts/pool.ts';
import { decideCandidate, REACTIVE_STABILIZATION_MS, REACTIVE_UTILIZATION } from './candidates.ts';
import { decide } from './policy.ts';

const MIN = 60_000;
const T0 = Date.UTC(2024, 0, 8, 12, 0);
const TICK_MS = 15_000;

const SETTINGS: PolicySettings = {
  min: 1,
  max: 20,
  standby: 1,
  sloQueueWaitMs: 10_000,
  coldStartMs: 120_000,
  scaleDownStabilizationMs: 10 * MIN,
  targetUtilization: 0.8,
};
const RATE = 20; // rows/s one worker sustains

function forecastOf(ratePerSec: number): Forecast {
  return { ratePerSec, burstRatePerSec: ratePerSec, horizonS: 150, method: 'seasonal', components: {} };
}
const noBacklog: Backlog = { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };
const queued = (waiting: number, over: Partial<Backlog> = {}): Backlog => ({ ...noBacklog, waiting, ...over });
const pool = (active: number, standby = 0, starting = 0): WorkerCounts => ({ starting, standby, active, draining: 0 });

function inputOf(over: Partial<PolicyInput> = {}): PolicyInput {
  return {
    now: T0,
    forecast: forecastOf(0),
    backlog: noBacklog,
    workers: pool(0),
    perWorkerRatePerSec: RATE,
    settings: SETTINGS,
    memory: emptyPolicyMemory(),
    ...over,
  };
}

const fixed = (workers: number): Candidate => ({ kind: 'fixed', name: 'fixed', workers });
const reactive = (backlogPerWorker: number): Candidate => ({ kind: 'reactive', name: 'reactive', backlogPerWorker });

/** Ticks a candidate: each step's backlog given, the pool obeying the last decision at once. */
function run(candidate: Candidate, steps: ReadonlyArray<Partial<PolicyInput>>, start: WorkerCounts): PolicyDecision[] {
  let memory = emptyPolicyMemory();
  let workers = start;
  const out: PolicyDecision[] = [];
  steps.forEach((step, i) => {
    const d = decideCandidate(candidate, inputOf({ now: T0 + i * TICK_MS, workers, memory, ...step }));
    memory = d.memory;
    const total = workers.active + workers.standby + workers.starting + d.launch - d.drain;
    workers = pool(total);
    out.push(d);
  });
  return out;
}

describe('fixed candidate', () => {
  it('launches up to its fleet, counting starting and standby workers as the pool', () => {
    expect(decideCandidate(fixed(5), inputOf({ workers: pool(3) }))).toMatchObject({ active: 5, standby: 0, launch: 2, drain: 0 });
    expect(decideCandidate(fixed(5), inputOf({ workers: pool(2, 1, 1) }))).toMatchObject({ active: 5, launch: 1, drain: 0 });
    expect(decideCandidate(fixed(5), inputOf({ workers: pool(5) }))).toMatchObject({ active: 5, launch: 0, drain: 0 });
  });

  it('drains above its fleet, whatever the demand', () => {
    const d = decideCandidate(fixed(5), inputOf({ workers: pool(7, 1), forecast: forecastOf(500), backlog: queued(10_000) }));
    expect(d).toMatchObject({ active: 5, standby: 0, launch: 0, drain: 3 });
  });

  it('stays within the deployment min and max', () => {
    expect(decideCandidate(fixed(30), inputOf({ workers: pool(0) }))).toMatchObject({ active: 20, launch: 20 });
    const min3 = { ...SETTINGS, min: 3 };
    expect(decideCandidate(fixed(0), inputOf({ settings: min3, workers: pool(5) }))).toMatchObject({ active: 3, drain: 2 });
  });

  it('writes its fleet as the one stabilisation entry, keeping the rest of the memory', () => {
    const memory = { ...emptyPolicyMemory(), recentDesired: [{ at: T0 - MIN, active: 9 }], recentPool: [{ at: T0 - MIN, active: 10 }] };
    const d = decideCandidate(fixed(4), inputOf({ memory, workers: pool(4) }));
    expect(d.memory.recentDesired).toEqual([{ at: T0, active: 4 }]);
    expect(d.memory.recentPool).toEqual(memory.recentPool);
  });

  it.each([0, Number.NaN, -1])('never drains while the worker rate is not measured (%s), and keeps the active ones', (rate) => {
    const d = decideCandidate(fixed(2), inputOf({ perWorkerRatePerSec: rate, workers: pool(6) }));
    expect(d).toMatchObject({ active: 6, launch: 0, drain: 0 });
    // Launching is not held back.
    expect(decideCandidate(fixed(4), inputOf({ perWorkerRatePerSec: rate, workers: pool(1) }))).toMatchObject({ active: 4, launch: 3 });
  });
});

describe('reactive candidate', () => {
  it('asks ⌈queued rows / backlogPerWorker⌉, counting prioritized and delayed jobs at rowsPerJob rows', () => {
    expect(decideCandidate(reactive(100), inputOf({ backlog: queued(450) })).active).toBe(5);
    const mixed = queued(200, { prioritized: 100, delayed: 150, active: 999, rowsPerJob: 2 });
    expect(decideCandidate(reactive(100), inputOf({ backlog: mixed })).active).toBe(9);
  });

  it('asks for the rows served per second at REACTIVE_UTILIZATION of a worker, the larger of the two triggers winning', () => {
    // 480 rows in 5 s: 96/s at 0.8 × 20/s a worker → 6 workers, more than the queue's 2.
    const observed = { arrivedRows: 0, servedRows: 480, sinceMs: 5_000 };
    const d = decideCandidate(reactive(100), inputOf({ backlog: queued(150), observed }));
    expect(96 / (RATE * REACTIVE_UTILIZATION)).toBe(6);
    expect(d.active).toBe(6);
    expect(d.launch).toBe(6);
    expect(d.standby).toBe(0);
    // The queue wins when it asks more.
    expect(decideCandidate(reactive(100), inputOf({ backlog: queued(1_050), observed })).active).toBe(11);
  });

  it('averages the served rate over the last minute of ticks fed back through memory', () => {
    // Four ticks of 15 s: 0, 0, 0 and 1,440 rows: 1,440 rows over 60 s is 24/s → 2 workers, not
    // the 96/s of the last tick alone (6).
    const steps = [0, 0, 0, 1_440].map((servedRows) => ({ observed: { arrivedRows: 0, servedRows, sinceMs: TICK_MS } }));
    const ds = run(reactive(100), steps, pool(0));
    expect(ds.at(-1)?.active).toBe(2);
  });

  it('stays within min and max', () => {
    expect(decideCandidate(reactive(10), inputOf({ backlog: queued(10_000) })).active).toBe(20);
    expect(decideCandidate(reactive(10), inputOf({ backlog: noBacklog })).active).toBe(1);
    expect(decideCandidate(reactive(10), inputOf({ backlog: noBacklog, settings: { ...SETTINGS, min: 0 } })).active).toBe(0);
  });

  it('scales up at once and down only after REACTIVE_STABILIZATION_MS of lower asks', () => {
    expect(REACTIVE_STABILIZATION_MS % TICK_MS).toBe(0);
    const spike = REACTIVE_STABILIZATION_MS / TICK_MS; // ticks until the spike leaves the window
    // One tick of 800 queued rows (8 workers), then 200 (2) for the rest.
    const steps = [queued(800), ...new Array(spike + 3).fill(queued(200))].map((backlog) => ({ backlog }));
    const ds = run(reactive(100), steps, pool(2));
    expect(ds[0]).toMatchObject({ active: 8, launch: 6, drain: 0 });
    // Held at 8 while the spike is within the window (its last tick: exactly 300 s after it).
    for (let i = 1; i <= spike; i++) expect(ds[i]).toMatchObject({ active: 8, launch: 0, drain: 0 });
    // Then down to the queue's 2, draining the rest once.
    expect(ds[spike + 1]).toMatchObject({ active: 2, launch: 0, drain: 6 });
    expect(ds[spike + 2]).toMatchObject({ active: 2, launch: 0, drain: 0 });
  });

  it('a second, higher ask restarts the hold from its own time', () => {
    const spike = REACTIVE_STABILIZATION_MS / TICK_MS;
    // 5 at tick 0, 7 at tick 4, then 1: held at 7 until 300 s after tick 4.
    const asks = [500, 200, 200, 200, 700, ...new Array(spike + 2).fill(100)];
    const ds = run(
      reactive(100),
      asks.map((w) => ({ backlog: queued(w) })),
      pool(0),
    );
    expect(ds.slice(0, 4).map((d) => d.active)).toEqual([5, 5, 5, 5]);
    expect(ds[4 + spike]?.active).toBe(7);
    expect(ds[5 + spike]?.active).toBe(1);
  });

  it('without the memory fed back, it forgets the spike at once', () => {
    const first = decideCandidate(reactive(100), inputOf({ backlog: queued(800) }));
    const next = decideCandidate(reactive(100), inputOf({ now: T0 + TICK_MS, backlog: queued(200), workers: pool(8) }));
    expect(first.active).toBe(8);
    expect(next).toMatchObject({ active: 2, drain: 6 });
    const held = decideCandidate(
      reactive(100),
      inputOf({ now: T0 + TICK_MS, backlog: queued(200), workers: pool(8), memory: first.memory }),
    );
    expect(held).toMatchObject({ active: 8, drain: 0 });
  });

  it.each([0, Number.NaN])('never drains while the worker rate is not measured (%s)', (rate) => {
    const d = decideCandidate(reactive(100), inputOf({ perWorkerRatePerSec: rate, backlog: queued(200), workers: pool(9) }));
    expect(d).toMatchObject({ active: 9, launch: 0, drain: 0 });
    expect(d.reasons.join('\n')).toMatch(/drain held/);
    // The same input with a measured rate drains to the queue's 2.
    expect(decideCandidate(reactive(100), inputOf({ backlog: queued(200), workers: pool(9) }))).toMatchObject({ active: 2, drain: 7 });
  });

  it('ignores a served count it cannot read (negative, NaN, no elapsed time)', () => {
    for (const observed of [
      { arrivedRows: 0, servedRows: -100, sinceMs: 5_000 },
      { arrivedRows: 0, servedRows: Number.NaN, sinceMs: 5_000 },
      { arrivedRows: 0, servedRows: 480, sinceMs: 0 },
    ]) {
      const d = decideCandidate(reactive(100), inputOf({ backlog: queued(150), observed }));
      expect(d.active).toBe(2);
      expect(d.memory.recentServed).toEqual([]);
    }
  });
});

describe('predictive candidate', () => {
  const demand: Partial<PolicyInput> = { forecast: forecastOf(90), backlog: queued(40), workers: pool(3, 1) };

  it.each<[string, Candidate & { kind: 'predictive' }]>([
    ['no overrides', { kind: 'predictive', name: 'p', overrides: {} }],
    ['standby', { kind: 'predictive', name: 'p', overrides: { standby: 4 } }],
    ['capacity margin', { kind: 'predictive', name: 'p', overrides: { capacityMargin: 1 } }],
    ['holds', { kind: 'predictive', name: 'p', overrides: { scaleDownStabilizationMs: 0, minLifetimeColdStarts: 0 } }],
  ])('is decide() with the overrides over the settings (%s)', (_, candidate) => {
    const input = inputOf(demand);
    expect(decideCandidate(candidate, input)).toEqual(decide({ ...input, settings: { ...SETTINGS, ...candidate.overrides } }));
  });

  it('the overrides change the decision (so the comparison above is not vacuous)', () => {
    const input = inputOf(demand);
    const plain = decide(input);
    const standby = decideCandidate({ kind: 'predictive', name: 'p', overrides: { standby: 4 } }, input);
    expect(standby.standby).toBeGreaterThan(plain.standby);
    const margin = decideCandidate({ kind: 'predictive', name: 'p', overrides: { capacityMargin: 1 } }, input);
    expect(margin.active).toBeGreaterThan(plain.active);
  });

  it('holds a pool a fixed candidate built, through the memory it left', () => {
    // The fixed fleet of 10 leaves recentDesired at 10; the predictive candidate adopted next
    // holds it for its own scale-down window instead of draining on its first tick.
    const built = decideCandidate(fixed(10), inputOf({ workers: pool(10) }));
    const predictive: Candidate = { kind: 'predictive', name: 'p', overrides: {} };
    const next = decideCandidate(predictive, inputOf({ now: T0 + TICK_MS, workers: pool(10), memory: built.memory }));
    const fresh = decideCandidate(predictive, inputOf({ now: T0 + TICK_MS, workers: pool(10) }));
    expect(next.active).toBe(10);
    expect(next.drain).toBe(0);
    expect(fresh.active).toBeLessThan(10);
  });
});
