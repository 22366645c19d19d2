import { readlinkSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SIMULATE_DEFAULTS } from '../kernel/config.ts';
import { baselinesAtSlo, inThisThread } from './at-slo.ts';
import { createReplayThreads, ReplayBudgetError, replayBounded, searchAtSloBounded, threadCpuMs } from './bounded-replay.ts';
import { compare, defaultSettings } from './compare.ts';
import type { Trace } from './trace.ts';

function trace(minutes: number, perMinute: number): Trace {
  const counts = Array.from({ length: minutes }, (_, m) => Math.round(perMinute * (1 + Math.sin(m / 60))));
  return { series: { startMs: Date.UTC(2026, 0, 5), perMinute: counts }, missing: counts.map(() => false), rows: 0 };
}

describe('replayBounded', () => {
  it('answers what compare() answers in this thread, chart series included, one list per task', async () => {
    const t = trace(240, 200);
    const settings = [1, 3].map((standby) =>
      defaultSettings(SIMULATE_DEFAULTS, { policy: { ...defaultSettings(SIMULATE_DEFAULTS).policy, standby } }),
    );
    const reports = await replayBounded(
      t,
      settings.map((s) => ({ settings: s, only: ['predictive'] })),
      { cpuBudgetMs: 60_000 },
    );
    expect(reports).toEqual(settings.map((s) => compare(t, s, ['predictive']).policies));
    expect(reports[0]?.[0]?.series.active.length).toBeGreaterThan(0);
  });

  it('stops a replay once it has used its CPU-time budget', async () => {
    // Thousands of simulated workers over a day of arrivals: a minute of CPU, far past 300 ms.
    const policy = { ...defaultSettings(SIMULATE_DEFAULTS).policy, min: 5_000, max: 5_000, standby: 5_000 };
    const task = { settings: defaultSettings(SIMULATE_DEFAULTS, { policy }), only: ['predictive' as const] };
    const replay = replayBounded(trace(1440, 500), [task], { cpuBudgetMs: 300 });
    await expect(replay).rejects.toBeInstanceOf(ReplayBudgetError);
    await expect(replay).rejects.toThrow(/budget is 300 ms/);
  });

  it('stops when its signal aborts, and refuses to start on an aborted one', async () => {
    const policy = { ...defaultSettings(SIMULATE_DEFAULTS).policy, min: 5_000, max: 5_000, standby: 5_000 };
    const task = { settings: defaultSettings(SIMULATE_DEFAULTS, { policy }), only: ['predictive' as const] };
    const gone = new AbortController();
    const replay = replayBounded(trace(1440, 500), [task], { cpuBudgetMs: 600_000, signal: gone.signal });
    setTimeout(() => gone.abort(new Error('client disconnected')), 200);
    await expect(replay).rejects.toThrow('client disconnected');
    await expect(replayBounded(trace(10, 1), [task], { cpuBudgetMs: 1_000, signal: gone.signal })).rejects.toThrow('client disconnected');
  });
});

describe('createReplayThreads', () => {
  // Each thread start compiles the simulator again (through tsx here): the tests start three.
  const task = { settings: defaultSettings(SIMULATE_DEFAULTS), only: ['predictive' as const] };
  const huge = { ...defaultSettings(SIMULATE_DEFAULTS).policy, min: 5_000, max: 5_000, standby: 5_000 };
  const tooLarge = { settings: defaultSettings(SIMULATE_DEFAULTS, { policy: huge }), only: ['predictive' as const] };
  const inThread = (t: Trace) => [compare(t, task.settings, ['predictive']).policies];

  it('keeps a thread that ended within its budget for the next call (its own trace), never one stopped at it; close() is idempotent', async () => {
    const threads = createReplayThreads();
    const a = trace(120, 200);
    const b = trace(180, 50);
    expect(await replayBounded(a, [task], { cpuBudgetMs: 60_000, threads })).toEqual(inThread(a));
    const kept = threads.take();
    if (!kept) throw new Error('no thread');
    threads.giveBack(kept);
    expect(await replayBounded(b, [task], { cpuBudgetMs: 60_000, threads })).toEqual(inThread(b));
    // The one thread kept answered the second call and was given back again.
    const again = threads.take();
    expect(again?.worker).toBe(kept.worker);
    if (again) threads.giveBack(again);
    // The next call, past its budget, takes it, and it is terminated, not kept.
    const stopped = replayBounded(trace(1440, 500), [tooLarge], { cpuBudgetMs: 300, threads });
    await expect(stopped).rejects.toBeInstanceOf(ReplayBudgetError);
    const fresh = threads.take();
    expect(fresh?.worker).toBeDefined();
    expect(fresh?.worker).not.toBe(kept.worker);
    if (fresh) threads.giveBack(fresh);
    // Budgets are per call: the thread's CPU time before it was taken is not this call's.
    expect(await replayBounded(a, [task], { cpuBudgetMs: 60_000, threads })).toEqual(inThread(a));
    await threads.close();
    await threads.close();
    // Closed: nothing to take, so a call runs on a thread of its own (the path without threads).
    expect(threads.take()).toBeUndefined();
  });

  it('with idleMs, terminates a thread left idle that long', async () => {
    const threads = createReplayThreads({ idleMs: 50 });
    try {
      const kept = threads.take();
      if (!kept) throw new Error('no thread');
      await kept.ready;
      const exited = new Promise((resolve) => kept.worker.once('exit', resolve));
      threads.giveBack(kept);
      await exited;
    } finally {
      await threads.close();
    }
  });
});

describe('searchAtSloBounded', () => {
  it('answers the baselines as-is and at the SLO target as in this thread, and stops at its budget', async () => {
    const t = trace(120, 200);
    const settings = defaultSettings(SIMULATE_DEFAULTS, { workerRps: 2, maxBatch: 4, sloMs: 10_000 });
    const r = await searchAtSloBounded(t, settings, 0.99, { cpuBudgetMs: 60_000 });
    expect(r.atSlo).toEqual(await baselinesAtSlo(t, settings, 0.99, inThisThread(t)));
    const asIs = compare(t, settings, ['static-peak', 'reactive', 'oracle']).policies.map(({ series: _s, ...p }) => p);
    expect(r.asIs).toEqual(asIs);
    const big = trace(1440, 2000);
    await expect(searchAtSloBounded(big, settings, 0.99, { cpuBudgetMs: 100 })).rejects.toBeInstanceOf(ReplayBudgetError);
  }, 60_000);
});

describe.runIf(process.platform === 'linux')('threadCpuMs', () => {
  it("reads a thread's CPU time, and null for a thread that is not there", () => {
    const self = Number(readlinkSync('/proc/thread-self').split('/').pop());
    const before = threadCpuMs(self) ?? Number.NaN;
    let x = 0;
    for (let i = 0; i < 50_000_000; i++) x += i % 7;
    expect(x).toBeGreaterThan(0);
    expect(threadCpuMs(self)).toBeGreaterThan(before);
    expect(threadCpuMs(2 ** 31 - 1)).toBeNull();
  });
});
