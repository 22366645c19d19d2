/**
 * One worker's life (states in infra/contracts/worker-state.ts):
 *
 *   launching → downloading (manifest + weights into the disk cache, sha256-checked)
 *             → loading (ONNX Runtime session in a worker thread)
 *             → warming (representative batches → batch profile, batch size, thread count)
 *             → standby (warmed; the BullMQ intake exists but fetches nothing)
 *               ⇄ active (BullMQ intake → micro-batcher → engine)
 *             → draining (SIGTERM or `drain`: stop taking jobs, finish those held) → stopped
 *
 * After warm-up the worker goes where it is told: the control channel's desired state
 * (worker/control.ts, infra/fleet/worker-control.ts) if one was sent, else `startAs` (default active).
 * `activate` starts (or resumes) the intake; `standby` pauses it, which stops fetching and waits
 * for the jobs held, and only then reports standby. Transitions run one at a time, each towards
 * the latest desired state, so a burst of commands settles on the last one.
 *
 * Any failure before serving ends in `failed` (the heartbeat says why) and the process exits
 * non-zero, so whoever launched it sees it. An unreachable registry is not a failure: the worker
 * stays `downloading` and retries with back-off, the heartbeat's `error` saying so (download()).
 * A drain during the start phases stops at the next phase boundary without serving.
 */

