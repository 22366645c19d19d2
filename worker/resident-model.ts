/**
 * One model a shared pool's worker holds (worker/pool-worker.ts): its own ONNX Runtime session
 * (on the worker's inference thread), batcher and intake on that model version's queue, the same
 * parts a single-model worker serves with (worker/serving.ts).
 *
 * States (the heartbeat's `models[].state`):
 *
 *   downloading (weights into the sha256 disk cache, unless there) → loading (the session)
 *     → warming (worker/warmup.ts; a profile kept beside the cached model: one batch)
 *     → active (intake fetching) → draining (intake stopped, held jobs finish, session released)
 *
 * A drain during the load stops it at the next phase boundary. A failed load leaves the model
 * `draining` its half-built parts and rejects; the pool worker reports it and may try again.
 *
 * Resident memory is measured, not guessed: the process's RSS once the weights are on disk and
 * once its intake fetches, the difference being all that holding this model added (the weights,
 * the arena ONNX Runtime keeps per session beyond them, onnxruntime#25996, warm-up's buffers, and
 * the serving parts: the intake's connections, batcher, metrics). Loads are one at a time, so no
 * other load shares the window; jobs of other models running meanwhile add noise either way, and
 * a GC elsewhere could shrink it (a cold download's check leaves a buffer of the file's size for the
 * GC), so it is never counted below the file's size. The download itself is outside the window: a
 * process's first loads the S3 client, tens of MB that are the process's, not the model's.
 */
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import { type ModelRef, refKey } from '../infra/fleet/pool-holdings.ts';
import type { PoolModelState, PoolModelView } from '../infra/fleet/worker-states.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { errorMessage } from '../infra/kernel/errors.ts';
import type { Log } from '../infra/kernel/log.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import { type BatchProfile, batchOneMs } from './batch-profile.ts';
import type { BatchEvent } from './batch-runner.ts';
import type { InferenceEngine } from './engine/engine.ts';
import { plannedEngine } from './engine/planned-engine.ts';
import type { ModelCache } from './model-cache.ts';
import type { Serving, startServing } from './serving.ts';
import { servingCloseSteps } from './serving-close.ts';
import { loadFirst, logContention, summariseProfile, warmUp, warmupPlan } from './warmup-plan.ts';

export interface ResidentModelDeps {
  config: Config;
  redis: RedisClient;
  cache: ModelCache;
  /** This model's own session on the worker's inference thread; closed (released) by drain(). */
  session: InferenceEngine;
  startServing: typeof startServing;
  clock: Clock;
  log: Log;
  workerId: string;
  storeFor?: (bucket: string) => ObjectStore;
  /** The process's resident set now, in bytes; default process.memoryUsage.rss. */
  rss?: () => number;
  /** A full garbage collection, run before each RSS reading so the delta counts live memory; none: skipped. */
  collect?: () => void;
  onBatch(e: BatchEvent): void;
  /** A pass failed other than by ONNX Runtime refusing its data: the inference thread may be gone. */
  onEngineError(err: unknown): void;
  /** `resident`: the job was queued after this model became resident here (a hit), not before (it waited for the load). */
  onJobDone?(e: { outcome: 'succeeded' | 'failed' | 'retry'; rows: number; resident: boolean }): void;
}

/** What a load measured. */
export interface LoadReport {
  sha256: string;
  cacheHit: boolean;
  downloadMs: number;
  /** From the start of the download to the intake fetching. */
  loadMs: number;
  /** max(rssDeltaBytes, file size): what the budget counts. */
  residentBytes: number;
  /** The RSS delta itself, as read. */
  rssDeltaBytes: number;
  /** Forward passes warm-up ran: 1 when it reused the profile kept beside the cached model. */
  warmupRuns: number;
  /** Batch sizes warm-up measured (0 when it reused a kept profile). */
  batchesMeasured: number;
  reused: boolean;
}

