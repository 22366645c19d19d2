/**
 * Micro-batcher: packs many small submissions into few `run()` calls. Generic: it knows rows
 * and items, nothing of ONNX or queues.
 *
 * Contract
 * - `submit(item)` resolves with `run()`'s result for that item, or rejects with its error.
 * - Items are packed in arrival order; a batch holds at most `maxRows` rows, except that an
 *   item larger than `maxRows` on its own runs alone (callers should slice big jobs first).
 * - At most `maxInFlight` run() calls at once. While every slot is busy, items accumulate and
 *   the next batch goes the moment a slot frees ('slot'): continuous batching, no timer.
 * - A batch goes when, with a slot free:
 *     'full'  — pending rows reach `maxRows`;
 *     'idle'  — the adaptive wait (below) is 0: traffic is light, waiting only adds latency;
 *     'timer' — the adaptive wait, counted from when the oldest pending item was admitted,
 *               has passed;
 *     'drain' — drain() or close() is waiting.
 * - Adaptive wait. `rate` is an exponentially weighted moving average of arrivals in rows/ms
 *   over the clock (time constant `rateWindowMs`), counting arrivals before the one being
 *   decided on, so a lone job after a quiet spell never waits. Then
 *     rate × maxWaitMs < 2            → wait 0 (fewer than two more rows expected: don't wait)
 *     otherwise                       → wait = clamp((maxRows − pendingRows) / rate,
 *                                                    minWaitMs, maxWaitMs)
 *   i.e. wait about as long as the batch is expected to take to fill, never past maxWaitMs.
 *   As traffic picks up the wait grows from 0 toward maxWaitMs; under traffic heavy enough to
 *   fill batches, they go 'full' before the timer; when traffic fades the rate decays and the
 *   wait shrinks back to 0. minWaitMs bounds the wait only when the batcher waits at all.
 * - Backpressure: while pending rows ≥ `maxPendingRows` (`full` is true), submit() still
 *   returns at once, but its item is held back, in order, until rows leave for a run. Await
 *   the promise, or check `full`, to stop pulling more work.
 * - Failure isolation: when run() rejects for a batch of several items, the batch is split in
 *   halves and each half run again, recursively, so only the items that fail alone reject
 *   (with their own error) and the rest resolve: about 2·k·log2(n) extra runs for k bad items.
 *   A result array of the wrong length rejects the whole batch (a bug in run(), not in items).
 * - drain() resolves once everything submitted before it has settled, flushing at once
 *   instead of waiting. close() sets the batcher closed (later submit() calls reject), then
 *   drains; calling it again returns the same promise.
 * - The clock may go backwards: elapsed times are clamped to ≥ 0 and the rate never decays by
 *   a negative interval, so waits are never negative and the rate never NaN.
 * - onFlush is observed, never trusted: an exception from it is swallowed.
 */
import type { Clock } from '../infra/kernel/clock.ts';
import { once } from '../infra/kernel/lifecycle.ts';

export type FlushReason = 'full' | 'timer' | 'idle' | 'slot' | 'drain';

export interface FlushEvent {
  items: number;
  rows: number;
  reason: FlushReason;
  /** How long the batch's oldest item waited in the batcher (≥ 0). */
  waitedMs: number;
}

export interface BatcherOptions<I, O> {
  /** Flush when pending rows reach this. */
  maxRows: number;
  /** Upper bound on how long the first pending item waits for company. */
  maxWaitMs: number;
  /** Lower bound of the adaptive wait when the batcher waits at all (default 0). */
  minWaitMs?: number;
  /** Rows an item carries (an integer ≥ 1). */
  rowsOf(item: I): number;
  /** One forward pass; result i belongs to items[i]. */
  run(items: I[], rows: number): Promise<O[]>;
  clock: Clock;
  /** Concurrent run() calls (default 1). */
  maxInFlight?: number;
  /** Backpressure bound, ≥ maxRows (default 4 × maxRows). */
  maxPendingRows?: number;
  /** Time constant of the arrival-rate average (default max(100, 20 × maxWaitMs)). */
  rateWindowMs?: number;
  onFlush?: (e: FlushEvent) => void;
}

export interface Batcher<I, O> {
  submit(item: I): Promise<O>;
  /** Rows admitted and waiting for a run (not counting those held back by backpressure). */
  readonly pendingRows: number;
  /** run() calls in progress (bisection retries share their batch's slot). */
  readonly inFlight: number;
  /** True while submit() holds new items back. */
  readonly full: boolean;
  /** The adaptive wait a batch opened now would get, in ms. */
  readonly waitMs: number;
  drain(): Promise<void>;
  close(): Promise<void>;
}

export function createBatcher<I, O>(options: BatcherOptions<I, O>): Batcher<I, O> {
  return new MicroBatcher(options);
}

interface Entry<I, O> {
  item: I;
  rows: number;
  admittedAt: number;
  resolve(result: O): void;
  reject(err: unknown): void;
}

