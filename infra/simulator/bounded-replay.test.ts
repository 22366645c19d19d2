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
  const task = { settings: defaultSettings(SIMULATE_DEFAULTS), only: ['predictive' as const] };
  const huge = { ...defaultSettings(SIMULATE_DEFAULTS).policy, min: 5_000, max: 5_000, standby: 5_000 };
  const tooLarge = { settings: defaultSettings(SIMULATE_DEFAULTS, { policy: huge }), only: ['predictive' as const] };

  it('keeps a thread whose call ended within its budget for the next call, which replays its own trace', async () => {
    const threads = createReplayThreads();
    try {
      const a = trace(120, 200);
      const b = trace(180, 50);
      const first = await replayBounded(a, [task], { cpuBudgetMs: 60_000, threads });
      const kept = threads.take();
      if (!kept) throw new Error('no thread');
      threads.giveBack(kept);
      const second = await replayBounded(b, [task], { cpuBudgetMs: 60_000, threads });
      expect(first).toEqual([compare(a, task.settings, ['predictive']).policies]);
      expect(second).toEqual([compare(b, task.settings, ['predictive']).policies]);
      // The one thread kept answered the second call and was given back again.
      const again = threads.take();
      expect(again?.worker).toBe(kept.worker);
      if (again) threads.giveBack(again);
    } finally {
      await threads.close();
    }
  });

  it('with idleMs, terminates a thread left idle that long, and the next call starts another', async () => {
    const threads = createReplayThreads({ idleMs: 50 });
    try {
      const t = trace(60, 20);
      await replayBounded(t, [task], { cpuBudgetMs: 60_000, threads });
      const kept = threads.take();
      if (!kept) throw new Error('no thread');
      const exited = new Promise((resolve) => kept.worker.once('exit', resolve));
      threads.giveBack(kept);
      await exited;
      const fresh = threads.take();
      expect(fresh?.worker).not.toBe(kept.worker);
      if (fresh) threads.giveBack(fresh);
      expect(await replayBounded(t, [task], { cpuBudgetMs: 60_000, threads })).toEqual([
        compare(t, task.settings, ['predictive']).policies,
      ]);
    } finally {
      await threads.close();
    }
  });

  it('never gives back a thread stopped at its budget; the next call runs on a fresh one; close() is idempotent', async () => {
    const threads = createReplayThreads();
    const first = threads.take();
    if (!first) throw new Error('no thread');
    threads.giveBack(first);
    const stopped = replayBounded(trace(1440, 500), [tooLarge], { cpuBudgetMs: 300, threads });
    await expect(stopped).rejects.toBeInstanceOf(ReplayBudgetError);
    // The call took the one idle thread and it was terminated, not kept.
    const next = threads.take();
    expect(next?.worker).not.toBe(first.worker);
    if (next) threads.giveBack(next);
    // Budgets are per call: the fresh thread's CPU time starts at zero.
    const t = trace(60, 20);
    expect(await replayBounded(t, [task], { cpuBudgetMs: 60_000, threads })).toEqual([compare(t, task.settings, ['predictive']).policies]);
    await threads.close();
    await threads.close();
    expect(threads.take()).toBeUndefined();
    // Closed: a call still runs, on a thread of its own.
    expect(await replayBounded(t, [task], { cpuBudgetMs: 60_000, threads })).toEqual([compare(t, task.settings, ['predictive']).policies]);
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
