/** Admission against the backlog bound: admit, degrade to low priority, or refuse with a Retry-After. */
import { describe, expect, it } from 'vitest';
import { checkAdmission, deploymentBacklog } from './admission.ts';

describe('checkAdmission', () => {
  it('admits everything when the deployment has no bound', () => {
    expect(checkAdmission({ depth: 1_000_000 })).toEqual({ admit: true });
  });

  it('admits below the bound and refuses at it', () => {
    expect(checkAdmission({ depth: 99, backlogMax: 100 })).toEqual({ admit: true });
    expect(checkAdmission({ depth: 100, backlogMax: 100 })).toMatchObject({ admit: false });
  });

  it('admits a degradable request at low priority up to the overflow ceiling, then refuses it too', () => {
    expect(checkAdmission({ depth: 100, backlogMax: 100, lowPriorityOk: true })).toEqual({ admit: true, priority: 'low' });
    expect(checkAdmission({ depth: 199, backlogMax: 100, lowPriorityOk: true })).toEqual({ admit: true, priority: 'low' });
    expect(checkAdmission({ depth: 200, backlogMax: 100, lowPriorityOk: true })).toMatchObject({ admit: false });
    expect(checkAdmission({ depth: 120, backlogMax: 100, lowPriorityOk: true }, { overflowFactor: 1.1 })).toMatchObject({ admit: false });
  });

  it('estimates Retry-After as the excess over the bound divided by the drain rate, rounded up', () => {
    // 150 queued, bound 100: 51 must finish before one more fits; at 10 jobs/s that is 5.1 s → 6.
    expect(checkAdmission({ depth: 150, backlogMax: 100, drainRatePerS: 10 })).toEqual({ admit: false, retryAfterS: 6 });
    expect(checkAdmission({ depth: 100, backlogMax: 100, drainRatePerS: 1000 })).toEqual({ admit: false, retryAfterS: 1 });
  });

  it('bounds Retry-After: the fallback when the rate is unknown, the ceiling when nothing drains', () => {
    expect(checkAdmission({ depth: 150, backlogMax: 100 })).toEqual({ admit: false, retryAfterS: 5 });
    expect(checkAdmission({ depth: 150, backlogMax: 100, drainRatePerS: Number.NaN })).toEqual({ admit: false, retryAfterS: 5 });
    expect(checkAdmission({ depth: 150, backlogMax: 100, drainRatePerS: 0 })).toEqual({ admit: false, retryAfterS: 300 });
    expect(checkAdmission({ depth: 1e6, backlogMax: 100, drainRatePerS: 1 })).toEqual({ admit: false, retryAfterS: 300 });
    expect(checkAdmission({ depth: 150, backlogMax: 100, drainRatePerS: 0 }, { maxRetryAfterS: 30, fallbackRetryAfterS: 2 })).toEqual({
      admit: false,
      retryAfterS: 30,
    });
    expect(checkAdmission({ depth: 150, backlogMax: 100 }, { fallbackRetryAfterS: 2 })).toEqual({ admit: false, retryAfterS: 2 });
  });
});

describe('deploymentBacklog', () => {
  it('sums the depth of every listed version, those at weight 0 included', async () => {
    const depths = new Map([
      ['m@1', 7],
      ['m@2', 3],
      ['m@3', 100],
    ]);
    const versions = [
      { version: '1', weight: 100 },
      { version: '2', weight: 0 },
    ];
    expect(await deploymentBacklog({ model: 'm', versions }, async (m, v) => depths.get(`${m}@${v}`) ?? 0)).toBe(10);
  });
});