import { randomBytes } from 'node:crypto';
import os from 'node:os';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { canTransition, type WorkerState } from '../infra/contracts/worker-state.ts';
import type { ControlCommand } from '../infra/fleet/worker-control.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { coerceError, errorMessage } from '../infra/kernel/errors.ts';
import { TypedEmitter } from '../infra/kernel/events.ts';
import type { Log } from '../infra/kernel/log.ts';
import { closeRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { metricsKey, workerKey } from '../infra/redis/keys.ts';
import type { ModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { BatchProfile } from './batch-profile.ts';
import type { BatchEvent } from './batch-runner.ts';
import { type ControlListener, createControlListener } from './control.ts';
import type { InferenceEngine } from './engine/engine.ts';
import { createEnginePool, type EnginePool, sessionsFor } from './engine/engine-pool.ts';
import { plannedEngine } from './engine/planned-engine.ts';
import { type Heartbeat, startHeartbeat } from './heartbeat.ts';
import { connectionState, type IntakeSupervisor } from './intake-supervisor.ts';
import { createModelCache } from './model-cache.ts';
import type { Serving, startServing } from './serving.ts';
import { servingCloseSteps } from './serving-close.ts';
import { withStartBackoff } from './start-backoff.ts';
import { loadFirst, summariseProfile, warmUp, warmupPlan } from './warmup-plan.ts';

export interface WorkerEvents extends Record<string, unknown[]> {
  'worker:state': [state: WorkerState, previous: WorkerState];
  /** `rows` the jobs brought; `uniqueRows` the engine ran after collapsing identical rows. */
  'batch:flushed': [e: BatchEvent];
  'model:loaded': [e: { sha256: string; cacheHit: boolean; downloadMs: number; loadMs: number }];
}

export interface WorkerDeps {
  config: Config;
  redis: RedisClient;
  registry: Pick<ModelRegistry, 'getManifest' | 'openModel'>;
  engine: InferenceEngine;
  clock: Clock;
  log: Log;
  /** Object stores by bucket, for bulk chunks' parts; without it bulk chunk jobs fail and retry. */
  storeFor?: (bucket: string) => ObjectStore;
  /** More engines like `engine`, for a worker that runs several passes at once (engine-pool.ts); without it, one. */
  newEngine?: () => InferenceEngine;
}

export interface WorkerTarget {
  model: string;
  /** Omitted = the latest version in the registry. */
  version?: string;
}

export interface WorkerOptions {
  /** Where a warmed worker goes when no control command says otherwise; default active. */
  startAs?: 'active' | 'standby';
}

/** States in which the control channel may move the worker between standby and active. */
const STEERABLE: readonly WorkerState[] = ['warming', 'standby', 'active'];

export class WarmpoolWorker extends TypedEmitter<WorkerEvents> {
  readonly id = `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  private state: WorkerState = 'launching';
  private manifest?: ModelManifest;
  private profile?: BatchProfile;
  /** More sessions opened beside the engine given (morePasses), closed with it. */
  private moreEngines: InferenceEngine[] = [];
  /** Several sessions at once, when opened: its counts are the worker's passes in flight. */
  private pool?: EnginePool;
  private heartbeat?: Heartbeat;
  private intake?: IntakeSupervisor;
  /**
   * The batcher, the intake, the completions, open-jobs and stored-bytes releasers (flushed once a
   * second: a MULTI per job cost 15% of the CPU) and the metrics, once warmed (worker/serving.ts).
   */
  private serving?: Serving;
  /** worker/serving.ts and BullMQ under it, imported from `loading` on (not before `downloading`). */
  private servingModule?: Promise<typeof import('./serving.ts')>;
  private rowsSinceBeat = 0;
  private lastBeatAt: number;
  private error?: string;
  /** Aborted by close(): ends a start-up retry wait at once. */
  private readonly stopStarting = new AbortController();
  private closing?: Promise<void>;
  private lost?: (err: Error) => void;
  private control?: ControlListener;
  /** The latest standby/active command; applied once warmed. */
  private desired?: ControlCommand;
  private transitions: Promise<void> = Promise.resolve();
  private askDrain?: () => void;
  /** Resolves when the control channel says `drain`; whoever runs the worker then calls close(). */
  readonly drainRequested = new Promise<void>((resolve) => {
    this.askDrain = resolve;
  });
  /**
   * Rejects when the engine dies while serving (its thread crashed): the worker cannot serve
   * any more and its entry exits non-zero so whoever launched it starts a fresh one. The jobs
   * it held fail this attempt and BullMQ retries them.
   */
  readonly engineLost = new Promise<never>((_, reject) => {
    this.lost = reject;
  });

  constructor(
    private readonly deps: WorkerDeps,
    private readonly target: WorkerTarget,
    private readonly startOptions: WorkerOptions = {},
  ) {
    super({ onListenerError: (err) => deps.log.warn({ err }, 'worker event listener threw') });
    this.startedAt = deps.clock.now();
    this.stateSince = this.startedAt;
    this.lastBeatAt = this.startedAt;
    // Whoever runs the worker races this against shutdown; unobserved, it must not crash.
    this.engineLost.catch(() => undefined);
  }

  get currentState(): WorkerState {
    return this.state;
  }

  get batchProfile(): BatchProfile | undefined {
    return this.profile;
  }

  /** Runs the phases up to `active`. Rejects (after recording `failed`) if any phase fails. */
  async start(): Promise<void> {
    const { config, redis, clock, log } = this.deps;
    this.heartbeat = startHeartbeat({
      redis,
      key: workerKey(config.queuePrefix, this.id),
      intervalMs: config.worker.heartbeatIntervalMs,
      ttlMs: config.worker.heartbeatTtlMs,
      clock,
      sample: () => this.sample(),
      onBeat: async () => {
        // Every beat re-reads the desired state: a missed doorbell is caught here.
        await this.control?.check();
        // No snapshot before serving: the registry is built with the metrics (an empty one added no series).
        await this.serving?.publishMetrics(metricsKey(config.queuePrefix, this.id), config.worker.heartbeatTtlMs);
      },
      onError: (err) => log.warn({ err }, 'heartbeat failed'),
    });
    try {
      await this.listen();
      await this.phases();
    } catch (err) {
      // A drain that interrupted a phase (the engine closed under a load) is not a failure.
      if (this.closing) return;
      this.error = errorMessage(err);
      this.setState('failed');
      await this.heartbeat.beat();
      throw err;
    }
  }

  /** Subscribes to the control channel; its first read picks up a command sent before we listened. */
  private async listen(): Promise<void> {
    const { config, redis, log } = this.deps;
    const subscriber = duplicateClient(redis);
    subscriber.on('error', (err: Error) => log.warn({ err: err.message }, 'control connection error'));
    this.control = createControlListener({
      redis,
      subscriber,
      prefix: config.queuePrefix,
      workerId: this.id,
      onCommand: (command) => this.onControl(command),
      onError: (err) => log.warn({ err }, 'control read failed'),
    });
    await this.control.start();
  }

  private async phases(): Promise<void> {
    const { config, log } = this.deps;
    this.setState('downloading');
    const { manifest, cached } = await this.download();
    if (this.closing) return;
    // Row layout in, the model's own layout to ONNX Runtime (the model itself when they are one).
    const engine = plannedEngine(this.deps.engine, manifest.inputs, manifest.outputs);

    this.setState('loading');
    // This thread waits on the engine's session from here: it compiles the serving side meanwhile.
    void this.servingCode();
    const warmup = warmupPlan(config.worker, engine, manifest, cached.path);
    // A warm-cache restart loads the thread count its kept profile chose, a cold one the first
    // count warm-up measures (warmup-plan.ts loadFirst).
    const { intraOpThreads, info } = await loadFirst(warmup);
    this.emit('model:loaded', { sha256: manifest.sha256, cacheHit: cached.hit, downloadMs: cached.downloadMs, loadMs: info.loadMs });
    if (this.closing) return;

    this.setState('warming');
    this.profile = await warmUp(warmup, intraOpThreads);
    log.info({ profile: summariseProfile(this.profile) }, 'warm-up done');
    if (this.closing) return;
    const serving = await this.servingCode();
    if (this.closing) return;
    const served = await this.morePasses(engine, manifest, cached.path, this.profile);
    if (this.closing) return;
    this.startServing(serving.startServing, served, manifest, this.profile);
    this.desired ??= this.startOptions.startAs === 'standby' ? 'standby' : 'activate';
    await this.steer();
  }

  /**
   * The engine serving runs on: the warmed one, or a pool of it and more sessions of the same
   * model at the thread count warm-up chose, when sessionsFor says the cores allow more passes
   * at once (engine-pool.ts).
   */
  private async morePasses(
    engine: InferenceEngine,
    manifest: ModelManifest,
    modelPath: string,
    profile: BatchProfile,
  ): Promise<InferenceEngine> {
    const { config, newEngine } = this.deps;
    const oneRowAPass = manifest.batching.fixedBatch === 1 || manifest.batching.maxBatch === 1;
    const sessions = sessionsFor(config.worker.sessions, oneRowAPass, profile.threads, os.availableParallelism());
    if (sessions <= 1 || !newEngine) return engine;
    const more = Array.from({ length: sessions - 1 }, () => newEngine());
    this.moreEngines.push(...more);
    const options = { executionProviders: config.worker.executionProviders, intraOpThreads: profile.threads };
    await Promise.all(more.map((e) => e.load(modelPath, options)));
    this.pool = createEnginePool([this.deps.engine, ...more]);
    this.deps.log.info({ sessions }, 'sessions opened: several passes at once');
    return plannedEngine(this.pool, manifest.inputs, manifest.outputs);
  }

  /**
   * Manifest and weights into the disk cache. While the registry is unreachable the worker stays
   * `downloading` and retries with back-off (worker/start-backoff.ts); each retry is logged and
   * shown in the heartbeat's `error` until an attempt succeeds. A drain ends the wait.
   */
  private async download() {
    const { config, registry, clock, log } = this.deps;
    const cache = createModelCache({ dir: config.worker.modelCacheDir, registry });
    const result = await withStartBackoff(
      async () => {
        const manifest = await registry.getManifest(this.target.model, this.target.version);
        this.manifest = manifest;
        return { manifest, cached: await cache.ensure(manifest) };
      },
      {
        clock,
        signal: this.stopStarting.signal,
        onRetry: ({ attempt, delayMs, error }) => {
          const reason = errorMessage(error);
          this.error = `model download attempt ${attempt} failed, retrying in ${delayMs} ms: ${reason}`;
          log.warn({ attempt, delayMs, err: reason }, 'model download failed; retrying');
          void this.heartbeat?.beat();
        },
      },
    );
    this.error = undefined;
    return result;
  }

  private onControl(command: ControlCommand): void {
    if (command === 'drain') {
      this.askDrain?.();
      return;
    }
    if (this.desired !== command) this.deps.log.info({ command }, 'control command');
    this.desired = command;
    // Before warm-up ends there is no intake yet: phases() applies `desired` when it is ready.
    if (this.intake) void this.steer();
  }

  /** Queues a move towards the latest desired state; resolves when the queue reaches it. */
  private steer(): Promise<void> {
    this.transitions = this.transitions
      .then(() => this.applyDesired())
      .catch((err: unknown) => this.deps.log.warn({ err }, 'control transition failed'));
    return this.transitions;
  }

  private async applyDesired(): Promise<void> {
    const intake = this.intake;
    if (!intake || this.closing || !STEERABLE.includes(this.state)) return;
    if (this.desired === 'activate' && this.state !== 'active') {
      await intake.activate();
      this.setState('active');
    } else if (this.desired === 'standby' && this.state !== 'standby') {
      // Stops fetching and waits for the jobs held, which finish through the batcher.
      if (this.state === 'active') await intake.standby();
      if (!this.closing) this.setState('standby');
    }
  }

  /** worker/serving.ts, imported once: from `loading` on, so that it is compiled when warm-up ends. */
  private servingCode(): Promise<typeof import('./serving.ts')> {
    if (!this.servingModule) {
      this.servingModule = import('./serving.ts');
      // Awaited once warmed; a drain before then must not leave its failure unobserved.
      this.servingModule.catch(() => undefined);
    }
    return this.servingModule;
  }

  /** The serving parts over the warmed engine (worker/serving.ts); the intake starts paused. */
  private startServing(start: typeof startServing, engine: InferenceEngine, manifest: ModelManifest, profile: BatchProfile): void {
    this.serving = start(
      {
        ...this.deps,
        engine,
        ...(this.pool ? { sessions: this.pool } : {}),
        workerId: this.id,
        serving: () => this.state === 'active' && !this.closing,
        onBatch: (e) => {
          this.rowsSinceBeat += e.rows;
          this.emit('batch:flushed', e);
        },
        onEngineError: (err) => {
          if (this.state !== 'active') return;
          this.error = `inference engine lost: ${errorMessage(err)}`;
          this.setState('failed');
          this.lost?.(coerceError(err));
        },
      },
      manifest,
      profile,
    );
    this.intake = this.serving.intake;
  }

  /** What an operator needs to tell a stuck worker from an idle one (`kill -USR2 <pid>` logs it). */
  async diagnostics(): Promise<Record<string, unknown>> {
    return {
      state: this.state,
      desired: this.desired,
      redis: connectionState(this.deps.redis),
      intake: (await this.intake?.diagnostics()) ?? null,
    };
  }

  /** Drains: stop taking jobs, finish the ones held, release the engine. Idempotent. */
  close(): Promise<void> {
    this.stopStarting.abort();
    this.closing ??= this.drain();
    return this.closing;
  }

  private async drain(): Promise<void> {
    const { redis, log } = this.deps;
    if (this.state !== 'failed') this.setState('draining');
    const steps: Array<[string, () => Promise<unknown>]> = [
      ['control', async () => this.control?.close()],
      ...servingCloseSteps(this.serving),
      ['engine', () => Promise.all([this.deps.engine, ...this.moreEngines].map((e) => e.close()))],
    ];
    for (const [name, step] of steps) {
      await step().catch((err: unknown) => log.warn({ err, step: name }, 'drain step failed'));
    }
    this.setState('stopped');
    await this.heartbeat?.close().catch(() => undefined);
    await closeRedis(redis);
  }

  private setState(next: WorkerState): void {
    const previous = this.state;
    if (previous === next || !canTransition(previous, next)) return;
    this.state = next;
    this.stateSince = this.deps.clock.now();
    this.deps.log.info({ state: next, previous }, 'worker state');
    this.emit('worker:state', next, previous);
    void this.heartbeat?.beat();
  }

  private sample() {
    const now = this.deps.clock.now();
    const elapsedS = Math.max(0.001, (now - this.lastBeatAt) / 1000);
    const rowsPerS = this.rowsSinceBeat / elapsedS;
    this.rowsSinceBeat = 0;
    this.lastBeatAt = now;
    return {
      id: this.id,
      model: this.manifest?.name ?? this.target.model,
      version: this.manifest?.version ?? this.target.version ?? '',
      state: this.state,
      startedAt: this.startedAt,
      stateSince: this.stateSince,
      rowsPerS: Math.round(rowsPerS * 10) / 10,
      jobsInFlight: this.intake?.jobsHeld ?? 0,
      batchProfile: this.profile,
      ...(this.pool ? { sessions: this.pool.size } : {}),
      ...(this.error ? { error: this.error } : {}),
    };
  }

  private readonly startedAt: number;
  /** When the worker entered its current state: cold-start timing and the pool view use it. */
  private stateSince: number;
}
