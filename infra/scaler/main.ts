/**
 * `warmpool scaler [--shadow]`: the scaler process (DESIGN §2, §8). Wires Redis, the deployment
 * store, the arrival history, the queue stats, the forecaster, the policy and a pool provider
 * into the controller (controller.ts), and drains on SIGINT/SIGTERM (infra/kernel/lifecycle.ts).
 * `startScaler` is the same without signal handling, for `warmpool dev` in-process.
 *
 * Pool provider (`POOL_PROVIDER`, createPoolProvider): `local` (default) forks worker processes
 * on this machine; `kubernetes` scales the Deployments `warmpool-<model>-<version>` in
 * `K8S_NAMESPACE` (infra/pool/k8s-provider.ts; KUBECONFIG, ~/.kube/config or the pod's service
 * account); `aws` the Auto Scaling groups `warmpool-<model>-<version>` and their warm pools
 * (infra/pool/asg-provider.ts; the AWS SDK's default credential chain, AWS_REGION).
 * `--shadow` needs no provider at all: it decides and records, and touches no worker.
 *
 * Shared pools (pool-controller.ts) are scaled by the same process, in the same tick and under the
 * same lock; `startScaler` also subscribes to their demand doorbell, so a first request for a model
 * no pool worker holds is placed at once (the Lambda ticks only: its placements wait for a tick).
 *
 * Settings come from the config's `scaler` section (infra/kernel/config.ts, its variables and
 * defaults), under the explicit options of `ScalerOptions`.
 */
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Registry } from 'prom-client';
import { beatBelongsTo, type PoolProvider, type PoolTarget, type Tuner } from '../contracts/pool.ts';
import { createDeploymentStore } from '../deployments/deployment-store.ts';
import { createSharedPoolStore } from '../deployments/pool-store.ts';
import { type ControlCommand, sendControl } from '../fleet/worker-control.ts';
import { listHeartbeats } from '../fleet/worker-states.ts';
import { systemClock } from '../kernel/clock.ts';
import { type Config, POOL_PROVIDERS } from '../kernel/config.ts';
import { ConfigError } from '../kernel/errors.ts';
import { closeAll, once, onShutdownSignals, supervisorDrainLimitMs } from '../kernel/lifecycle.ts';
import { createLogger, type Logger } from '../kernel/log.ts';
import { createLocalProvider, loadAsgProvider, loadKubernetesProvider } from '../pool/index.ts';
import { createQueueStats } from '../queue/index.ts';
import { closeRedis, createRedis, duplicateClient, type RedisClient } from '../redis/client.ts';
import { createArrivalHistory } from '../telemetry/arrival-history.ts';
import { createScalerController, DEFAULT_HISTORY_WINDOW_MS, type ScalerController, scalerIdentity } from './controller.ts';
import { forecastArrivals } from './forecast.ts';
import { decide } from './policy.ts';
import { createPoolController, type PoolController, redisHoldings } from './pool-controller.ts';
import { planPool } from './pool-plan.ts';
import { scalerSettingsFrom } from './settings.ts';

const WORKER_BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));
export type PoolProviderName = Config['scaler']['provider'];

/** The config's `scaler` settings a caller overrides, and how this process runs. */
export interface ScalerOptions extends Partial<Config['scaler']> {
  shadow?: boolean;
  /** Arrival history read per tick (controller.ts default: 8 days). */
  historyWindowMs?: number;
  /**
   * Where retunes run when SCALER_SELF_TUNING is on: the simulator's tuner (a worker thread), which
   * the caller composes in (this tier cannot import the simulator: it sits above the scaler).
   */
  createTuner?: () => Tuner;
}

export interface RunningScaler {
  controller: ScalerController;
  /** The shared pools' controller, ticked by `controller`. */
  pools: PoolController;
  /** The connection both use (the caller's when it gave one). */
  redis: RedisClient;
  /** Stops ticking, releases the leader lock, closes its connections (not the provider); idempotent. */
  close(): Promise<void>;
}

