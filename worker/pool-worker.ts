/**
 * A shared pool's worker (`warmpool worker --pool NAME`, issue 31): not bound to a model, it holds
 * zero or more at once, each a ResidentModel (worker/resident-model.ts: its own session, batcher
 * and intake on that model version's queue), all on one inference thread it starts at boot.
 *
 * Worker states (infra/contracts/worker-state.ts):
 *
 *   launching (inference thread and ONNX Runtime starting, channels subscribed)
 *     → standby (serving no model) ⇄ active (serving at least one)
 *     → draining (SIGTERM or `drain`: every model drains, the thread ends) → stopped
 *   (failed: the inference thread died; the process exits non-zero.)
 *
 * What it holds is told through Redis (infra/fleet/pool-holdings.ts, where the protocol is
 * written down); it converges on the latest holdings, read on the doorbell and every heartbeat:
 * - a model no longer listed drains out at once (any number at a time);
 * - listed models it does not hold load one at a time, an askLoad's model first. One at a time
 *   because the resident-memory measurement of a load (resident-model.ts) is only honest with no
 *   other load in the window, because the eviction choice for the next load needs the last one's
 *   measurement, and because on the small hosts this runs on two loads at once would only share
 *   the same cores (the controller's single-flight placement wants one load per model anyway);
 * - a load first makes room within the memory budget (worker/eviction.ts: LRU by measured bytes,
 *   never a model with jobs in flight, a recent one only when no older one can go); the bytes a
 *   model needs are what it measured last time here, else UNMEASURED_FACTOR × its file size until
 *   it is measured, after which anything over the budget is evicted the same way. If no room can
 *   be made the model is reported `no-room` and tried again at the next heartbeat; the budget is
 *   never exceeded on purpose.
 *
 * Its heartbeat's `busyFraction` is how much of each interval the inference thread had work: every
 * session opened on it is timed by one busy meter (worker/busy-meter.ts), batches and loads alike.
 *
 * The control channel's `drain` drains it as SIGTERM does; `activate`/`standby` are a single-model
 * worker's and are ignored here (what a pool worker serves is its holdings).
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Registry } from 'prom-client';
import type { WorkerState } from '../infra/contracts/worker-state.ts';
import { type HoldingsMessage, type ModelRef, refKey } from '../infra/fleet/pool-holdings.ts';
import type { PoolModelView } from '../infra/fleet/worker-states.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { errorMessage } from '../infra/kernel/errors.ts';
import { TypedEmitter } from '../infra/kernel/events.ts';
import type { Log } from '../infra/kernel/log.ts';
import { closeRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { metricsKey } from '../infra/redis/keys.ts';
import type { ModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { createPoolWorkerMetrics, type PoolWorkerMetrics, publishMetricsSnapshot } from '../infra/telemetry/metrics.ts';
import type { BatchEvent } from './batch-runner.ts';
import { type BusyMeter, createBusyMeter } from './busy-meter.ts';
import { type ControlListener, createControlListener } from './control.ts';
import type { ThreadHost } from './engine/thread-engine.ts';
import { overBudget, type Resident, roomFor } from './eviction.ts';
import { HoldingsBook } from './holdings-book.ts';
import { createHoldingsListener, type HoldingsListener } from './holdings-listener.ts';
import { connectionState } from './intake-supervisor.ts';
import { createModelCache, type ModelCache } from './model-cache.ts';
import { LoadInterruptedError, type LoadReport, ResidentModel } from './resident-model.ts';
import { startServing } from './serving.ts';
import { type LifeFields, WorkerLife } from './worker-life.ts';

/**
 * A model never measured here is expected to take this many times its file size until it is.
 * Measured on the MLP fixtures: 1.00–1.01× under poolWorkerEnv (infra/fleet/pool-worker-env.ts),
 * 1.3–1.8× without it (garbage and allocator slack in the window); an estimate too high only
 * evicts one model more than needed, too low is corrected by the eviction after measuring.
 */
export const UNMEASURED_FACTOR = 1.5;
/** Used within this long counts as recently used (eviction's second rank); default. */
export const DEFAULT_RECENT_MS = 3 * 60_000;
/** A failed load is tried again after this long; default. */
export const DEFAULT_RETRY_AFTER_MS = 10_000;

