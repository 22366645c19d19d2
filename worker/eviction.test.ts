// Room for a load within the memory budget: LRU, never in flight, recent ones only after older
// ones, all or nothing; the clock is a plain number, moved forwards and backwards.
import { describe, expect, it } from 'vitest';
import { evictionOrder, overBudget, type Resident, roomFor } from './eviction.ts';

const MB = 1024 * 1024;
const MIN = 60_000;
const RECENT = 3 * MIN;

function resident(key: string, mb: number, lastUsedAt: number, jobsInFlight = 0, pinned = false): Resident {
  return { key, residentBytes: mb * MB, lastUsedAt, jobsInFlight, pinned };
}

describe('roomFor', () => {
  const now = 100 * MIN;

  it('evicts nothing when the load fits', () => {
    const plan = roomFor({ needBytes: 10 * MB, budgetBytes: 100 * MB, residents: [resident('a', 50, 0)], now, recentMs: RECENT });
    expect(plan).toEqual({ fits: true, evict: [] });
  });

  it('evicts the least recently used first, as few as it takes', () => {
    const residents = [resident('new', 30, now - 20 * MIN), resident('old', 30, now - 50 * MIN), resident('mid', 30, now - 30 * MIN)];
    expect(roomFor({ needBytes: 40 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT }).evict).toEqual(['old']);
    expect(roomFor({ needBytes: 50 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT }).evict).toEqual(['old', 'mid']);
  });

  it('never evicts a model with jobs in flight, nor a pinned one', () => {
    const residents = [
      resident('busy', 40, now - 60 * MIN, 2),
      resident('loading', 40, now - 60 * MIN, 0, true),
      resident('idle', 10, now - 10 * MIN),
    ];
    expect(roomFor({ needBytes: 20 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT })).toEqual({
      fits: true,
      evict: ['idle'],
    });
    const plan = roomFor({ needBytes: 40 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT });
    expect(plan).toMatchObject({ fits: false, evict: [], reason: 'all-busy-or-recent' });
  });

  it('takes a recently used model only when no older one is left', () => {
    const residents = [
      resident('recent-old', 30, now - 2 * MIN),
      resident('stale', 30, now - 10 * MIN),
      resident('recent-new', 30, now - 1 * MIN),
    ];
    expect(roomFor({ needBytes: 30 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT }).evict).toEqual(['stale']);
    expect(roomFor({ needBytes: 60 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT }).evict).toEqual(['stale', 'recent-old']);
  });

  it('evicts nothing when even every evictable model is not enough', () => {
    const residents = [resident('busy', 60, now - 60 * MIN, 1), resident('idle', 20, now - 60 * MIN)];
    const plan = roomFor({ needBytes: 50 * MB, budgetBytes: 100 * MB, residents, now, recentMs: RECENT });
    expect(plan).toEqual({ fits: false, evict: [], reason: 'all-busy-or-recent', shortBytes: 10 * MB });
  });

  it('refuses a model larger than the whole budget without evicting anything', () => {
    const plan = roomFor({ needBytes: 200 * MB, budgetBytes: 100 * MB, residents: [resident('a', 10, 0)], now, recentMs: RECENT });
    expect(plan).toEqual({ fits: false, evict: [], reason: 'larger-than-budget', shortBytes: 100 * MB });
  });

  it('counts a model as recent when the clock went backwards past its last use', () => {
    // lastUsedAt after `now`: its age is negative, so it is recent, and the older one goes first.
    const residents = [resident('future', 30, now + 10 * MIN), resident('past', 30, now - 10 * MIN)];
    expect(evictionOrder(residents, now, RECENT).map((r) => r.key)).toEqual(['past', 'future']);
  });

  it('ages as the clock moves on: a recent model becomes old', () => {
    const residents = [resident('a', 30, now - 1 * MIN), resident('b', 30, now - 2 * MIN)];
    expect(evictionOrder(residents, now, RECENT).map((r) => r.key)).toEqual(['b', 'a']);
    expect(
      evictionOrder([resident('a', 30, now - 1 * MIN), resident('c', 30, now + 5 * MIN)], now + 3 * MIN, RECENT).map((r) => r.key),
    ).toEqual(['a', 'c']);
  });
});

describe('overBudget', () => {
  it('evicts back within the budget after a load measured more than expected, or not at all', () => {
    const now = 10 * MIN;
    const residents = [resident('a', 50, now - 9 * MIN), resident('b', 60, now - 8 * MIN)];
    expect(overBudget(residents, 100 * MB, now, RECENT)).toEqual(['a']);
    expect(overBudget([resident('a', 50, 0, 1), resident('b', 60, 0, 1)], 100 * MB, now, RECENT)).toEqual([]);
    expect(overBudget(residents, 200 * MB, now, RECENT)).toEqual([]);
  });
});
