/**
 * A worker's life: the part the single-model worker (worker/worker-process.ts) and a shared pool's
 * (worker/pool-worker.ts) have in common. Its state and when it entered it, the heartbeat that
 * reports them with the rows it served per second, and the two promises its entry (worker/main.ts)
 * waits on. Which states a worker passes through, and what each means, is the worker's own (its
 * header); which moves are allowed is the contract's table (infra/contracts/worker-state.ts).
 *
 *   start(boot)  the heartbeat starts, then the worker's own start-up; if that throws, `failed`
 *                with its message, a beat that says so, and the error rethrown (the entry exits 1),
 *                unless close() has begun: a drain that cut a start-up short is no failure
 *   enter(next)  a move the table allows is taken, logged (`worker state`), told to onChange and
 *                beaten at once, so the pool view sees it before the next interval; any other move,
 *                or one to the state it is in, is ignored (so draining leaves `failed` as it is)
 *   engineDied   `failed` while serving: engineLost rejects and the entry exits 1
 *   close(steps) draining, the worker's steps in order (one that fails is logged, the rest still
 *                run), stopped, then the heartbeat's last beat. Idempotent: a second call waits on
 *                the first
 */
import { canTransition, type WorkerState } from '../infra/contracts/worker-state.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { coerceError, errorMessage } from '../infra/kernel/errors.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { workerKey } from '../infra/redis/keys.ts';
import { type Heartbeat, type HeartbeatSample, startHeartbeat } from './heartbeat.ts';

export interface WorkerLifeDeps {
  config: { queuePrefix: string; worker: Pick<Config['worker'], 'heartbeatIntervalMs' | 'heartbeatTtlMs'> };
  redis: Pick<RedisClient, 'set'>;
  clock: Clock;
  log: Log;
}

/** What the life puts in every beat: the worker's sample places these among its own fields. */
export interface LifeFields {
  state: WorkerState;
  startedAt: number;
  /** When the worker entered `state` (launching → standby is its cold start). */
  stateSince: number;
  /** Rows counted since the last beat, per second of the time since it. */
  rowsPerS: number;
}

export interface WorkerLifeOptions {
  /** The worker's id: its heartbeat's key. */
  id: string;
  /** The worker's own fields of a beat, around the life's; `error` is the life's and comes last. */
  sample: (life: LifeFields) => Omit<HeartbeatSample, 'error'>;
  /** The worker's extra work on each beat (re-reads, metrics snapshots); failures are logged. */
  onBeat: () => Promise<void>;
  /** After every change of state: the worker's `worker:state` event. */
  onChange: (state: WorkerState, previous: WorkerState) => void;
}

/** One step of close(): a name for the log, and what it does. */
export type DrainStep = [name: string, step: () => Promise<unknown>];

export class WorkerLife {
  readonly startedAt: number;
  /** In every beat while set: why the worker failed, or what its start-up is retrying. */
  error?: string;
  private current: WorkerState = 'launching';
  private stateSince: number;
  private rowsSinceBeat = 0;
  private lastBeatAt: number;
  private heartbeat?: Heartbeat;
  private closing?: Promise<void>;
  private askDrain?: () => void;
  private lose?: (err: Error) => void;
  /** Resolves when the control channel says `drain`; whoever runs the worker then calls close(). */
  readonly drainRequested = new Promise<void>((resolve) => {
    this.askDrain = resolve;
  });
  /**
   * Rejects when the engine dies while serving: the worker cannot serve any more and its entry
   * exits non-zero, so whoever launched it starts a fresh one.
   */
  readonly engineLost = new Promise<never>((_, reject) => {
    this.lose = reject;
  });

  constructor(
    private readonly deps: WorkerLifeDeps,
    private readonly options: WorkerLifeOptions,
  ) {
    this.startedAt = deps.clock.now();
    this.stateSince = this.startedAt;
    this.lastBeatAt = this.startedAt;
    // Whoever runs the worker races this against shutdown; unobserved, it must not crash.
    this.engineLost.catch(() => undefined);
  }

  get state(): WorkerState {
    return this.current;
  }

  /** Starts the heartbeat, then runs `boot`, the worker's start-up (see the header for a failure). */
  async start(boot: () => Promise<void>): Promise<void> {
    const { config, redis, clock, log } = this.deps;
    const heartbeat = startHeartbeat({
      redis,
      key: workerKey(config.queuePrefix, this.options.id),
      intervalMs: config.worker.heartbeatIntervalMs,
      ttlMs: config.worker.heartbeatTtlMs,
      clock,
      sample: () => this.sample(),
      onBeat: () => this.options.onBeat(),
      onError: (err) => log.warn({ err }, 'heartbeat failed'),
    });
    this.heartbeat = heartbeat;
    try {
      await boot();
    } catch (err) {
      // A drain that interrupted the start-up (the engine closed under a load) is not a failure.
      if (this.closing) return;
      this.fail(errorMessage(err));
      // Recorded before the error reaches the entry, which exits on it.
      await heartbeat.beat();
      throw err;
    }
  }

  enter(next: WorkerState): void {
    const previous = this.current;
    if (previous === next || !canTransition(previous, next)) return;
    this.current = next;
    this.stateSince = this.deps.clock.now();
    this.deps.log.info({ state: next, previous }, 'worker state');
    this.options.onChange(next, previous);
    void this.heartbeat?.beat();
  }

  /** A beat now, outside a change of state (e.g. `error` changed); none before start(). */
  beat(): Promise<void> {
    return this.heartbeat?.beat() ?? Promise.resolve();
  }

  /** Rows served, for the next beat's rowsPerS. */
  countRows(rows: number): void {
    this.rowsSinceBeat += rows;
  }

  requestDrain(): void {
    this.askDrain?.();
  }

  /** The engine died while serving: `failed` with `error`, and engineLost rejects with `cause`. */
  engineDied(error: string, cause: unknown): void {
    this.fail(error);
    this.lose?.(coerceError(cause));
  }

  close(steps: DrainStep[] = []): Promise<void> {
    this.closing ??= this.end(steps);
    return this.closing;
  }

  private async end(steps: DrainStep[]): Promise<void> {
    this.enter('draining');
    for (const [name, step] of steps) {
      await step().catch((err: unknown) => this.deps.log.warn({ err, step: name }, 'drain step failed'));
    }
    this.enter('stopped');
    await this.heartbeat?.close().catch(() => undefined);
  }

  private fail(error: string): void {
    this.error = error;
    this.enter('failed');
  }

  private sample(): HeartbeatSample {
    const now = this.deps.clock.now();
    const elapsedS = Math.max(0.001, (now - this.lastBeatAt) / 1000);
    const rowsPerS = this.rowsSinceBeat / elapsedS;
    this.rowsSinceBeat = 0;
    this.lastBeatAt = now;
    const life = { state: this.current, startedAt: this.startedAt, stateSince: this.stateSince, rowsPerS: Math.round(rowsPerS * 10) / 10 };
    return { ...this.options.sample(life), ...(this.error ? { error: this.error } : {}) };
  }
}
