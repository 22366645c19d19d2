/**
 * `warmpool worker --model M [--version V] [--standby]` and `warmpool worker --pool NAME
 * [--memory-mb MB]`: the worker process's one entry, for a deployment's worker and a shared
 * pool's (poolWorkerMain below). Reads
 * config, wires Redis, the registry, the ONNX Runtime thread engine and the lifecycle; SIGTERM
 * and the control channel's `drain` drain alike (exit 0).
 *
 * `--standby` (or WARMPOOL_START_AS=standby, for launchers that set the environment but not the
 * arguments, e.g. one Kubernetes pod template) warms up and then waits in standby, taking no job
 * until the control channel says `activate`.
 *
 * Boot (spawn → `downloading`) is what a scale-up waits for before any useful work, so this
 * module loads little up front: the inference thread is started first, to import ONNX Runtime
 * on another core while this one loads the worker; the AWS SDK and the bulk subsystem load at
 * their first use (infra/registry/lazy-object-store.ts), after `downloading`.
 */
import os from 'node:os';
import { parseArgs } from 'node:util';
import { missingPoolWorkerEnv } from '../infra/fleet/pool-worker-env.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { onShutdownSignals } from '../infra/kernel/lifecycle.ts';
import { createLogger, type Log } from '../infra/kernel/log.ts';
import { createRedis } from '../infra/redis/client.ts';
import { lazyObjectStore } from '../infra/registry/lazy-object-store.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { createStoreFactory } from '../infra/registry/store-factory.ts';
import { createThreadEngine, createThreadHost } from './engine/thread-engine.ts';
import { type HealthServer, type HealthSource, startHealthServer } from './health-server.ts';

export async function workerMain(args: string[], config: Config, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      model: { type: 'string' },
      version: { type: 'string' },
      standby: { type: 'boolean' },
      pool: { type: 'string' },
      'memory-mb': { type: 'string' },
    },
    strict: true,
  });
  if (values.pool !== undefined) {
    if (values.model !== undefined || values.standby) {
      process.stderr.write('warmpool worker: --pool takes no --model or --standby (a pool worker holds what its pool places on it)\n');
      return 2;
    }
    return poolWorkerMain(values.pool, values['memory-mb'], config);
  }
  if (!values.model) {
    process.stderr.write('warmpool worker: --model is required (e.g. warmpool worker --model demo-scorer)\n');
    return 2;
  }
  const startAs = values.standby ? 'standby' : startAsFromEnv(env.WARMPOOL_START_AS);
  if (startAs === undefined) {
    process.stderr.write(`warmpool worker: WARMPOOL_START_AS must be 'active' or 'standby' (got '${env.WARMPOOL_START_AS}')\n`);
    return 2;
  }
  // First: the thread boots ONNX Runtime while this thread loads the rest of the worker.
  const engine = createThreadEngine();
  const { WarmpoolWorker } = await import('./worker-process.ts').catch(async (err: unknown) => {
    await engine.close();
    throw err;
  });
  const log = createLogger(config.logLevel, { role: 'worker', model: values.model });
  const store = lazyObjectStore(async () => (await import('../infra/registry/s3-object-store.ts')).createS3ObjectStore(config.s3));
  // Bulk chunks write their parts to the run's output bucket, which may not be the registry's.
  const bulkStores = lazyBulkStores(config.s3);
  const worker = new WarmpoolWorker(
    {
      config,
      redis: createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error')),
      registry: createModelRegistry({ store, prefix: config.s3.prefix }),
      engine,
      clock: systemClock,
      log,
      storeFor: bulkStores.storeFor,
      newEngine: () => createThreadEngine(),
    },
    { model: values.model, ...(values.version ? { version: values.version } : {}) },
    { startAs },
  );
  return runWorker(worker, { config, log, close: () => closeStores(store, bulkStores) });
}

/** What runWorker drives: the single-model worker (worker-process.ts) and a shared pool's (pool-worker.ts). */
interface RunnableWorker extends HealthSource {
  readonly drainRequested: Promise<void>;
  readonly engineLost: Promise<never>;
  start(): Promise<void>;
  close(): Promise<void>;
  diagnostics?(): Promise<Record<string, unknown>>;
}

/**
 * Runs a started worker until it drains: SIGTERM/SIGINT, the control channel's `drain` and the
 * health server's /drain drain alike (exit 0); a failed start exits 1, as does a lost engine.
 */