class MicroBatcher<I, O> implements Batcher<I, O> {
  private readonly pending: Entry<I, O>[] = [];
  private readonly heldBack: Entry<I, O>[] = [];
  /** One promise per unsettled submission, for drain(); never rejects. */
  private readonly unsettled = new Set<Promise<void>>();
  private readonly clock: Clock;
  private readonly rate: ArrivalRate;
  private readonly minWaitMs: number;
  private readonly maxInFlight: number;
  private readonly maxPendingRows: number;
  private rowsPending = 0;
  private running = 0;
  private drainers = 0;
  private closed = false;
  private timer: AbortController | undefined;

  constructor(private readonly options: BatcherOptions<I, O>) {
    const { maxRows, maxWaitMs } = options;
    this.clock = options.clock;
    this.minWaitMs = options.minWaitMs ?? 0;
    this.maxInFlight = options.maxInFlight ?? 1;
    this.maxPendingRows = options.maxPendingRows ?? 4 * maxRows;
    const rateWindowMs = options.rateWindowMs ?? Math.max(100, 20 * maxWaitMs);
    check(Number.isInteger(maxRows) && maxRows >= 1, 'maxRows must be an integer ≥ 1');
    check(Number.isFinite(maxWaitMs) && maxWaitMs >= 0, 'maxWaitMs must be finite and ≥ 0');
    check(this.minWaitMs >= 0 && this.minWaitMs <= maxWaitMs, 'minWaitMs must be in [0, maxWaitMs]');
    check(Number.isInteger(this.maxInFlight) && this.maxInFlight >= 1, 'maxInFlight must be an integer ≥ 1');
    check(this.maxPendingRows >= maxRows, 'maxPendingRows must be ≥ maxRows');
    check(Number.isFinite(rateWindowMs) && rateWindowMs > 0, 'rateWindowMs must be finite and > 0');
    this.rate = new ArrivalRate(rateWindowMs);
  }

  get pendingRows(): number {
    return this.rowsPending;
  }

  get inFlight(): number {
    return this.running;
  }

  get full(): boolean {
    return this.heldBack.length > 0 || this.rowsPending >= this.maxPendingRows;
  }

  get waitMs(): number {
    return this.adaptiveWait();
  }

  submit(item: I): Promise<O> {
    if (this.closed) return Promise.reject(new Error('batcher is closed: submit() after close()'));
    let rows: number;
    try {
      rows = this.options.rowsOf(item);
    } catch (err) {
      return Promise.reject(err);
    }
    if (!Number.isInteger(rows) || rows < 1) {
      return Promise.reject(new RangeError(`batcher: rowsOf(item) must be an integer ≥ 1, got ${rows}`));
    }
    const now = this.clock.now();
    const promise = new Promise<O>((resolve, reject) => {
      const entry = this.track({ item, rows, admittedAt: now, resolve, reject });
      if (this.full) this.heldBack.push(entry);
      else this.admit(entry, now);
    });
    this.pump();
    // Recorded after the decision above: the rate describes traffic *around* this item.
    this.rate.record(now, rows);
    return promise;
  }

  drain(): Promise<void> {
    const snapshot = [...this.unsettled];
    this.drainers++;
    this.pump();
    return Promise.all(snapshot).then(() => {
      this.drainers--;
    });
  }

  close(): Promise<void> {
    return this.closeOnce();
  }

  private readonly closeOnce = once(async () => {
    this.closed = true;
    await this.drain();
  });

  /** Wraps an entry so that settling it also retires it from `unsettled`. */
  private track(entry: Entry<I, O>): Entry<I, O> {
    let settle!: () => void;
    const settled = new Promise<void>((resolve) => (settle = resolve));
    this.unsettled.add(settled);
    const done = () => {
      this.unsettled.delete(settled);
      settle();
    };
    return {
      ...entry,
      resolve: (result) => {
        done();
        entry.resolve(result);
      },
      reject: (err) => {
        done();
        entry.reject(err);
      },
    };
  }

  private admit(entry: Entry<I, O>, now: number): void {
    entry.admittedAt = now;
    this.pending.push(entry);
    this.rowsPending += entry.rows;
  }

  /** Starts every batch that is due while a slot is free; otherwise arms the timer. */
  private pump(trigger?: 'timer' | 'slot'): void {
    while (this.pending.length > 0 && this.running < this.maxInFlight) {
      const reason = this.dueReason(trigger);
      if (!reason) {
        this.armTimer();
        return;
      }
      this.flush(reason);
      trigger = undefined; // leftovers are judged on their own
    }
    // Nothing pending, or every slot busy: a slot freeing up will call pump('slot').
    this.cancelTimer();
  }

  private dueReason(trigger?: 'timer' | 'slot'): FlushReason | undefined {
    if (this.drainers > 0) return 'drain';
    if (this.rowsPending >= this.options.maxRows) return 'full';
    if (trigger) return trigger;
    const wait = this.adaptiveWait();
    if (wait === 0) return 'idle';
    // Already waited long enough (say, leftovers of an earlier batch): no zero-length timer.
    const oldest = this.pending[0];
    if (oldest && this.clock.now() - oldest.admittedAt >= wait) return 'timer';
    return undefined;
  }