export interface PoolWorkerDeps {
  config: Config;
  redis: RedisClient;
  registry: Pick<ModelRegistry, 'getManifest' | 'openModel'>;
  /** The inference thread every model's session opens on; closed by close(). */
  host: ThreadHost;
  clock: Clock;
  log: Log;
  storeFor?: (bucket: string) => ObjectStore;
  /** The process's resident set now, in bytes; default process.memoryUsage.rss. */
  rss?: () => number;
  /** A full garbage collection (V8's, under --expose-gc): around loads and after evictions. None: skipped. */
  collect?: () => void;
}

export interface PoolWorkerOptions {
  pool: string;
  /** What its models' measured resident memory may add up to. */
  memoryBudgetBytes: number;
  recentMs?: number;
  retryAfterMs?: number;
}

type Ref = ModelRef;

export interface PoolWorkerEvents extends Record<string, unknown[]> {
  'worker:state': [state: WorkerState, previous: WorkerState];
  'batch:flushed': [e: BatchEvent];
  'model:loaded': [e: Ref & LoadReport];
  'model:evicted': [e: Ref & { reason: 'budget' | 'unwanted' }];
  'model:no-room': [e: Ref & { needBytes: number; reason: string }];
  'model:failed': [e: Ref & { error: string }];
}

export class PoolWorker extends TypedEmitter<PoolWorkerEvents> {
  readonly id = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  /** Its state, heartbeat and rows-per-second meter; the two promises its entry waits on. */
  private readonly life: WorkerLife;
  private readonly cache: ModelCache;
  private readonly metricsRegistry = new Registry();
  private readonly metrics: PoolWorkerMetrics;
  /** Models loading or serving, by `model@version`. */
  private readonly models = new Map<string, ResidentModel>();
  /** Models draining out: their memory counts until their sessions are released. */
  private readonly leaving = new Set<ResidentModel>();
  /** The holdings and what became of the listed models that are not resident. */
  private readonly book: HoldingsBook;
  /** Measured resident bytes by sha256: a model loaded before here is expected to need as much again. */
  private readonly measured = new Map<string, number>();
  private loadLoop?: Promise<void>;
  private convergeAgain = false;
  private ready = false;
  private control?: ControlListener;
  private holdings?: HoldingsListener;
  /** Times every call on the inference thread, for the heartbeat's busyFraction. */
  private readonly busy: BusyMeter;
  private closing?: Promise<void>;

  constructor(
    private readonly deps: PoolWorkerDeps,
    private readonly settings: PoolWorkerOptions,
  ) {
    super({ onListenerError: (err) => deps.log.warn({ err }, 'pool worker event listener threw') });
    this.life = new WorkerLife(deps, {
      id: this.id,
      sample: (life) => this.sample(life),
      onBeat: () => this.onBeat(),
      onChange: (state, previous) => this.emit('worker:state', state, previous),
    });
    this.busy = createBusyMeter(deps.clock);
    this.book = new HoldingsBook(deps.clock, settings.retryAfterMs ?? DEFAULT_RETRY_AFTER_MS);
    this.cache = createModelCache({ dir: deps.config.worker.modelCacheDir, registry: deps.registry, log: deps.log });
    this.metrics = createPoolWorkerMetrics(this.metricsRegistry, { pool: settings.pool, worker: this.id });
    deps.host.lost.catch((err: unknown) => {
      if (this.closing) return;
      this.life.engineDied(`inference thread lost: ${errorMessage(err)}`, err);
    });
  }

  get currentState(): WorkerState {
    return this.life.state;
  }

  /** Resolves when the control channel says `drain`; whoever runs the worker then calls close(). */
  get drainRequested(): Promise<void> {
    return this.life.drainRequested;
  }

  /** Rejects when the inference thread dies: every model is gone; the process exits non-zero. */
  get engineLost(): Promise<never> {
    return this.life.engineLost;
  }

  /** Heartbeat, channels, the inference thread up: then standby, and converging on the holdings. */
  async start(): Promise<void> {
    await this.life.start(async () => {
      await this.listen();
      await this.deps.host.ready();
    });
    if (this.closing) return;
    this.ready = true;
    this.life.enter('standby');
    this.converge();
  }

  private async listen(): Promise<void> {
    const { config, redis, log } = this.deps;
    const common = { redis, prefix: config.queuePrefix, workerId: this.id };
    this.control = createControlListener({
      ...common,
      subscriber: this.subscriber('control'),
      onCommand: (command) => {
        if (command === 'drain') this.life.requestDrain();
      },
      onError: (err) => log.warn({ err }, 'control read failed'),
    });
    this.holdings = createHoldingsListener({
      ...common,
      subscriber: this.subscriber('holdings'),
      onHoldings: (message) => this.onHoldings(message),
      onError: (err) => log.warn({ err }, 'holdings read failed'),
    });
    await Promise.all([this.control.start(), this.holdings.start()]);
  }