/**
 * INTRA_OP_THREADS when set, else 1: a pool worker's sessions share its cores and its one
 * inference thread (their passes are one at a time there), and each session with more intra-op
 * threads would keep a thread pool of its own, for every model held.
 */
export function poolThreadCandidates(config: Config['worker']): number[] {
  return [config.intraOpThreads > 0 ? config.intraOpThreads : 1];
}

/** Thrown by a load that a drain interrupted. */
export class LoadInterruptedError extends Error {}

export class ResidentModel {
  readonly key: string;
  private phase: PoolModelState = 'downloading';
  private serving?: Serving;
  private profile?: BatchProfile;
  private report?: LoadReport;
  private loading?: Promise<LoadReport>;
  private closing?: Promise<void>;
  private readyAt?: number;
  private used: number;
  private error?: string;

  constructor(
    private readonly deps: ResidentModelDeps,
    readonly manifest: ModelManifest,
  ) {
    this.key = refKey(this.ref);
    this.used = deps.clock.now();
  }

  get ref(): ModelRef {
    return { model: this.manifest.name, version: this.manifest.version };
  }

  get state(): PoolModelState {
    return this.phase;
  }

  get jobsInFlight(): number {
    return this.serving?.intake.jobsHeld ?? 0;
  }

  /** Its last job's end, or when it became resident (or started loading) before any. */
  get lastUsedAt(): number {
    return this.used;
  }

  get residentBytes(): number {
    return this.report?.residentBytes ?? 0;
  }

  /** Downloads, loads, warms up and starts serving. One call; a second returns the first's promise. */
  load(): Promise<LoadReport> {
    this.loading ??= this.loadOnce();
    return this.loading;
  }

  private async loadOnce(): Promise<LoadReport> {
    const { config, cache, clock, log } = this.deps;
    const read = this.deps.rss ?? (() => process.memoryUsage.rss());
    const rss = () => {
      this.deps.collect?.();
      return read();
    };
    const started = clock.now();
    try {
      const cached = await cache.ensure(this.manifest);
      this.check();
      // After the download: a process's first one loads the S3 client, which no model should carry.
      const before = rss();
      this.phase = 'loading';
      let warmupRuns = 0;
      const engine = counting(plannedEngine(this.deps.session, this.manifest.inputs, this.manifest.outputs), () => warmupRuns++);
      const plan = warmupPlan(config.worker, engine, this.manifest, cached.path, poolThreadCandidates(config.worker));
      const { intraOpThreads } = await loadFirst(plan);
      this.check();
      this.phase = 'warming';
      let batchesMeasured = 0;
      const contention = logContention(log);
      const profile = await warmUp(plan, intraOpThreads, (e) => {
        if (e.type === 'measured') batchesMeasured++;
        contention(e);
      });
      this.check();
      this.profile = profile;
      this.serving = this.startServing(plannedEngine(this.deps.session, this.manifest.inputs, this.manifest.outputs), profile);
      await this.serving.intake.activate();
      const rssDeltaBytes = rss() - before;
      const residentBytes = Math.max(rssDeltaBytes, this.manifest.sizeBytes);
      this.check();
      const now = clock.now();
      this.readyAt = now;
      this.used = now;
      this.phase = 'active';
      this.report = {
        sha256: this.manifest.sha256,
        cacheHit: cached.hit,
        downloadMs: cached.downloadMs,
        loadMs: Math.max(0, now - started),
        residentBytes,
        rssDeltaBytes,
        warmupRuns,
        batchesMeasured,
        reused: profile.reused ?? false,
      };
      log.info({ model: this.key, ...this.report, profile: summariseProfile(profile) }, 'model resident');
      return this.report;
    } catch (err) {
      if (!(err instanceof LoadInterruptedError)) this.error = errorMessage(err);
      throw err;
    }
  }

