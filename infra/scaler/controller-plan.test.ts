import { describe, expect, it } from 'vitest';
import type { ObservedWorker } from './controller-observe.ts';
import { allocate, inApplyOrder, largestRemainder, planVersion, retireTargets, type VersionView } from './controller-plan.ts';
import type { ScalerAction } from './decision-log.ts';

const w = (id: string, state: ObservedWorker['state'], extra: Partial<ObservedWorker> = {}): ObservedWorker => ({
  id,
  version: '1',
  state,
  ...extra,
});

const summary = (actions: ScalerAction[]) =>
  actions.map((a) => (a.action === 'launch' ? `launch ${a.version} ${a.count} ${a.startAs}` : `${a.action} ${a.workerId}`));

describe('planVersion', () => {
  it('activates standby before launching, and launches the rest of the active shortfall as active', () => {
    const workers = [w('a1', 'active'), w('s1', 'standby')];
    const actions = planVersion({ version: '1', active: 3, standby: 1, launch: 2, drain: 0 }, workers);
    expect(summary(actions)).toEqual(['activate s1', 'launch 1 1 active', 'launch 1 1 standby']);
  });

  it('counts workers already starting against the active shortfall', () => {
    const workers = [w('a1', 'active'), w('st', 'warming')];
    const actions = planVersion({ version: '1', active: 2, standby: 1, launch: 1, drain: 0 }, workers);
    expect(summary(actions)).toEqual(['launch 1 1 standby']);
  });

  it('moves the least busy surplus active worker to standby while standby is short', () => {
    const workers = [
      w('busy', 'active', { jobsInFlight: 9 }),
      w('idle', 'active', { jobsInFlight: 0 }),
      w('a3', 'active', { jobsInFlight: 4 }),
    ];
    const actions = planVersion({ version: '1', active: 2, standby: 1, launch: 0, drain: 0 }, workers);
    expect(summary(actions)).toEqual(['standby idle']);
  });

  it('drains starting workers first, then standby, then the least busy and newest active ones', () => {
    const workers = [
      w('old-idle', 'active', { jobsInFlight: 0, startedAt: 1000 }),
      w('new-idle', 'active', { jobsInFlight: 0, startedAt: 5000 }),
      w('busy', 'active', { jobsInFlight: 12, startedAt: 9000 }),
      w('sb', 'standby', { startedAt: 2000 }),
      w('boot', 'downloading', { startedAt: 8000 }),
    ];
    const actions = planVersion({ version: '1', active: 1, standby: 0, launch: 0, drain: 4 }, workers);
    expect(summary(actions)).toEqual(['drain boot', 'drain sb', 'drain new-idle', 'drain old-idle']);
  });

  it('ignores workers already draining, stopped or failed', () => {
    const workers = [w('d', 'draining'), w('x', 'failed'), w('a', 'active', { jobsInFlight: 1 })];
    expect(summary(planVersion({ version: '1', active: 0, standby: 0, launch: 0, drain: 5 }, workers))).toEqual(['drain a']);
  });
});

describe('allocate', () => {
  const view = (version: string, weight: number, workers: ObservedWorker[] = []): VersionView => ({ version, weight, workers });

  it('takes the decision as it is for a single version', () => {
    expect(allocate({ active: 3, standby: 1, launch: 2, drain: 0 }, [view('1', 100)])).toEqual([
      { version: '1', active: 3, standby: 1, launch: 2, drain: 0 },
    ]);
  });

  it('gives every version with traffic at least one active worker and launches what each lacks', () => {
    const targets = allocate({ active: 4, standby: 1, launch: 5, drain: 0 }, [view('1', 90), view('2', 10)]);
    expect(targets).toEqual([
      { version: '1', active: 4, standby: 1, launch: 5, drain: 0 },
      { version: '2', active: 1, standby: 0, launch: 1, drain: 0 },
    ]);
  });

  it("drains a version's surplus only once no version lacks workers or has any starting", () => {
    const stable = [w('a', 'active'), w('b', 'active'), w('c', 'active')];
    const waiting = allocate({ active: 2, standby: 0, launch: 0, drain: 0 }, [view('1', 50, stable), view('2', 50, [w('n', 'loading')])]);
    expect(waiting.map((t) => t.drain)).toEqual([0, 0]);
    const ready = allocate({ active: 2, standby: 0, launch: 0, drain: 0 }, [view('1', 50, stable), view('2', 50, [w('n', 'active')])]);
    expect(ready.map((t) => t.drain)).toEqual([2, 0]);
  });

  it('splits standby by largest remainder, ties to the stable version', () => {
    expect(largestRemainder(3, [50, 50])).toEqual([2, 1]);
    expect(largestRemainder(1, [10, 90])).toEqual([0, 1]);
    expect(largestRemainder(0, [100])).toEqual([0]);
  });
});

describe('retireTargets', () => {
  const old = (workers: ObservedWorker[]): VersionView => ({ version: '0', weight: 0, workers });

  it('keeps one active worker while the queue holds jobs, launching one if none is left', () => {
    expect(retireTargets(old([]), 3, true)).toMatchObject({ active: 1, launch: 1, drain: 0 });
    expect(retireTargets(old([w('s', 'standby')]), 3, true)).toMatchObject({ active: 1, launch: 0, drain: 0 });
  });

  it('drains everything once the queue is empty and the versions with traffic are settled', () => {
    const workers = [w('a', 'active'), w('s', 'standby')];
    expect(retireTargets(old(workers), 0, false)).toMatchObject({ drain: 0 });
    expect(retireTargets(old(workers), 0, true)).toMatchObject({ drain: 2 });
  });
});

it("orders every version's actions: activations, launches, standby moves, drains", () => {
  const actions: ScalerAction[] = [
    { action: 'drain', version: '2', workerId: 'x' },
    { action: 'launch', version: '2', count: 1, startAs: 'active' },
    { action: 'standby', version: '1', workerId: 'y' },
    { action: 'activate', version: '2', workerId: 'z' },
  ];
  expect(inApplyOrder(actions).map((a) => a.action)).toEqual(['activate', 'launch', 'standby', 'drain']);
});
