import { describe, expect, it } from 'vitest';
import { createPendingLoads, mergeLoads } from './pending-loads.ts';

describe('pending loads', () => {
  it('shows a load on its worker until the hold passes, then forgets it', () => {
    const p = createPendingLoads(1000);
    p.remember('w1', 'a@1', 0);
    p.remember('w1', 'b@1', 500);
    p.remember('w2', 'a@1', 900);
    expect(p.active(999)).toEqual(
      new Map([
        ['w1', ['a@1', 'b@1']],
        ['w2', ['a@1']],
      ]),
    );
    expect(p.active(1000)).toEqual(
      new Map([
        ['w1', ['b@1']],
        ['w2', ['a@1']],
      ]),
    );
    expect(p.active(2000)).toEqual(new Map());
  });

  it('keeps what it holds when the clock goes back', () => {
    const p = createPendingLoads(1000);
    p.remember('w1', 'a@1', 5000);
    expect(p.active(4000)).toEqual(new Map([['w1', ['a@1']]]));
  });

  it('merges claims and pending loads, each model once per worker', () => {
    expect(
      mergeLoads(
        new Map([['w1', ['a']]]),
        new Map([
          ['w1', ['a', 'b']],
          ['w2', ['c']],
        ]),
      ),
    ).toEqual(
      new Map([
        ['w1', ['a', 'b']],
        ['w2', ['c']],
      ]),
    );
  });
});
