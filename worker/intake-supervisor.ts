/**
 * The worker's BullMQ intake over its life: started or resumed on `activate`, paused on
 * `standby`, replaced when it wedges, closed on drain. It also counts the jobs it holds (the
 * heartbeat's `jobsInFlight`) and says where its connections stand (`diagnostics`).
 *
 * Two BullMQ 6.7 behaviours on a Redis Cluster shape it:
 * - `Worker.pause()` never resolves there: it disconnects the blocking connection under an
 *   in-flight BZPOPMIN, and BullMQ's cluster recovery keeps reconnecting and retrying that
 *   read, so its main loop never ends. So `standby` never uses BullMQ's wait, on any Redis: it
 *   stops fetching (pause(true)) and counts the held jobs down itself; a fetch already blocked
 *   in BZPOPMIN on an empty queue may still take one job within drainDelay, and the intake's
 *   gate (intake.ts IntakeGate) puts that job back in the queue untouched.
 * - After a cluster node restarts, BullMQ's worker can stop fetching for good: alive, no
 *   error, no job. The watchdog (intake-watchdog.ts) sees jobs waiting beside an intake that
 *   took none for `stallMs`, and the intake is replaced by a fresh one on a connection of its
 *   own. Whatever the old one held returns to the queue when its locks expire, as after a crash.
 *
 * Every intake runs on a duplicate of the worker's Redis client, closed with the supervisor: BullMQ
 * defines its scripts on the connection it is given, and the shared client stays free of them
 * for the worker's own commands (intake.ts `entries`).
 */
