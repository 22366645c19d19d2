import { describe, expect, it } from 'vitest';
import type { InferenceEngine } from './engine.ts';
import { createEnginePool, MAX_AUTO_SESSIONS, sessionsFor } from './engine-pool.ts';

/** An engine whose passes end when the test says so, one at a time as a thread runs them. */
function gated(): InferenceEngine & { started: number; release(): void; closed: boolean } {
  const waiting: Array<() => void> = [];
  let chain = Promise.resolve();
  const e = {
    started: 0,
    closed: false,
    release: () => waiting.shift()?.(),
    load: async () => ({ inputNames: [], outputNames: [], loadMs: 1 }),
    run: () => {
      const turn = chain.then(() => {
        e.started++;
        return new Promise<void>((resolve) => waiting.push(resolve));
      });
      chain = turn;
      return turn.then(() => ({}));
    },
    close: async () => {
      e.closed = true;
    },
  };
  return e;
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe('createEnginePool', () => {
  it('spreads passes over idle sessions and counts how many ran at once', async () => {
    const [a, b] = [gated(), gated()];
    const pool = createEnginePool([a, b]);
    const runs = [pool.run({}), pool.run({}), pool.run({})];
    await tick();
    expect([a.started, b.started]).toEqual([1, 1]);
    expect(pool.busy).toBe(2);
    expect(pool.mostBusy).toBe(2);
    a.release();
    await tick();
    // The third went to the first engine behind its pass: it starts as that one ends.
    expect(a.started).toBe(2);
    a.release();
    b.release();
    await Promise.all(runs);
    expect(pool.busy).toBe(0);
    expect(pool.mostBusy).toBe(2);
    await pool.close();
    await pool.close();
    expect(a.closed && b.closed).toBe(true);
  });

  it('sends a lone pass to the first session', async () => {
    const [a, b] = [gated(), gated()];
    const pool = createEnginePool([a, b]);
    const run = pool.run({});
    await tick();
    expect([a.started, b.started]).toEqual([1, 0]);
    a.release();
    await run;
    expect(pool.mostBusy).toBe(1);
  });
});

describe('sessionsFor', () => {
  it('opens one a core for a one-row-a-pass model whose pass gained nothing from threads', () => {
    expect(sessionsFor(0, true, 1, 2)).toBe(2);
    expect(sessionsFor(0, true, 1, 64)).toBe(MAX_AUTO_SESSIONS);
    expect(sessionsFor(0, true, 1, 1)).toBe(1);
  });

  it('keeps one for a batched model, or a pass that uses the cores itself; the setting wins', () => {
    expect(sessionsFor(0, false, 1, 8)).toBe(1);
    expect(sessionsFor(0, true, 8, 8)).toBe(1);
    expect(sessionsFor(3, false, 8, 8)).toBe(3);
  });
});