  /** Stops taking jobs, finishes those held, releases the session. Idempotent; safe during a load. */
  drain(): Promise<void> {
    this.closing ??= this.shutdown();
    return this.closing;
  }

  private async shutdown(): Promise<void> {
    this.phase = 'draining';
    // A load in progress stops at its next phase boundary (check()); what it built is closed below.
    await this.loading?.catch(() => undefined);
    const steps: Array<[string, () => Promise<unknown>]> = [
      ...servingCloseSteps(this.serving),
      ['session', () => this.deps.session.close()],
    ];
    for (const [name, step] of steps) {
      await step().catch((err: unknown) => this.deps.log.warn({ err, step: name, model: this.key }, 'model drain step failed'));
    }
  }

  /** This model in the heartbeat's `models`. */
  view(): PoolModelView {
    const r = this.report;
    return {
      model: this.manifest.name,
      version: this.manifest.version,
      state: this.phase,
      residentBytes: this.residentBytes,
      lastUsedAt: this.used,
      jobsInFlight: this.jobsInFlight,
      ...(r
        ? {
            loadMs: Math.round(r.loadMs),
            cacheHit: r.cacheHit,
            warmup: { reused: r.reused, runs: r.warmupRuns, batchesMeasured: r.batchesMeasured },
          }
        : {}),
      ...(this.profile ? { profile: profileView(this.profile) } : {}),
      ...(this.error ? { error: this.error } : {}),
    };
  }

  private check(): void {
    if (this.closing) throw new LoadInterruptedError(`load of ${this.key} interrupted by a drain`);
  }

  private startServing(engine: InferenceEngine, profile: BatchProfile): Serving {
    const { deps } = this;
    return deps.startServing(
      {
        config: deps.config,
        redis: deps.redis,
        engine,
        clock: deps.clock,
        log: deps.log.child({ model: this.manifest.name, version: this.manifest.version }),
        ...(deps.storeFor ? { storeFor: deps.storeFor } : {}),
        workerId: deps.workerId,
        serving: () => this.phase === 'active',
        onBatch: (e) => deps.onBatch(e),
        onEngineError: (err) => deps.onEngineError(err),
        onJobDone: (e) => {
          const now = deps.clock.now();
          this.used = now;
          // Submitted ≈ now − queueMs (queueMs ends when the job was taken, a pass earlier).
          deps.onJobDone?.({ outcome: e.outcome, rows: e.rows, resident: now - e.queueMs >= (this.readyAt ?? now) });
        },
      },
      this.manifest,
      profile,
    );
  }

  /** Where its intake stands (`kill -USR2`: worker/main.ts logs it). */
  async diagnostics(): Promise<Record<string, unknown>> {
    return { model: this.key, state: this.phase, intake: (await this.serving?.intake.diagnostics()) ?? null };
  }

  /** The serving parts' metrics snapshot (worker/serving.ts), written under `key`. */
  publishMetrics(key: string, ttlMs: number): Promise<void> {
    return this.serving?.publishMetrics(key, ttlMs) ?? Promise.resolve();
  }
}

/** A profile as the heartbeat shows it (PoolModelView.profile): what the pool's planner reads of it. */
function profileView(p: BatchProfile): NonNullable<PoolModelView['profile']> {
  const one = batchOneMs(p);
  return {
    threads: p.threads,
    chosenBatch: p.chosenBatch,
    rowsPerS: Math.round(p.rowsPerS),
    // To the microsecond: a small model's batch of one is well under a millisecond.
    ...(one !== undefined ? { batchOneMs: Math.round(one * 1000) / 1000 } : {}),
  };
}

/** `engine`, counting its forward passes (warm-up's, here). */
function counting(engine: InferenceEngine, onRun: () => void): InferenceEngine {
  return {
    load: (modelPath, options) => engine.load(modelPath, options),
    run: (inputs, outputNames) => {
      onRun();
      return engine.run(inputs, outputNames);
    },
    close: () => engine.close(),
  };
}
