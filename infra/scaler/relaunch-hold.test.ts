/**
 * The measured hold on fake times: gaps read from want sequences whose answers are worked out by
 * hand, the bounded and JSON-plain state, and the choice checked against the cost's definition
 * on hand-made and seeded random distributions.
 */
import { describe, expect, it } from 'vitest';
import type { RelaunchHoldState } from '../contracts/pool.ts';
import { seededRandom } from '../kernel/seeded-random.ts';
import {
  holdCostMs,
  type MeasuredHoldState,
  measuredHoldMs,
  noteWant,
  RELAUNCH_GAP_SAMPLES,
  RELAUNCH_HORIZON_COLD_STARTS,
  RELAUNCH_MIN_SAMPLES,
} from './relaunch-hold.ts';

const S = 1000;
const C = 60 * S;
const H = RELAUNCH_HORIZON_COLD_STARTS * C;

/** Folds [time s, want] ticks, through JSON between ticks as the persisted memory goes; `held` is the first tick's want unless given. */
function run(ticks: Array<[number, number]>, opts: { held?: number; coldStartMs?: number; from?: RelaunchHoldState } = {}) {
  let state: RelaunchHoldState | undefined = opts.from;
  for (const [t, want] of ticks) {
    const next = noteWant(state, { now: t * S, want, held: opts.held ?? ticks[0]?.[1] ?? want, coldStartMs: opts.coldStartMs ?? C });
    state = JSON.parse(JSON.stringify(next)) as RelaunchHoldState;
  }
  return state as MeasuredHoldState;
}

/** Ticks every `stepS` from `fromS` to `toS` inclusive at one want. */
function steady(fromS: number, toS: number, stepS: number, want: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let t = fromS; t <= toS; t += stepS) out.push([t, want]);
  return out;
}

const stateOf = (gapsMs: number[], censored = 0): RelaunchHoldState => ({ gapsMs, censored });