/** The config's `scaler` section under explicit options. */
export function scalerSettingsOf(config: Config, options: ScalerOptions = {}): Config['scaler'] {
  const { shadow: _shadow, historyWindowMs: _window, createTuner: _tuner, ...explicit } = options;
  return { ...config.scaler, ...explicit };
}

/**
 * Starts the controller with the given provider (the caller's: it closes it). `provider` may be
 * undefined only with `shadow`.
 */
export function startScaler(config: Config, log: Logger, provider: PoolProvider | undefined, options: ScalerOptions = {}): RunningScaler {
  const scaler = createScaler(config, log, provider, options);
  scaler.controller.start();
  if (!(options.shadow ?? false)) {
    // A subscribed connection does nothing else: its own, closed with the scaler.
    const subscriber = duplicateClient(scaler.redis);
    scaler.pools
      .listen(subscriber)
      .catch((err) => log.warn({ err }, "scaler: cannot hear the shared pools' demand; placements wait for a tick"));
    const close = scaler.close;
    return {
      ...scaler,
      close: once(() =>
        closeAll([
          ['scaler', close],
          ['demand-subscriber', () => closeRedis(subscriber)],
        ]),
      ),
    };
  }
  return scaler;
}

/**
 * The controller wired to its Redis-backed inputs, not yet ticking: `startScaler` starts it on a
 * timer, the scaler Lambda (lambda.ts) ticks it once per invocation. `redis`, when given, is the
 * caller's (not closed here); otherwise the scaler opens and closes its own connection.
 */
export function createScaler(
  config: Config,
  log: Logger,
  provider: PoolProvider | undefined,
  options: ScalerOptions & { identity?: string } = {},
  shared?: ReturnType<typeof createRedis>,
): RunningScaler {
  const s = scalerSettingsOf(config, options);
  const redis = shared ?? createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error'));
  const queueStats = createQueueStats({ redis, prefix: config.queuePrefix, clock: systemClock });
  if (s.selfTuning && !options.createTuner)
    log.warn("SCALER_SELF_TUNING is set, but this process has no tuner: each deployment's own policy decides");
  const tuner = s.selfTuning ? options.createTuner?.() : undefined;
  const shadow = options.shadow ?? false;
  const deployments = createDeploymentStore(redis, config.queuePrefix);
  const history = createArrivalHistory(redis, config.queuePrefix, systemClock);
  const identity = options.identity ?? scalerIdentity();
  // One registry for both controllers: the leader publishes it as the scaler's snapshot.
  const registry = new Registry();
  let controller: ScalerController | undefined;
  const pools = createPoolController({
    redis,
    prefix: config.queuePrefix,
    pools: createSharedPoolStore(redis, config.queuePrefix),
    deployments,
    history,
    lateSloMs: config.scaler.sloQueueWaitMs,
    queueStats,
    ...(provider ? { provider, holdings: redisHoldings(redis, config.queuePrefix, systemClock) } : {}),
    forecast: forecastArrivals,
    plan: planPool,
    clock: systemClock,
    log: log.child({ component: 'pool-controller' }),
    settings: scalerSettingsFrom(s),
    shadow,
    tickMs: s.tickMs,
    historyWindowMs: options.historyWindowMs ?? DEFAULT_HISTORY_WINDOW_MS,
    identity,
    isLeader: () => controller?.isLeader() ?? false,
    metrics: registry,
  });
  controller = createScalerController({
    redis,
    prefix: config.queuePrefix,
    deployments,
    history,
    // The workers count late rows against SLO_QUEUE_WAIT_MS, whatever this process's flags say.
    lateSloMs: config.scaler.sloQueueWaitMs,
    queueStats,
    ...(provider ? { provider } : {}),
    forecast: forecastArrivals,
    decide,
    clock: systemClock,
    log,
    settings: scalerSettingsFrom(s),
    shadow,
    tickMs: s.tickMs,
    ...(options.historyWindowMs ? { historyWindowMs: options.historyWindowMs } : {}),
    identity,
    pools,
    ...(tuner ? { tuning: { tuner, retuneIntervalMs: s.retuneIntervalMs, cpuBudgetMs: s.tuningCpuMs } } : {}),
    metrics: registry,
  });
  const running = controller;
  return {
    controller: running,
    pools,
    redis,
    close: once(() =>
      closeAll([
        ['scaler', () => running.close()],
        ['pool-controller', () => pools.close()],
        ['tuner', () => tuner?.close()],
        ['queue-stats', () => queueStats.close()],
        ['redis', () => (shared ? undefined : closeRedis(redis))],
      ]),
    ),
  };
}