import { queueName } from '../infra/contracts/job.ts';
import type { ModelManifest } from '../infra/contracts/manifest.ts';
import type { Clock } from '../infra/kernel/clock.ts';
import type { Log } from '../infra/kernel/log.ts';
import { closeRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { queueKey } from '../infra/redis/keys.ts';
import type { IntakeGate } from './intake.ts';
import { createIntakeWatchdog, type IntakeWatchdog, type StallInfo } from './intake-watchdog.ts';

/**
 * What the supervisor does with a BullMQ Worker (the intake's `IntakeWorker`, or any other): it
 * starts, pauses and closes it and counts its jobs, never looking at their data or results.
 */
export interface Intake {
  /** The job, by its id only (`failed` may come without one: a job BullMQ could not read). */
  on(event: 'active' | 'completed' | 'failed', listener: (job: { id?: string | undefined } | undefined) => void): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  removeAllListeners(): unknown;
  isPaused(): boolean;
  isRunning(): boolean;
  run(): Promise<unknown>;
  pause(doNotWaitActive?: boolean): Promise<void>;
  resume(): void;
  close(force?: boolean): Promise<void>;
}

export interface IntakeSupervisorDeps {
  redis: RedisClient;
  clock: Clock;
  log: Log;
  prefix: string;
  manifest: ModelManifest;
  /** Jobs one intake holds at most (BullMQ's concurrency). */
  concurrency: number;
  /** Idle time beside waiting jobs that counts as wedged. */
  stallMs: number;
  /** A BullMQ intake on `connection` (createIntake with the worker's batcher and result cache), not yet running, honouring `gate`. */
  build(connection: RedisClient, gate: IntakeGate): Intake;
  /** True while the worker is active and not draining: only then is an idle intake suspect. */
  serving(): boolean;
}

export class IntakeSupervisor {
  private intake: Intake;
  /**
   * The jobs taken and not yet done with, by id: taken on BullMQ's `active`, done on `completed`,
   * `failed` or the gate's `settled`, whichever comes first (intake.ts IntakeGate says why the
   * events alone leak). A set, so that an end heard twice, or a `failed` for a job never taken
   * here (a stalled job BullMQ fails before any processor runs), takes nothing from the count.
   */
  private readonly held = new Set<string>();
  /** Resolved when the jobs held reach zero (standby waits on them). */
  private idleWaiters: Array<() => void> = [];
  /**
   * When standby began, on the worker's clock, which the gate compares with BullMQ's processedOn:
   * BullMQ stamps it from this host's wall clock, so a worker running real BullMQ jobs runs on
   * systemClock. Undefined while active.
   */
  private standbySince: number | undefined;
  private readonly gate: IntakeGate = {
    admit: (takenAt) => this.standbySince === undefined || takenAt < this.standbySince,
    settled: (jobId) => this.release(jobId),
  };
  private lastTakenAt: number;
  private replacements = 0;
  private readonly connections: RedisClient[] = [];
  private readonly watchdog: IntakeWatchdog;

  constructor(private readonly deps: IntakeSupervisorDeps) {
    this.lastTakenAt = deps.clock.now();
    this.intake = this.attach(deps.build(this.ownConnection(), this.gate));
    this.watchdog = createIntakeWatchdog({
      clock: deps.clock,
      stallMs: deps.stallMs,
      wantsJobs: () => this.wantsJobs(),
      lastTakenAt: () => this.lastTakenAt,
      waiting: () => this.waitingJobs(),
      onStall: (info) => this.replace(info),
    });
    this.watchdog.start();
  }

  /** Jobs taken and not yet finished. */
  get jobsHeld(): number {
    return this.held.size;
  }

  /** Starts taking jobs, or resumes after a standby. */
  async activate(): Promise<void> {
    this.standbySince = undefined;
    if (this.intake.isPaused()) await this.intake.resume();
    else if (!this.intake.isRunning()) this.run(this.intake);
    this.lastTakenAt = this.deps.clock.now();
  }

  /** Stops taking jobs and resolves once the ones held have finished. */
  async standby(): Promise<void> {
    this.standbySince = this.deps.clock.now();
    await this.intake.pause(true);
    if (this.held.size > 0) await new Promise<void>((resolve) => this.idleWaiters.push(resolve));
  }

  /** What an operator needs to tell a wedged intake from an idle one. */
  async diagnostics(): Promise<Record<string, unknown>> {
    const backend = (
      this.intake as unknown as { backend?: Record<'connection' | 'blockingConnection', { client: Promise<unknown> } | undefined> }
    ).backend;
    return {
      running: this.intake.isRunning(),
      paused: this.intake.isPaused(),
      jobsHeld: this.held.size,
      idleMs: this.deps.clock.now() - this.lastTakenAt,
      replacements: this.replacements,
      client: connectionState(await within(backend?.connection?.client)),
      blocking: connectionState(await within(backend?.blockingConnection?.client)),
    };
  }

  /** Stops the watchdog, finishes the jobs held (BullMQ's close), then closes the intakes' connections. */
  async close(): Promise<void> {
    this.watchdog.close();
    try {
      await this.intake.close();
    } finally {
      await Promise.all(this.connections.map((c) => closeRedis(c)));
    }
  }

  private ownConnection(): RedisClient {
    const connection = duplicateClient(this.deps.redis);
    this.connections.push(connection);
    return connection;
  }

  private release(jobId: string | undefined): void {
    if (jobId !== undefined && this.held.delete(jobId)) this.wakeIdle();
  }

  private wakeIdle(): void {
    if (this.held.size === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private attach(intake: Intake): Intake {
    intake.on('active', (job) => {
      if (job?.id) this.held.add(job.id);
      this.lastTakenAt = this.deps.clock.now();
    });
    intake.on('completed', (job) => this.release(job?.id));
    intake.on('failed', (job) => this.release(job?.id));
    intake.on('error', (err) => this.deps.log.warn({ err }, 'intake error'));
    return intake;
  }

  private run(intake: Intake): void {
    void intake.run().catch((err: unknown) => this.deps.log.error({ err }, 'intake stopped'));
  }

  private wantsJobs(): boolean {
    const intake = this.intake;
    return this.deps.serving() && intake.isRunning() && !intake.isPaused() && this.held.size < this.deps.concurrency;
  }

  /** wait + prioritized of this queue, or undefined when Redis does not answer within 2 s. */
  private async waitingJobs(): Promise<number | undefined> {
    const { redis, prefix, manifest } = this.deps;
    const key = (type: string) => queueKey(prefix, queueName(manifest.name, manifest.version), type);
    const counts = Promise.all([redis.llen(key('wait')), redis.zcard(key('prioritized'))]).then(([w, p]) => w + p);
    return within(counts, 2_000);
  }

  private async replace(info: StallInfo): Promise<void> {
    this.deps.log.warn(
      { ...info, diagnostics: await this.diagnostics() },
      'intake stalled: jobs wait and none was taken; replacing it with a fresh one on a new connection',
    );
    const old = this.intake;
    old.removeAllListeners();
    old.on('error', () => undefined);
    void old.close(true).catch(() => undefined);
    this.held.clear();
    this.wakeIdle();
    this.lastTakenAt = this.deps.clock.now();
    this.replacements++;
    this.intake = this.attach(this.deps.build(this.ownConnection(), this.gate));
    this.run(this.intake);
  }
}

/** The promise's value, or undefined if it rejects or takes longer than `ms`. */
function within<T>(promise: Promise<T> | undefined, ms = 500): Promise<T | undefined> {
  if (!promise) return Promise.resolve(undefined);
  let cancel = () => {};
  const timeout = new Promise<undefined>((resolve) => {
    const timer = setTimeout(resolve, ms);
    cancel = () => clearTimeout(timer);
  });
  return Promise.race([promise, timeout])
    .catch(() => undefined)
    .finally(() => cancel());
}

/** ioredis' status (and a cluster's node count) of a client, or null when none answered. */
export function connectionState(client: unknown): { status?: string; nodes?: number } | null {
  const c = client as { status?: string; nodes?: () => unknown[] } | undefined;
  if (!c) return null;
  return { status: c.status, ...(typeof c.nodes === 'function' ? { nodes: c.nodes().length } : {}) };
}
