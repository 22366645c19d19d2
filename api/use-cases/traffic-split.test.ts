/** The per-job weighted choice: exact on a uniform grid, within a binomial bound on a seeded generator. */
import { describe, expect, it } from 'vitest';
import type { VersionWeight } from '../../infra/deployments/deployment-store.ts';
import { seededRandom } from '../../infra/kernel/seeded-random.ts';
import { chooseVersion, servedVersions } from './traffic-split.ts';

function tally(versions: VersionWeight[], draws: number, random: () => number): Map<string, number> {
  const counts = new Map<string, number>();
  for (let i = 0; i < draws; i++) {
    const v = chooseVersion({ versions }, random);
    counts.set(v, (counts.get(v) ?? 0) + 1);
  }
  return counts;
}

const canary: VersionWeight[] = [
  { version: 'stable', weight: 90 },
  { version: 'canary', weight: 10 },
];

describe('chooseVersion', () => {
  it('walks the cumulative weights in the order listed', () => {
    expect(chooseVersion({ versions: canary }, () => 0)).toBe('stable');
    expect(chooseVersion({ versions: canary }, () => 0.8999)).toBe('stable');
    expect(chooseVersion({ versions: canary }, () => 0.9)).toBe('canary');
    expect(chooseVersion({ versions: canary }, () => 0.999999)).toBe('canary');
  });

  it('gives each version exactly its share of a uniform grid of draws', () => {
    const versions = [
      { version: 'a', weight: 55 },
      { version: 'b', weight: 0 },
      { version: 'c', weight: 30 },
      { version: 'd', weight: 15 },
    ];
    let i = 0;
    const counts = tally(versions, 1000, () => i++ / 1000);
    expect(Object.fromEntries(counts)).toEqual({ a: 550, c: 300, d: 150 });
  });

  it('never picks a version at weight 0, even at its boundary', () => {
    const versions = [
      { version: 'a', weight: 0 },
      { version: 'b', weight: 100 },
      { version: 'c', weight: 0 },
    ];
    for (const r of [0, 0.5, 0.999999, 1]) expect(chooseVersion({ versions }, () => r)).toBe('b');
  });

  it('keeps a seeded random split within 4 standard deviations of the weights', () => {
    for (const seed of [1, 2, 3]) {
      const n = 20_000;
      const canaryCount = tally(canary, n, seededRandom(seed)).get('canary') ?? 0;
      const sd = Math.sqrt(n * 0.1 * 0.9);
      expect(Math.abs(canaryCount - n * 0.1)).toBeLessThan(4 * sd);
    }
  });

  it('is deterministic for a given generator', () => {
    const run = (random: () => number) => Array.from({ length: 200 }, () => chooseVersion({ versions: canary }, random));
    const first = run(seededRandom(7));
    expect(run(seededRandom(7))).toEqual(first);
    expect(new Set(first)).toEqual(new Set(['stable', 'canary']));
  });

  it('lists the versions that take new jobs', () => {
    expect(servedVersions({ versions: [...canary, { version: 'old', weight: 0 }] })).toEqual(['stable', 'canary']);
  });
});