/** The provider POOL_PROVIDER names (see the header). */
export async function createPoolProvider(
  config: Config,
  log: Logger,
  name: PoolProviderName,
  redis: ReturnType<typeof createRedis>,
): Promise<PoolProvider> {
  // What the cloud providers share with the workers: the control channel and the heartbeats.
  const control = (workerId: string, command: ControlCommand) => sendControl(redis, config.queuePrefix, workerId, command);
  const heartbeats = async (t: PoolTarget) => (await listHeartbeats(redis, config.queuePrefix)).filter((b) => beatBelongsTo(b, t));
  const onError = (err: unknown) => log.warn({ err }, 'pool provider: a drain will be retried');
  switch (name) {
    case 'local':
      return createLocalProvider({
        command: [process.execPath, WORKER_BIN, 'worker'],
        env: process.env,
        redis,
        prefix: config.queuePrefix,
        clock: systemClock,
        log: log.child({ component: 'local-provider' }),
      });
    case 'kubernetes': {
      // Loaded only here: the Kubernetes client is large and only this provider needs it.
      const { KubeConfig } = await import('@kubernetes/client-node');
      const { createKubernetesProvider } = await loadKubernetesProvider();
      const kubeConfig = new KubeConfig();
      kubeConfig.loadFromDefault(); // KUBECONFIG, ~/.kube/config, or the pod's service account
      return createKubernetesProvider({ kubeConfig, namespace: config.scaler.k8sNamespace, control, heartbeats, onError });
    }
    case 'aws': {
      const { AutoScalingClient } = await import('@aws-sdk/client-auto-scaling');
      const { createAsgProvider } = await loadAsgProvider();
      // Credentials from the AWS SDK's default chain, like S3's.
      const client = new AutoScalingClient({ region: config.s3.region });
      return createAsgProvider({ client, control, heartbeats, onError });
    }
    default:
      throw new ConfigError('invalid_config', `POOL_PROVIDER: unknown provider "${String(name)}" (known: ${POOL_PROVIDERS.join(', ')})`);
  }
}

/** `warmpool scaler [--shadow]`: runs until SIGINT/SIGTERM; resolves with the exit code. */
export async function scalerMain(args: string[], config: Config, options: ScalerOptions = {}): Promise<number> {
  const { values } = parseArgs({ args, options: { shadow: { type: 'boolean' } }, strict: true });
  const shadow = values.shadow ?? options.shadow ?? false;
  const log = createLogger(config.logLevel, { role: shadow ? 'scaler-shadow' : 'scaler' });
  const s = scalerSettingsOf(config, options);
  const providerRedis = shadow
    ? undefined
    : createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error'));
  let provider: PoolProvider | undefined;
  try {
    provider = providerRedis ? await createPoolProvider(config, log, s.provider, providerRedis) : undefined;
  } catch (err) {
    if (providerRedis) await closeRedis(providerRedis);
    throw err;
  }
  const running = startScaler(config, log, provider, { ...options, shadow });
  log.info({ shadow, provider: provider?.name ?? 'none', tickMs: s.tickMs, selfTuning: s.selfTuning }, 'scaler started');
  return new Promise<number>((resolve) => {
    onShutdownSignals(
      {
        drain: async () => {
          await closeAll([
            ['scaler', () => running.close()],
            ['provider', () => provider?.close()],
            ['provider-redis', () => (providerRedis ? closeRedis(providerRedis) : undefined)],
          ]);
          resolve(0);
        },
        force: (signal, reason) => log.warn({ signal, reason }, 'forced exit'),
      },
      { forceAfterMs: supervisorDrainLimitMs(config.worker.drainLimitMs) },
    );
  });
}