  private subscriber(name: string): RedisClient {
    const connection = duplicateClient(this.deps.redis);
    connection.on('error', (err: Error) => this.deps.log.warn({ err: err.message }, `${name} connection error`));
    return connection;
  }

  private async onBeat(): Promise<void> {
    const { config } = this.deps;
    // Every beat re-reads the holdings (a missed doorbell is caught here) and retries what had no room.
    await Promise.all([this.control?.check(), this.holdings?.check()]);
    this.converge();
    const ttlMs = config.worker.heartbeatTtlMs;
    await publishMetricsSnapshot(this.deps.redis, metricsKey(config.queuePrefix, this.id), this.metricsRegistry, ttlMs);
    for (const m of this.models.values()) await m.publishMetrics(metricsKey(config.queuePrefix, `${this.id}.${m.key}`), ttlMs);
  }

  private onHoldings(message: HoldingsMessage): void {
    const previous = this.book.rev;
    if (!this.book.accept(message)) return;
    if (message.rev !== previous) this.deps.log.info({ rev: message.rev, models: message.models.length }, 'holdings');
    this.converge();
  }

  /** Drains what is no longer listed now, and starts the load loop unless it runs (then it goes round again). */
  private converge(): void {
    if (!this.ready || this.closing || !this.book.desired) return;
    const wanted = this.book.wanted();
    for (const [key, model] of this.models) if (!wanted.has(key)) void this.letGo(model, 'unwanted');
    if (this.loadLoop) {
      this.convergeAgain = true;
      return;
    }
    this.loadLoop = this.loadPending().finally(() => {
      this.loadLoop = undefined;
      if (this.convergeAgain) {
        this.convergeAgain = false;
        this.converge();
      }
    });
  }

  private async loadPending(): Promise<void> {
    const tried = new Set<string>();
    const resident = (key: string) => this.models.has(key);
    for (let next = this.book.nextLoad(resident, tried); next && !this.closing; next = this.book.nextLoad(resident, tried)) {
      const key = refKey(next);
      tried.add(key);
      await this.loadOne(next).catch((err: unknown) => this.deps.log.warn({ err, model: key }, 'model load step failed'));
    }
  }

  private async loadOne(ref: Ref): Promise<void> {
    const { registry, clock, log } = this.deps;
    const key = refKey(ref);
    let manifest: Awaited<ReturnType<typeof registry.getManifest>>;
    try {
      manifest = await registry.getManifest(ref.model, ref.version);
    } catch (err) {
      this.failed(ref, err);
      return;
    }
    const needBytes = this.measured.get(manifest.sha256) ?? manifest.sizeBytes * UNMEASURED_FACTOR;
    const plan = roomFor({
      needBytes,
      budgetBytes: this.settings.memoryBudgetBytes,
      residents: this.residents(),
      now: clock.now(),
      recentMs: this.settings.recentMs ?? DEFAULT_RECENT_MS,
    });
    if (!plan.fits) {
      if (this.book.hadNoRoom(ref, plan.reason)) {
        this.metrics.noRoom();
        log.warn(
          { model: key, needBytes, reason: plan.reason, shortBytes: plan.shortBytes },
          'model does not fit the memory budget; not loaded',
        );
        this.emit('model:no-room', { ...ref, needBytes, reason: plan.reason });
      }
      return;
    }
    this.book.cleared(key, 'no-room');
    await Promise.all(plan.evict.map((victim) => this.evictForRoom(victim)));
    if (this.closing || !this.book.isWanted(key)) return;

    const model = new ResidentModel(
      {
        ...this.deps,
        cache: this.cache,
        session: this.busy.timed(this.deps.host.openSession()),
        startServing,
        workerId: this.id,
        onBatch: (e) => {
          this.life.countRows(e.rows);
          this.emit('batch:flushed', e);
        },
        onEngineError: (err) => log.warn({ err, model: key }, 'a forward pass failed outside ONNX Runtime'),
        onJobDone: (e) => this.metrics.jobDone(e.resident),
      },
      manifest,
    );
    this.models.set(key, model);
    let report: LoadReport;
    try {
      report = await model.load();
    } catch (err) {
      if (this.models.get(key) === model) this.models.delete(key);
      await model.drain();
      if (!(err instanceof LoadInterruptedError)) this.failed(ref, err);
      return;
    }
    this.book.cleared(key, 'failure');
    this.measured.set(manifest.sha256, report.residentBytes);
    this.metrics.loaded(report);
    this.emit('model:loaded', { ...ref, ...report });
    // Measured more than expected: back within the budget, the model just loaded last of all.
    const residents = this.residents().map((r) => (r.key === key ? { ...r, pinned: true } : r));
    const victims = overBudget(residents, this.settings.memoryBudgetBytes, clock.now(), this.settings.recentMs ?? DEFAULT_RECENT_MS);
    await Promise.all(victims.map((victim) => this.evictForRoom(victim)));
    this.updateState();
  }

