import { describe, expect, it } from 'vitest';
import { flushMicrotasks, ManualClock } from '../infra/kernel/clock.ts';
import { type Batcher, type BatcherOptions, createBatcher, type FlushEvent } from './batcher.ts';

interface Item {
  id: number;
  rows: number;
  bad?: boolean;
}

interface Call {
  ids: number[];
  rows: number;
  resolve(results: string[]): void;
  reject(err: unknown): void;
}

const result = (item: Item) => `r${item.id}`;

/**
 * A batcher on a ManualClock with every run() call recorded. `manual: true` leaves each run()
 * pending until the test settles it through `calls`; otherwise run() answers at once and
 * throws when the batch holds a bad item.
 */
function setup(options: Partial<BatcherOptions<Item, string>> & { manual?: boolean } = {}) {
  const clock = new ManualClock(1000);
  const calls: Call[] = [];
  const flushes: FlushEvent[] = [];
  const { manual = false, ...overrides } = options;
  const batcher = createBatcher<Item, string>({
    maxRows: 8,
    maxWaitMs: 10,
    clock,
    rowsOf: (item) => item.rows,
    run: (items, rows) =>
      new Promise<string[]>((resolve, reject) => {
        calls.push({ ids: items.map((i) => i.id), rows, resolve, reject });
        if (manual) return;
        const bad = items.filter((i) => i.bad);
        if (bad.length > 0) reject(new Error(`bad ${bad.map((i) => i.id).join(',')}`));
        else resolve(items.map(result));
      }),
    onFlush: (e) => flushes.push(e),
    ...overrides,
  });
  return { clock, calls, flushes, batcher };
}

/**
 * Makes the batcher believe traffic is heavy: one oversize item (it runs alone, 'full') adds
 * 400 rows to the arrival average, 0.4 rows/ms over a 1000 ms window, so a new batch waits
 * clamp(8 / 0.4, 0, 10) = 10 ms. Tests that use it pass rateWindowMs: 1000.
 */
async function prime(batcher: Batcher<Item, string>): Promise<void> {
  await expect(batcher.submit({ id: -1, rows: 400 })).resolves.toBe('r-1');
  expect(batcher.waitMs).toBe(10);
}

/** Settled state of promises, without waiting for them. */
function track<T>(promises: Promise<T>[]) {
  const states: Array<'pending' | 'resolved' | 'rejected'> = promises.map(() => 'pending');
  promises.forEach((p, i) => {
    p.then(
      () => {
        states[i] = 'resolved';
      },
      () => {
        states[i] = 'rejected';
      },
    );
  });
  return states;
}

const items = (n: number, from = 0, rows = 1): Item[] => Array.from({ length: n }, (_, i) => ({ id: from + i, rows }));

