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
import type { WorkerState } from '../infra/contracts/worker-state.ts';
import type { ControlCommand } from '../infra/fleet/worker-control.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { errorMessage } from '../infra/kernel/errors.ts';
import { TypedEmitter } from '../infra/kernel/events.ts';
import type { Log } from '../infra/kernel/log.ts';
import { closeRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { metricsKey } from '../infra/redis/keys.ts';
import type { ModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { BatchProfile } from './batch-profile.ts';
import type { BatchEvent } from './batch-runner.ts';
import { type ControlListener, createControlListener } from './control.ts';
import type { InferenceEngine } from './engine/engine.ts';
import { createEnginePool, type EnginePool, sessionsFor } from './engine/engine-pool.ts';
import { plannedEngine } from './engine/planned-engine.ts';
import { connectionState, type IntakeSupervisor } from './intake-supervisor.ts';
import { createModelCache } from './model-cache.ts';
import type { Serving, startServing } from './serving.ts';
import { servingCloseSteps } from './serving-close.ts';
import { withStartBackoff } from './start-backoff.ts';
import { loadFirst, logContention, summariseProfile, warmUp, warmupPlan } from './warmup-plan.ts';
import { type LifeFields, WorkerLife } from './worker-life.ts';

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
  /** Its state, heartbeat and rows-per-second meter; the two promises its entry waits on. */
  private readonly life: WorkerLife;
  private manifest?: ModelManifest;
  private profile?: BatchProfile;
  /** More sessions opened beside the engine given (morePasses), closed with it. */
  private moreEngines: InferenceEngine[] = [];
  /** Several sessions at once, when opened: its counts are the worker's passes in flight. */
  private pool?: EnginePool;
  private intake?: IntakeSupervisor;
  /**
   * The batcher, the intake, the completions, open-jobs and stored-bytes releasers (flushed once a
   * second: a MULTI per job cost 15% of the CPU) and the metrics, once warmed (worker/serving.ts).
   */
  private serving?: Serving;
  /** worker/serving.ts and BullMQ under it, imported from `loading` on (not before `downloading`). */
  private servingModule?: Promise<typeof import('./serving.ts')>;
  /** Aborted by close(): ends a start-up retry wait at once. */
  private readonly stopStarting = new AbortController();
  private closing?: Promise<void>;
  private control?: ControlListener;
  /** The latest standby/active command; applied once warmed. */
  private desired?: ControlCommand;
  private transitions: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: WorkerDeps,
    private readonly target: WorkerTarget,
    private readonly startOptions: WorkerOptions = {},
  ) {
    super({ onListenerError: (err) => deps.log.warn({ err }, 'worker event listener threw') });
    this.life = new WorkerLife(deps, {
      id: this.id,
      sample: (life) => this.sample(life),
      onBeat: async () => {
        const { config } = this.deps;
        // Every beat re-reads the desired state: a missed doorbell is caught here.
        await this.control?.check();
        // No snapshot before serving: the registry is built with the metrics (an empty one added no series).
        await this.serving?.publishMetrics(metricsKey(config.queuePrefix, this.id), config.worker.heartbeatTtlMs);
      },
      onChange: (state, previous) => this.emit('worker:state', state, previous),
    });
  }

  get currentState(): WorkerState {
    return this.life.state;
  }

  /** Resolves when the control channel says `drain`; whoever runs the worker then calls close(). */
  get drainRequested(): Promise<void> {
    return this.life.drainRequested;
  }

  /**
   * Rejects when the engine dies while serving (its thread crashed): the worker cannot serve
   * any more and its entry exits non-zero so whoever launched it starts a fresh one. The jobs
   * it held fail this attempt and BullMQ retries them.
   */
  get engineLost(): Promise<never> {
    return this.life.engineLost;
  }

  get batchProfile(): BatchProfile | undefined {
    return this.profile;
  }

  /** Runs the phases up to `active`. Rejects (after recording `failed`) if any phase fails. */
  async start(): Promise<void> {
    await this.life.start(async () => {
      await this.listen();
      await this.phases();
    });
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
    this.life.enter('downloading');
    const { manifest, cached } = await this.download();
    if (this.closing) return;
    // Row layout in, the model's own layout to ONNX Runtime (the model itself when they are one).
    const engine = plannedEngine(this.deps.engine, manifest.inputs, manifest.outputs);

    this.life.enter('loading');
    // This thread waits on the engine's session from here: it compiles the serving side meanwhile.
    void this.servingCode();
    const warmup = warmupPlan(config.worker, engine, manifest, cached.path);
    // A warm-cache restart loads the thread count its kept profile chose, a cold one the first
    // count warm-up measures (warmup-plan.ts loadFirst).
    const { intraOpThreads, info } = await loadFirst(warmup);
    this.emit('model:loaded', { sha256: manifest.sha256, cacheHit: cached.hit, downloadMs: cached.downloadMs, loadMs: info.loadMs });
    if (this.closing) return;

    this.life.enter('warming');
    this.profile = await warmUp(warmup, intraOpThreads, logContention(log));
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
          this.life.error = `model download attempt ${attempt} failed, retrying in ${delayMs} ms: ${reason}`;
          log.warn({ attempt, delayMs, err: reason }, 'model download failed; retrying');
          void this.life.beat();
        },
      },
    );
    this.life.error = undefined;
    return result;
  }

  private onControl(command: ControlCommand): void {
    if (command === 'drain') {
      this.life.requestDrain();
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
    const state = this.life.state;
    if (!intake || this.closing || !STEERABLE.includes(state)) return;
    if (this.desired === 'activate' && state !== 'active') {
      await intake.activate();
      this.life.enter('active');
    } else if (this.desired === 'standby' && state !== 'standby') {
      // Stops fetching and waits for the jobs held, which finish through the batcher.
      if (state === 'active') await intake.standby();
      if (!this.closing) this.life.enter('standby');
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
        serving: () => this.life.state === 'active' && !this.closing,
        onBatch: (e) => {
          this.life.countRows(e.rows);
          this.emit('batch:flushed', e);
        },
        onEngineError: (err) => {
          if (this.life.state !== 'active') return;
          this.life.engineDied(`inference engine lost: ${errorMessage(err)}`, err);
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
      state: this.life.state,
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
    await this.life.close([
      ['control', async () => this.control?.close()],
      ...servingCloseSteps(this.serving),
      ['engine', () => Promise.all([this.deps.engine, ...this.moreEngines].map((e) => e.close()))],
    ]);
    await closeRedis(this.deps.redis);
  }

  /** Its own fields of a beat, around the life's (worker-life.ts). */
  private sample(life: LifeFields) {
    return {
      id: this.id,
      model: this.manifest?.name ?? this.target.model,
      version: this.manifest?.version ?? this.target.version ?? '',
      ...life,
      jobsInFlight: this.intake?.jobsHeld ?? 0,
      batchProfile: this.profile,
      ...(this.pool ? { sessions: this.pool.size } : {}),
    };
  }
}