  private failed(ref: Ref, err: unknown): void {
    const error = errorMessage(err);
    this.book.loadFailed(ref, error);
    this.metrics.loadFailed();
    this.deps.log.warn({ model: refKey(ref), err: error }, 'model load failed; trying again later');
    this.emit('model:failed', { ...ref, error });
  }

  /** What the budget counts: serving and loading models, and those draining out until they are gone. */
  private residents(): Resident[] {
    const of = (m: ResidentModel, pinned: boolean): Resident => ({
      key: m.key,
      residentBytes: m.residentBytes,
      lastUsedAt: m.lastUsedAt,
      jobsInFlight: m.jobsInFlight,
      pinned,
    });
    return [...[...this.models.values()].map((m) => of(m, m.state !== 'active')), ...[...this.leaving].map((m) => of(m, true))];
  }

  private evictForRoom(key: string): Promise<void> {
    const model = this.models.get(key);
    if (!model) return Promise.resolve();
    this.book.evictedForRoom(model.ref);
    return this.letGo(model, 'budget');
  }

  /** Drains a model out; its memory counts until its session is released. */
  private letGo(model: ResidentModel, reason: 'budget' | 'unwanted'): Promise<void> {
    if (this.models.get(model.key) === model) this.models.delete(model.key);
    this.leaving.add(model);
    this.metrics.evicted(reason);
    this.deps.log.info({ model: model.key, reason, residentBytes: model.residentBytes }, 'model evicted');
    this.emit('model:evicted', { ...model.ref, reason });
    this.updateState();
    return model.drain().finally(() => {
      this.leaving.delete(model);
      // Its serving parts are garbage now: gone before the next load measures.
      this.deps.collect?.();
      this.updateState();
    });
  }

  private updateState(): void {
    const serving = [...this.models.values()].filter((m) => m.state === 'active');
    this.metrics.setResident(
      serving.length,
      serving.reduce((sum, m) => sum + m.residentBytes, 0),
    );
    if (this.life.state !== 'standby' && this.life.state !== 'active') return;
    this.life.enter(serving.length > 0 ? 'active' : 'standby');
  }

  /** What an operator needs to tell a stuck pool worker from an idle one (`kill -USR2 <pid>` logs it). */
  async diagnostics(): Promise<Record<string, unknown>> {
    return {
      state: this.life.state,
      rev: this.book.rev,
      redis: connectionState(this.deps.redis),
      models: await Promise.all([...this.models.values(), ...this.leaving].map((m) => m.diagnostics())),
    };
  }

  /** Drains: every model's intake stops and its held jobs finish, then the thread ends. Idempotent. */
  close(): Promise<void> {
    this.closing ??= this.drain();
    return this.closing;
  }

  private async drain(): Promise<void> {
    await this.life.close([
      ['control', async () => this.control?.close()],
      ['holdings', async () => this.holdings?.close()],
      ['models', () => this.drainAll()],
      // A load that had passed its closing check may have added a model since: drained too.
      [
        'load loop',
        async () => {
          await this.loadLoop;
          await this.drainAll();
        },
      ],
      ['inference thread', () => this.deps.host.close()],
    ]);
    await closeRedis(this.deps.redis);
  }

  private drainAll(): Promise<unknown> {
    return Promise.all([...this.models.values(), ...this.leaving].map((m) => m.drain()));
  }

  /** Its own fields of a beat, around the life's (worker-life.ts). */
  private sample(life: LifeFields) {
    const held = [...this.models.values(), ...this.leaving];
    const models: PoolModelView[] = [...held.map((m) => m.view()), ...this.book.absentViews()];
    return {
      id: this.id,
      model: '',
      version: '',
      pool: this.settings.pool,
      ...life,
      jobsInFlight: held.reduce((sum, m) => sum + m.jobsInFlight, 0),
      models,
      memoryBudgetBytes: this.settings.memoryBudgetBytes,
      busyFraction: Math.round(this.busy.take() * 1000) / 1000,
      poolCounts: this.metrics.totals(),
    };
  }
}