describe('noteWant: gaps from the want', () => {
  it('a surplus that opens and returns gives one gap per unit, from the fall to the return', () => {
    const s = run([
      [0, 5],
      [10, 5],
      [20, 3],
      [30, 3],
      [40, 3],
      [50, 5],
    ]);
    expect(s.gapsMs).toEqual([30 * S, 30 * S]);
    expect(s.censored).toBe(0);
    expect(s.lastDrainAt).toBeUndefined();
    expect(s.open?.levels).toEqual([]);
  });

  it('a partial return closes only the units it reaches; nested falls keep their own start', () => {
    // 7–10 fall at 10; 7–8 return at 20; 5–8 fall at 30; all return at 50.
    const s = run([
      [0, 10],
      [10, 6],
      [20, 8],
      [30, 4],
      [50, 10],
    ]);
    expect(s.gapsMs).toEqual([10 * S, 10 * S, 20 * S, 20 * S, 20 * S, 20 * S, 40 * S, 40 * S]);
  });

  it('while open, the staircase holds the ranges and lastDrainAt the oldest fall', () => {
    const s = run([
      [0, 10],
      [10, 6],
      [20, 8],
      [30, 4],
    ]);
    expect(s.open).toEqual({
      want: 4,
      at: 30 * S,
      levels: [
        { level: 10, since: 10 * S },
        { level: 8, since: 30 * S },
      ],
    });
    expect(s.lastDrainAt).toBe(10 * S);
  });

  it('a want that never returns is censored at the horizon, as a gap of at least its age, once', () => {
    const before = run([[0, 10], ...steady(10, H / S, 10, 2)]);
    expect(before.gapsMs).toEqual([]);
    expect(before.lastDrainAt).toBe(10 * S);
    const at = run([[0, 10], ...steady(10, H / S + 10, 10, 2)]);
    expect(at.gapsMs).toEqual(Array(8).fill(H));
    expect(at.censored).toBe(8);
    expect(at.lastDrainAt).toBeUndefined();
    // Its late return adds nothing: those units were already counted.
    const back = run([[H / S + 20, 10]], { from: at });
    expect(back.gapsMs).toEqual(at.gapsMs);
    expect(back.censored).toBe(8);
  });

  it('the horizon follows the cold start it is told', () => {
    const s = run([[0, 3], ...steady(10, 100, 10, 1)], { coldStartMs: 10 * S });
    // Horizon 80 s: the fall at 10 is censored at 90.
    expect(s.gapsMs).toEqual([80 * S, 80 * S]);
    expect(s.censored).toBe(2);
  });

  it('the first tick opens what is held above the want', () => {
    const s = run(
      [
        [0, 3],
        [20, 5],
      ],
      { held: 5 },
    );
    expect(s.gapsMs).toEqual([20 * S, 20 * S]);
  });

  it('a clock gone back drops the open spells and measures on from the last want', () => {
    const open = run([
      [100, 10],
      [110, 4],
    ]);
    const back = run([[50, 4]], { from: open });
    expect(back.gapsMs).toEqual([]);
    expect(back.open).toEqual({ want: 4, at: 50 * S, levels: [] });
    const on = run(
      [
        [60, 2],
        [70, 4],
      ],
      { from: back },
    );
    expect(on.gapsMs).toEqual([10 * S, 10 * S]);
  });

  it('keeps the newest RELAUNCH_GAP_SAMPLES, newest last', () => {
    const big = run([
      [0, 100],
      [10, 0],
      [20, 100],
    ]);
    expect(big.gapsMs).toEqual(Array(RELAUNCH_GAP_SAMPLES).fill(10 * S));
    const more = run(
      [
        [30, 99],
        [50, 100],
      ],
      { from: big },
    );
    expect(more.gapsMs).toHaveLength(RELAUNCH_GAP_SAMPLES);
    expect(more.gapsMs.at(-1)).toBe(20 * S);
    expect(more.gapsMs[0]).toBe(10 * S);
  });

  it('is a plain JSON value that folds the same with or without a round trip, and leaves its input alone', () => {
    const ticks: Array<[number, number]> = [
      [0, 7],
      [10, 3],
      [20, 5],
      [30, 1],
      [40, 6],
      [50, 2],
    ];
    let direct: RelaunchHoldState | undefined;
    for (const [t, want] of ticks) {
      const before = direct === undefined ? undefined : JSON.stringify(direct);
      const next = noteWant(direct, { now: t * S, want, held: 7, coldStartMs: C });
      if (before !== undefined) expect(JSON.stringify(direct)).toBe(before);
      direct = next;
    }
    expect(JSON.parse(JSON.stringify(direct))).toEqual(direct);
    expect(run(ticks, { held: 7 })).toEqual(direct);
  });

  it('a persisted state that is not a staircase restarts measuring; bad samples are dropped', () => {
    const bad = {
      gapsMs: [5 * S, -1, Number.NaN, 7 * S],
      censored: 2,
      open: { want: 3, at: 0, levels: [{ level: 2, since: 0 }] },
    } as RelaunchHoldState;
    const s = noteWant(bad, { now: 10 * S, want: 3, held: 3, coldStartMs: C });
    expect(s.gapsMs).toEqual([5 * S, 7 * S]);
    expect(s.censored).toBe(2);
    expect(s.open).toEqual({ want: 3, at: 10 * S, levels: [] });
  });
});

/** The cost's definition, written apart from the module's sweep: idle min(G, h), C when G returns after h inside the horizon. */
function costOf(gaps: readonly number[], h: number, coldStartMs: number): number {
  const horizon = RELAUNCH_HORIZON_COLD_STARTS * coldStartMs;
  let total = 0;
  for (const g of gaps) total += g >= horizon ? h : g <= h ? g : h + coldStartMs;
  return total / gaps.length;
}

