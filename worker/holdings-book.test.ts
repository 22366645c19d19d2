// The pool worker's side of the holdings protocol, on a clock the test moves (backwards too):
// stale messages, evicted models staying out until asked, retries after a failure, load order.
import { describe, expect, it } from 'vitest';
import type { HoldingsMessage, ModelRef } from '../infra/fleet/pool-holdings.ts';
import { HoldingsBook } from './holdings-book.ts';

const A = { model: 'a', version: '1' };
const B = { model: 'b', version: '1' };
const C = { model: 'c', version: '1' };
const RETRY = 10_000;

function setup() {
  const clock = {
    t: 1_000_000,
    now() {
      return this.t;
    },
  };
  const book = new HoldingsBook(clock, RETRY);
  const resident = new Set<string>();
  const next = (tried: string[] = []) => book.nextLoad((k) => resident.has(k), new Set(tried));
  return { clock, book, resident, next };
}

const msg = (rev: number, models: ModelRef[], loadNow?: ModelRef): HoldingsMessage => ({
  rev,
  models,
  sentAt: 0,
  ...(loadNow ? { loadNow } : {}),
});

describe('HoldingsBook', () => {
  it('loads in listed order, the askLoad model first, skipping the resident and those tried this round', () => {
    const { book, resident, next } = setup();
    expect(next()).toBeUndefined();
    book.accept(msg(1, [A, B, C], C));
    expect(next()).toEqual(C);
    resident.add('c@1');
    expect(next()).toEqual(A);
    expect(next(['a@1'])).toEqual(B);
  });

  it('ignores an older message and treats the same rev as a repeat', () => {
    const { book } = setup();
    expect(book.accept(msg(5, [A]))).toBe(true);
    expect(book.accept(msg(4, [B]))).toBe(false);
    expect(book.desired?.models).toEqual([A]);
    expect(book.accept(msg(5, [A]))).toBe(true);
  });

  it('keeps a model evicted for room out while listed, until a newer askLoad names it', () => {
    const { book, next } = setup();
    book.accept(msg(1, [A, B]));
    book.evictedForRoom(A);
    expect(next()).toEqual(B);
    // The controller re-sends the same set: A stays out.
    book.accept(msg(2, [A, B]));
    expect(next(['b@1'])).toBeUndefined();
    expect(book.absentViews()).toEqual([{ ...A, state: 'evicted', residentBytes: 0, lastUsedAt: 0, jobsInFlight: 0 }]);
    // An askLoad of A brings it back, first.
    book.accept(msg(3, [A, B], A));
    expect(next()).toEqual(A);
    expect(book.absentViews()).toEqual([]);
  });

  it('forgets a model once it is no longer listed, and a relisted one is loaded again', () => {
    const { book, next } = setup();
    book.accept(msg(1, [A]));
    book.evictedForRoom(A);
    book.accept(msg(2, []));
    expect(book.absentViews()).toEqual([]);
    book.accept(msg(3, [A]));
    expect(next()).toEqual(A);
  });

  it('tries a failed load again after retryAfterMs, and at once when the clock went backwards', () => {
    const { clock, book, next } = setup();
    book.accept(msg(1, [A]));
    book.loadFailed(A, 'registry away');
    expect(next()).toBeUndefined();
    expect(book.absentViews()[0]).toMatchObject({ state: 'failed', error: 'registry away' });
    clock.t += RETRY - 1;
    expect(next()).toBeUndefined();
    clock.t += 1;
    expect(next()).toEqual(A);
    book.loadFailed(A, 'again');
    clock.t -= 60_000;
    expect(next()).toEqual(A);
  });

  it('reports no room once per spell, and clears it when a load starts', () => {
    const { book } = setup();
    book.accept(msg(1, [A]));
    expect(book.hadNoRoom(A, 'all-busy-or-recent')).toBe(true);
    expect(book.hadNoRoom(A, 'all-busy-or-recent')).toBe(false);
    expect(book.absentViews()).toMatchObject([{ ...A, state: 'no-room', error: 'all-busy-or-recent' }]);
    book.cleared('a@1', 'no-room');
    expect(book.hadNoRoom(A, 'larger-than-budget')).toBe(true);
  });
});
