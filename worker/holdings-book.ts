/**
 * What a pool worker was told to hold (infra/fleet/pool-holdings.ts) against what became of it:
 * the latest holdings message, and the listed models that are not resident and why (evicted for
 * room, no room, a failed load). Pure, on an injected clock: pool-worker.ts asks it what to load
 * next and reports back, and its heartbeat shows what it keeps.
 *
 * The rules it keeps (the protocol's worker side):
 * - a message older than the one held (lower rev) is ignored; the same rev is a repeat;
 * - a model evicted for room stays out while it is listed, until a newer message's askLoad names
 *   it (which also forgets a failure, so it is tried at once);
 * - a model no longer listed is forgotten (evicted, no-room, failed alike);
 * - the next load: the askLoad's model first, then in listed order; never one resident, tried
 *   this round, evicted, or failed less than `retryAfterMs` ago (a clock gone backwards counts
 *   as long ago: the load is tried rather than held back forever).
 */
import { type HoldingsMessage, type ModelRef, refKey } from '../infra/fleet/pool-holdings.ts';
import type { PoolModelView } from '../infra/fleet/worker-states.ts';
import type { Clock } from '../infra/kernel/clock.ts';

export class HoldingsBook {
  private message?: HoldingsMessage;
  private readonly evicted = new Map<string, { ref: ModelRef; rev: number }>();
  private readonly noRoom = new Map<string, { ref: ModelRef; reason: string }>();
  private readonly failures = new Map<string, { ref: ModelRef; at: number; error: string }>();

  constructor(
    private readonly clock: Pick<Clock, 'now'>,
    private readonly retryAfterMs: number,
  ) {}

  get desired(): HoldingsMessage | undefined {
    return this.message;
  }

  get rev(): number {
    return this.message?.rev ?? 0;
  }

  /** Takes a message read from Redis; false when it is older than the one held. */
  accept(message: HoldingsMessage): boolean {
    if (this.message && message.rev < this.message.rev) return false;
    const ask = message.loadNow;
    if (ask && message.rev !== this.message?.rev) {
      const key = refKey(ask);
      const evicted = this.evicted.get(key);
      if (evicted && evicted.rev < message.rev) this.evicted.delete(key);
      this.failures.delete(key);
    }
    this.message = message;
    this.forgetUnlisted();
    return true;
  }

  isWanted(key: string): boolean {
    return this.message?.models.some((r) => refKey(r) === key) ?? false;
  }

  /** The listed models, by key. */
  wanted(): Set<string> {
    return new Set((this.message?.models ?? []).map(refKey));
  }

  /** The next model to load (see the header), given which are resident and which were tried this round. */
  nextLoad(resident: (key: string) => boolean, tried: ReadonlySet<string>): ModelRef | undefined {
    const message = this.message;
    if (!message) return undefined;
    const wanted = this.wanted();
    const now = this.clock.now();
    const order = message.loadNow ? [message.loadNow, ...message.models] : message.models;
    return order.find((ref) => {
      const key = refKey(ref);
      const failed = this.failures.get(key);
      const waiting = failed !== undefined && now - failed.at >= 0 && now - failed.at < this.retryAfterMs;
      return wanted.has(key) && !resident(key) && !tried.has(key) && !this.evicted.has(key) && !waiting;
    });
  }

  /** Evicted to make room, at the current rev: out until asked again. */
  evictedForRoom(ref: ModelRef): void {
    this.evicted.set(refKey(ref), { ref, rev: this.rev });
  }

  /** True the first time in a row a model has no room (the caller counts and logs it once). */
  hadNoRoom(ref: ModelRef, reason: string): boolean {
    const first = !this.noRoom.has(refKey(ref));
    this.noRoom.set(refKey(ref), { ref, reason });
    return first;
  }

  loadFailed(ref: ModelRef, error: string): void {
    this.failures.set(refKey(ref), { ref, at: this.clock.now(), error });
  }

  /** It had room (a load starts) or it loaded: nothing to report about it any more. */
  cleared(key: string, what: 'no-room' | 'failure'): void {
    (what === 'no-room' ? this.noRoom : this.failures).delete(key);
  }

  /** The listed models that are not resident, and why, for the heartbeat's `models`. */
  absentViews(): PoolModelView[] {
    const view = (ref: ModelRef, state: PoolModelView['state'], error?: string): PoolModelView => ({
      ...ref,
      state,
      residentBytes: 0,
      lastUsedAt: 0,
      jobsInFlight: 0,
      ...(error ? { error } : {}),
    });
    return [
      ...[...this.evicted.values()].map((e) => view(e.ref, 'evicted')),
      ...[...this.noRoom.values()].map((e) => view(e.ref, 'no-room', e.reason)),
      ...[...this.failures.values()].map((e) => view(e.ref, 'failed', e.error)),
    ];
  }

  private forgetUnlisted(): void {
    const wanted = this.wanted();
    for (const book of [this.evicted, this.noRoom, this.failures]) {
      for (const key of book.keys()) if (!wanted.has(key)) book.delete(key);
    }
  }
}