describe('measuredHoldMs: the choice', () => {
  it('falls back under RELAUNCH_MIN_SAMPLES gaps', () => {
    const few = measuredHoldMs(stateOf(Array(RELAUNCH_MIN_SAMPLES - 1).fill(10 * S)), C, 123 * S);
    expect(few).toMatchObject({ holdMs: 123 * S, samples: RELAUNCH_MIN_SAMPLES - 1 });
    expect(few.why).toContain('fallback');
    expect(measuredHoldMs(undefined, C, 5 * S).holdMs).toBe(5 * S);
    const enough = measuredHoldMs(stateOf(Array(RELAUNCH_MIN_SAMPLES).fill(10 * S)), C, 123 * S);
    expect(enough.holdMs).toBe(10 * S);
    expect(enough.why).toMatch(/^hold 10 s: 16 measured gaps/);
  });

  it('falls back without a usable cold start', () => {
    expect(measuredHoldMs(stateOf(Array(32).fill(S)), 0, 7 * S).holdMs).toBe(7 * S);
  });

  it('gaps all shorter than a cold start: holds past the longest, never draining for them', () => {
    const rand = seededRandom(1);
    const gaps = Array.from({ length: 40 }, () => Math.round((0.05 + 0.75 * rand()) * C));
    expect(measuredHoldMs(stateOf(gaps), C, 0).holdMs).toBe(Math.max(...gaps));
  });

  it('gaps all much longer than a cold start, or censored: holds nothing', () => {
    const rand = seededRandom(2);
    const gaps = Array.from({ length: 40 }, (_, i) => (i % 3 === 0 ? H : Math.round((2 + 5 * rand()) * C)));
    const chosen = measuredHoldMs(stateOf(gaps), C, 5 * C);
    expect(chosen.holdMs).toBe(0);
    expect(chosen.why).toContain('14 past the 8.0 min horizon');
  });

  it('a bimodal mix goes to the side its cost favours', () => {
    // Short 0.2 C gaps with share p, long 4 C ones: holding past the short ones wins iff 0.2 C < p · C.
    const mix = (shortShare: number) => Array.from({ length: 50 }, (_, i) => (i < shortShare * 50 ? 0.2 * C : 4 * C));
    expect(measuredHoldMs(stateOf(mix(0.5)), C, 0).holdMs).toBe(0.2 * C);
    expect(measuredHoldMs(stateOf(mix(0.1)), C, 0).holdMs).toBe(0);
  });

  it('a tie goes to fewer relaunches, then to the shorter hold', () => {
    // Every gap exactly one cold start: draining and holding through it cost one C each.
    expect(measuredHoldMs(stateOf(Array(20).fill(C)), C, 0).holdMs).toBe(C);
  });

  it('its hold costs no more than any other on seeded random distributions', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const rand = seededRandom(seed);
      const cold = (5 + 295 * rand()) * S;
      const n = RELAUNCH_MIN_SAMPLES + Math.floor(rand() * (RELAUNCH_GAP_SAMPLES - RELAUNCH_MIN_SAMPLES + 1));
      const censoredShare = rand() < 0.3 ? rand() * 0.5 : 0;
      const meanShort = 0.05 + rand();
      const meanLong = 1 + 6 * rand();
      const longShare = rand();
      const gaps = Array.from({ length: n }, () => {
        if (rand() < censoredShare) return RELAUNCH_HORIZON_COLD_STARTS * cold;
        const mean = rand() < longShare ? meanLong : meanShort;
        return Math.min(RELAUNCH_HORIZON_COLD_STARTS * cold, Math.round(-Math.log(1 - rand()) * mean * cold));
      });
      const { holdMs } = measuredHoldMs(stateOf(gaps), cold, -1);
      const horizon = RELAUNCH_HORIZON_COLD_STARTS * cold;
      expect(holdMs === 0 || holdMs === horizon || gaps.includes(holdMs), `seed ${seed}`).toBe(true);
      const chosen = costOf(gaps, holdMs, cold);
      expect(holdCostMs(gaps, holdMs, cold)).toBeCloseTo(chosen, 6);
      // Every candidate, and a grid between them: the best of [0, H] is among the candidates.
      const others = [0, horizon, ...gaps, ...Array.from({ length: 101 }, (_, i) => (i / 100) * horizon)];
      for (const h of others) expect(chosen, `seed ${seed}, h ${h}`).toBeLessThanOrEqual(costOf(gaps, h, cold) * (1 + 1e-12));
    }
  });

  it('end to end: a want that dips for 40 s between 30 s peaks is held through its dips behind a 90 s cold start', () => {
    const ticks: Array<[number, number]> = [];
    for (let t = 0; t < 1800; t += 10) ticks.push([t, t % 70 < 30 ? 10 : 6]);
    const s = run(ticks, { coldStartMs: 90 * S });
    const chosen = measuredHoldMs(s, 90 * S, 0);
    expect(chosen.samples).toBe(RELAUNCH_GAP_SAMPLES);
    expect(chosen.holdMs).toBe(40 * S);
    // Behind a 10 s cold start the same dips are worth draining for.
    expect(measuredHoldMs(run(ticks, { coldStartMs: 10 * S }), 10 * S, 0).holdMs).toBe(0);
  });
});