  private adaptiveWait(): number {
    const { maxRows, maxWaitMs } = this.options;
    const rowsPerMs = this.rate.rowsPerMs(this.clock.now());
    if (rowsPerMs * maxWaitMs < 2) return 0;
    const fillMs = Math.max(0, maxRows - this.rowsPending) / rowsPerMs;
    return Math.min(maxWaitMs, Math.max(this.minWaitMs, fillMs));
  }

  private armTimer(): void {
    if (this.timer) return;
    const oldest = this.pending[0];
    if (!oldest) return;
    const wait = this.adaptiveWait();
    // Clamped both ways: a clock that went backwards must not stretch or negate the wait.
    const elapsed = Math.min(wait, Math.max(0, this.clock.now() - oldest.admittedAt));
    const timer = new AbortController();
    this.timer = timer;
    this.clock.sleep(wait - elapsed, timer.signal).then(
      () => {
        if (this.timer !== timer) return;
        this.timer = undefined;
        this.pump('timer');
      },
      () => {}, // cancelled: the batch went another way
    );
  }

  private cancelTimer(): void {
    this.timer?.abort();
    this.timer = undefined;
  }

  private flush(reason: FlushReason): void {
    this.cancelTimer();
    const batch = this.takeBatch();
    const rows = sumRows(batch);
    const now = this.clock.now();
    const waitedMs = Math.max(0, now - (batch[0]?.admittedAt ?? now));
    this.admitHeldBack(now);
    this.running++;
    try {
      this.options.onFlush?.({ items: batch.length, rows, reason, waitedMs });
    } catch {
      // An observer's bug must not stall inference.
    }
    const settled = () => this.onRunSettled();
    this.runIsolated(batch).then(settled, settled);
  }

  /** The longest prefix of pending within maxRows; at least one item. */
  private takeBatch(): Entry<I, O>[] {
    let rows = 0;
    let count = 0;
    for (const entry of this.pending) {
      if (count > 0 && rows + entry.rows > this.options.maxRows) break;
      rows += entry.rows;
      count++;
    }
    this.rowsPending -= rows;
    return this.pending.splice(0, count);
  }

  private admitHeldBack(now: number): void {
    while (this.heldBack.length > 0 && this.rowsPending < this.maxPendingRows) {
      const next = this.heldBack.shift();
      if (next) this.admit(next, now);
    }
  }

  private onRunSettled(): void {
    const wasSaturated = this.running >= this.maxInFlight;
    this.running--;
    // Items pending now arrived while every slot was busy (or were left over from a full
    // batch): they have been accumulating, so go now rather than start a wait.
    this.pump(wasSaturated ? 'slot' : undefined);
  }

  /** Runs a batch; on failure bisects so only the items that fail on their own reject. */
  private async runIsolated(entries: Entry<I, O>[]): Promise<void> {
    let results: O[];
    try {
      results = await this.options.run(
        entries.map((e) => e.item),
        sumRows(entries),
      );
    } catch (err) {
      const [only] = entries;
      if (entries.length === 1 && only) {
        only.reject(err);
        return;
      }
      const half = Math.ceil(entries.length / 2);
      await this.runIsolated(entries.slice(0, half));
      await this.runIsolated(entries.slice(half));
      return;
    }
    if (!Array.isArray(results) || results.length !== entries.length) {
      const got = Array.isArray(results) ? `${results.length} results` : `a ${typeof results}`;
      const err = new Error(`batcher: run() returned ${got} for ${entries.length} items`);
      for (const entry of entries) entry.reject(err);
      return;
    }
    entries.forEach((entry, i) => {
      entry.resolve(results[i] as O);
    });
  }
}

/**
 * Arrival rate as an exponentially weighted moving average in continuous time: each arrival
 * adds its rows to a mass that decays by e^(−Δt/window); mass / window is the rate. Steady
 * arrivals of r rows every g ms converge to about r/g. Bursts (Δt = 0) need no special case.
 */
class ArrivalRate {
  private mass = 0;
  private at: number | undefined;

  constructor(private readonly windowMs: number) {}

  record(now: number, rows: number): void {
    this.mass = this.massAt(now) + rows;
    this.at = now;
  }

  rowsPerMs(now: number): number {
    return this.massAt(now) / this.windowMs;
  }

  private massAt(now: number): number {
    if (this.at === undefined) return 0;
    // A clock that went backwards counts as no time passing, never as negative decay.
    const elapsed = Math.max(0, now - this.at);
    return this.mass * Math.exp(-elapsed / this.windowMs);
  }
}

function sumRows(entries: Entry<unknown, unknown>[]): number {
  return entries.reduce((sum, e) => sum + e.rows, 0);
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new RangeError(`batcher: ${message}`);
}
