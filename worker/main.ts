/**
 * `warmpool worker --model M [--version V] [--standby]`: the worker process's one entry. Reads
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
import { parseArgs } from 'node:util';
import { systemClock } from '../infra/kernel/clock.ts';
import type { Config } from '../infra/kernel/config.ts';
import { onShutdownSignals } from '../infra/kernel/lifecycle.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createRedis } from '../infra/redis/client.ts';
import { lazyObjectStore } from '../infra/registry/lazy-object-store.ts';
import { createModelRegistry } from '../infra/registry/model-registry.ts';
import type { ObjectStore } from '../infra/registry/object-store.ts';
import type { createStoreFactory } from '../infra/registry/store-factory.ts';
import { createThreadEngine } from './engine/thread-engine.ts';
import { type HealthServer, startHealthServer } from './health-server.ts';

export async function workerMain(args: string[], config: Config, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { model: { type: 'string' }, version: { type: 'string' }, standby: { type: 'boolean' } },
    strict: true,
  });
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
  process.on('SIGUSR2', () => {
    void worker.diagnostics().then((d) => log.warn(d, 'diagnostics'));
  });
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
    store.close();
    bulkStores.close();
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
  store.close();
  bulkStores.close();
  return code;
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