describe('createBatcher', () => {
  it('flushes as soon as pending rows reach maxRows', async () => {
    const { batcher, calls, flushes, clock } = setup({ rateWindowMs: 1000 });
    await prime(batcher);
    const a = batcher.submit({ id: 1, rows: 3 });
    const b = batcher.submit({ id: 2, rows: 3 });
    await flushMicrotasks();
    expect(calls).toHaveLength(1); // only the priming item so far: 6 rows wait for company
    const c = batcher.submit({ id: 3, rows: 2 });
    expect(await Promise.all([a, b, c])).toEqual(['r1', 'r2', 'r3']);
    expect(calls[1]).toMatchObject({ ids: [1, 2, 3], rows: 8 });
    expect(flushes.at(-1)).toEqual({ items: 3, rows: 8, reason: 'full', waitedMs: 0 });
    expect(clock.pending).toBe(0); // the timer was cancelled
  });

  it('never packs past maxRows; an oversize item runs alone', async () => {
    const { batcher, calls } = setup({ rateWindowMs: 1000 });
    await prime(batcher);
    const all = [
      batcher.submit({ id: 1, rows: 3 }),
      batcher.submit({ id: 2, rows: 20 }),
      batcher.submit({ id: 3, rows: 6 }),
      batcher.submit({ id: 4, rows: 2 }),
    ];
    await batcher.drain();
    expect(await Promise.all(all)).toEqual(['r1', 'r2', 'r3', 'r4']);
    expect(calls.slice(1).map((c) => [c.ids, c.rows])).toEqual([
      [[1], 3],
      [[2], 20],
      [[3, 4], 8],
    ]);
  });

  it('flushes on the timer after the adaptive wait', async () => {
    const { batcher, calls, flushes, clock } = setup({ rateWindowMs: 1000 });
    await prime(batcher);
    const a = batcher.submit({ id: 1, rows: 1 });
    await clock.advance(4);
    const b = batcher.submit({ id: 2, rows: 2 });
    await clock.advance(5);
    expect(calls).toHaveLength(1);
    await clock.advance(1);
    expect(await Promise.all([a, b])).toEqual(['r1', 'r2']);
    expect(calls[1]).toMatchObject({ ids: [1, 2], rows: 3 });
    expect(flushes.at(-1)).toEqual({ items: 2, rows: 3, reason: 'timer', waitedMs: 10 });
  });

  it('does not wait at all under light traffic', async () => {
    const { batcher, calls, flushes, clock } = setup();
    for (const item of items(5)) {
      const p = batcher.submit(item);
      expect(clock.pending).toBe(0); // no timer armed
      await expect(p).resolves.toBe(result(item));
      await clock.advance(100);
    }
    expect(calls.map((c) => c.ids)).toEqual([[0], [1], [2], [3], [4]]);
    expect(flushes.every((f) => f.reason === 'idle' && f.waitedMs === 0)).toBe(true);
    expect(batcher.waitMs).toBe(0);
  });

  it('grows the wait under steady heavy arrivals and shrinks it back when they stop', async () => {
    const { batcher, flushes, clock } = setup({ maxRows: 64, maxWaitMs: 10, rateWindowMs: 100 });
    const waits: number[] = [];
    const all: Promise<string>[] = [];
    for (const item of items(300)) {
      waits.push(batcher.waitMs);
      all.push(batcher.submit(item));
      await clock.advance(1); // one row per ms
    }
    await batcher.drain();
    await Promise.all(all);
    expect(waits[0]).toBe(0);
    expect(Math.max(...waits)).toBe(10);
    expect(waits.every((w) => w >= 0 && w <= 10)).toBe(true);
    // Early batches go alone at once; once the rate is known they wait and grow.
    expect(flushes[0]).toMatchObject({ reason: 'idle', items: 1 });
    const late = flushes.slice(-10, -1);
    expect(late.every((f) => f.reason === 'timer' && f.waitedMs === 10 && f.items >= 10)).toBe(true);

    await clock.advance(2000); // quiet
    expect(batcher.waitMs).toBe(0);
    await expect(batcher.submit({ id: 999, rows: 1 })).resolves.toBe('r999');
    expect(flushes.at(-1)).toMatchObject({ reason: 'idle', items: 1, waitedMs: 0 });
  });

  it('accumulates while every run slot is busy and flushes the moment one frees', async () => {
    const { batcher, calls, flushes, clock } = setup({ manual: true, maxInFlight: 2 });
    const all = items(5).map((item) => batcher.submit(item));
    await flushMicrotasks();
    expect(calls.map((c) => c.ids)).toEqual([[0], [1]]); // two idle flushes fill both slots
    expect(batcher.inFlight).toBe(2);
    expect(batcher.pendingRows).toBe(3);
    await clock.advance(1000);
    expect(clock.pending).toBe(0); // no timer while saturated
    expect(calls).toHaveLength(2);

    calls[1]!.resolve(['r1']);
    await flushMicrotasks();
    expect(calls[2]?.ids).toEqual([2, 3, 4]);
    expect(flushes.at(-1)).toMatchObject({ reason: 'slot', items: 3, waitedMs: 1000 });
    calls[0]!.resolve(['r0']);
    calls[2]!.resolve(['r2', 'r3', 'r4']);
    expect(await Promise.all(all)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4']);
    expect(batcher.inFlight).toBe(0);
  });

  it('holds submissions back in order while full, then releases them', async () => {
    const { batcher, calls } = setup({ manual: true, maxRows: 2, maxPendingRows: 4 });
    const all = items(7).map((item) => batcher.submit(item));
    const states = track(all);
    await flushMicrotasks();
    expect(calls.map((c) => c.ids)).toEqual([[0]]);
    expect(batcher.pendingRows).toBe(4); // 1..4 admitted; 5 and 6 held back
    expect(batcher.full).toBe(true);

    calls[0]!.resolve(['r0']);
    await flushMicrotasks();
    expect(calls[1]?.ids).toEqual([1, 2]);
    expect(batcher.pendingRows).toBe(4); // 5 and 6 admitted behind 3 and 4
    expect(batcher.full).toBe(true);
    expect(states).toEqual(['resolved', ...Array(6).fill('pending')]);

    calls[1]!.resolve(['r1', 'r2']);
    await flushMicrotasks();
    expect(batcher.full).toBe(false);
    calls[2]!.resolve(['r3', 'r4']);
    await flushMicrotasks();
    calls[3]!.resolve(['r5', 'r6']);
    expect(await Promise.all(all)).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5', 'r6']);
    expect(calls.map((c) => c.ids)).toEqual([[0], [1, 2], [3, 4], [5, 6]]);
    expect(batcher.full).toBe(false);
  });

  it('bisects a failing batch so exactly the bad items reject', async () => {
    const { batcher, calls } = setup({ rateWindowMs: 1000 });
    await prime(batcher);
    const batch = items(8).map((item) => ({ ...item, bad: item.id === 2 || item.id === 5 }));
    const settled = await Promise.allSettled(batch.map((item) => batcher.submit(item)));
    settled.forEach((s, i) => {
      if (i === 2 || i === 5) expect(s).toEqual({ status: 'rejected', reason: new Error(`bad ${i}`) });
      else expect(s).toEqual({ status: 'fulfilled', value: `r${i}` });
    });
    const bisection = calls.slice(1);
    expect(bisection[0]?.ids).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    // k bad items among n cost at most 1 + 2·k·log2(n) runs.
    expect(bisection.length).toBeLessThanOrEqual(1 + 2 * 2 * Math.log2(8));
    await flushMicrotasks(); // the slot frees just after the last item settles
    expect(batcher.inFlight).toBe(0);
  });

  it('rejects the item of a failing single-item batch with its error', async () => {
    const { batcher, calls } = setup();
    await expect(batcher.submit({ id: 7, rows: 1, bad: true })).rejects.toThrow('bad 7');
    expect(calls).toHaveLength(1);
    await expect(batcher.submit({ id: 8, rows: 1 })).resolves.toBe('r8');
  });

  it('rejects the whole batch when run() returns the wrong number of results', async () => {
    const { batcher } = setup({ rateWindowMs: 1000, run: async (batch) => batch.slice(1).map(result) });
    await expect(batcher.submit({ id: -1, rows: 400 })).rejects.toThrow('returned 0 results for 1 items');
    const both = [batcher.submit({ id: 1, rows: 1 }), batcher.submit({ id: 2, rows: 1 })];
    await batcher.drain();
    for (const p of both) await expect(p).rejects.toThrow('batcher: run() returned 1 results for 2 items');
  });

  it('drain flushes at once and resolves when everything submitted has settled', async () => {
    const { batcher, calls, flushes, clock } = setup({ rateWindowMs: 1000, manual: true });
    const primed = batcher.submit({ id: -1, rows: 400 });
    await flushMicrotasks();
    calls[0]!.resolve(['r-1']);
    await primed;
    await flushMicrotasks(); // let the slot free, else the next items would go at once ('slot')
    const all = items(3).map((item) => batcher.submit(item));
    await flushMicrotasks();
    expect(calls).toHaveLength(1); // waiting for company
    let drained = false;
    const drain = batcher.drain().then(() => (drained = true));
    await flushMicrotasks();
    expect(flushes.at(-1)).toMatchObject({ reason: 'drain', items: 3, waitedMs: 0 });
    expect(drained).toBe(false); // the run is still in flight
    calls[1]!.resolve(['r0', 'r1', 'r2']);
    await drain;
    expect(await Promise.all(all)).toEqual(['r0', 'r1', 'r2']);
    expect(clock.pending).toBe(0);
    await batcher.drain(); // nothing left: resolves at once
  });

  it('close drains, then rejects later submissions; closing twice is safe', async () => {
    const { batcher, calls } = setup({ manual: true });
    const before = batcher.submit({ id: 1, rows: 1 });
    await flushMicrotasks();
    const first = batcher.close();
    const second = batcher.close();
    expect(second).toBe(first);
    await expect(batcher.submit({ id: 2, rows: 1 })).rejects.toThrow('batcher is closed');
    calls[0]!.resolve(['r1']);
    await first;
    await expect(before).resolves.toBe('r1');
    await expect(batcher.close()).resolves.toBeUndefined();
    expect(calls).toHaveLength(1);
  });

  it('survives the clock going backwards: no negative wait, no NaN rate', async () => {
    const { batcher, flushes, clock } = setup({ rateWindowMs: 1000 });
    await prime(batcher);
    const a = batcher.submit({ id: 1, rows: 1 }); // admitted at 1000
    clock.set(-1_000_000);
    // Going back counts as no time passing: the rate neither decays nor blows up.
    expect(batcher.waitMs).toBe(10);
    const b = batcher.submit({ id: 2, rows: 1 });
    await batcher.drain();
    expect(await Promise.all([a, b])).toEqual(['r1', 'r2']);
    expect(flushes.at(-1)).toEqual({ items: 2, rows: 2, reason: 'drain', waitedMs: 0 });

    // A batch opened after the jump waits its normal time, measured on the new clock.
    const c = batcher.submit({ id: 3, rows: 1 });
    expect(Number.isFinite(batcher.waitMs)).toBe(true);
    await clock.advance(batcher.waitMs);
    await expect(c).resolves.toBe('r3');
    expect(flushes.at(-1)?.reason).toBe('timer');
    expect(flushes.every((f) => Number.isFinite(f.waitedMs) && f.waitedMs >= 0)).toBe(true);
  });

  it('ignores an onFlush that throws', async () => {
    const { batcher } = setup({
      onFlush: () => {
        throw new Error('observer bug');
      },
    });
    await expect(batcher.submit({ id: 1, rows: 1 })).resolves.toBe('r1');
  });

  it('rejects items whose row count is not a positive integer, and bad options', async () => {
    const { batcher } = setup();
    await expect(batcher.submit({ id: 1, rows: 0 })).rejects.toThrow(RangeError);
    await expect(batcher.submit({ id: 2, rows: 1.5 })).rejects.toThrow(RangeError);
    expect(() => setup({ maxRows: 0 })).toThrow('maxRows');
    expect(() => setup({ maxPendingRows: 4 })).toThrow('maxPendingRows');
    expect(() => setup({ minWaitMs: 20 })).toThrow('minWaitMs');
  });
});