async function runWorker(worker: RunnableWorker, o: { config: Config; log: Log; close: () => void }): Promise<number> {
  const { config, log } = o;
  let health: HealthServer | undefined;
  let resolveDone: (code: number) => void = () => {};
  const done = new Promise<number>((resolve) => {
    resolveDone = resolve;
  });
  const drain = async (reason: string) => {
    log.info({ reason }, 'draining');
    await worker.close();
    // The health server closes after this resolves: a /drain caller gets its answer first.
    resolveDone(0);
  };
  onShutdownSignals(
    {
      drain,
      // onShutdownSignals exits with 128 + signal right after this; held jobs return to the
      // queue when their locks expire.
      force: (signal, reason) => log.warn({ signal, reason }, 'forced exit'),
    },
    { forceAfterMs: config.worker.drainLimitMs },
  );
  void worker.drainRequested.then(() => drain('control: drain'));
  // `kill -USR2 <pid>`: where the worker and its Redis connections stand, logged at warn.
  const diagnostics = worker.diagnostics?.bind(worker);
  if (diagnostics) process.on('SIGUSR2', () => void diagnostics().then((d) => log.warn(d, 'diagnostics')));
  try {
    // Before start(): probes see `launching`/`warming` as not ready rather than refused.
    if (config.worker.healthPort > 0) {
      health = await startHealthServer({ source: worker, port: config.worker.healthPort, drain: () => drain('health: /drain') });
    }
    await worker.start();
  } catch (err) {
    log.error({ err }, 'worker failed to start');
    await worker.close();
    await health?.close();
    o.close();
    return 1;
  }
  const code = await Promise.race([
    done,
    worker.engineLost.catch(async (err: unknown) => {
      log.error({ err }, 'inference engine lost; exiting so the pool starts a fresh worker');
      await worker.close();
      return 1;
    }),
  ]);
  await health?.close();
  o.close();
  return code;
}

/**
 * `warmpool worker --pool NAME [--memory-mb MB]`: a shared pool's worker (pool-worker.ts). It
 * boots to standby with its inference thread up and no model, then holds what its holdings say
 * (infra/fleet/pool-holdings.ts). MB: what its models' measured resident memory may add up to;
 * default half the host's memory.
 */
async function poolWorkerMain(pool: string, memoryMb: string | undefined, config: Config): Promise<number> {
  const budgetMb = memoryMb === undefined ? Math.floor(os.totalmem() / 2 / MB) : Number(memoryMb);
  if (!Number.isFinite(budgetMb) || budgetMb <= 0) {
    process.stderr.write(`warmpool worker: --memory-mb must be a positive number of megabytes (got '${memoryMb}')\n`);
    return 2;
  }
  const host = createThreadHost();
  const { PoolWorker } = await import('./pool-worker.ts').catch(async (err: unknown) => {
    await host.close();
    throw err;
  });
  const log = createLogger(config.logLevel, { role: 'worker', pool });
  const missing = missingPoolWorkerEnv(process.env, typeof collectGarbage() === 'function', process.platform);
  if (missing.length > 0) {
    log.warn(
      { missing },
      'started without what a pool worker runs with: evicted models may leave memory behind (infra/fleet/pool-worker-env.ts)',
    );
  }
  const store = lazyObjectStore(async () => (await import('../infra/registry/s3-object-store.ts')).createS3ObjectStore(config.s3));
  const bulkStores = lazyBulkStores(config.s3);
  const worker = new PoolWorker(
    {
      config,
      redis: createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error')),
      registry: createModelRegistry({ store, prefix: config.s3.prefix }),
      host,
      clock: systemClock,
      log,
      storeFor: bulkStores.storeFor,
      ...(collectGarbage() ? { collect: collectGarbage() } : {}),
    },
    { pool, memoryBudgetBytes: Math.floor(budgetMb * MB) },
  );
  return runWorker(worker, { config, log, close: () => closeStores(store, bulkStores) });
}

const MB = 1024 * 1024;

/** V8's full collection where the process runs with --expose-gc, else undefined. */
function collectGarbage(): (() => void) | undefined {
  const gc = (globalThis as { gc?: () => void }).gc;
  return typeof gc === 'function' ? () => gc() : undefined;
}

function closeStores(store: { close(): void }, bulkStores: { close(): void }): void {
  store.close();
  bulkStores.close();
}

/**
 * Stores for bulk parts by bucket over one factory (infra/bulk), which is imported, with the
 * bulk subsystem and the AWS SDK, when the first part is written: most workers never write one.
 */
function lazyBulkStores(s3: Config['s3']): { storeFor(bucket: string): ObjectStore; close(): void } {
  let factory: Promise<ReturnType<typeof createStoreFactory>> | undefined;
  let closed = false;
  const load = () => {
    if (closed) return Promise.reject(new Error('the bulk store factory is closed'));
    factory ??= import('../infra/registry/store-factory.ts').then((m) => m.createStoreFactory(s3));
    return factory;
  };
  return {
    storeFor: (bucket) => lazyObjectStore(async () => (await load()).storeFor(bucket)),
    close() {
      closed = true;
      factory?.then(
        (f) => f.close(),
        () => undefined,
      );
    },
  };
}

/** Unset or empty = active; anything but the two names is a mistake worth refusing. */
function startAsFromEnv(value: string | undefined): 'active' | 'standby' | undefined {
  if (value === undefined || value === '' || value === 'active') return 'active';
  return value === 'standby' ? 'standby' : undefined;
}
