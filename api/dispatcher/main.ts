/**
 * `warmpool dispatcher`: the webhook dispatcher process (issue 3 §3), which also runs the canary
 * guard (infra/canary: both read the queues' events streams, neither is on a request's path) and
 * the bulk run supervisor (infra/bulk: it drives API-created runs, and adopts any run whose
 * driver's lease lapsed; a run's webhook events go into this dispatcher's delivery store).
 * `startDispatcher` is the same thing without signal handling, for `warmpool dev` in-process.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { Registry } from 'prom-client';
import { createBulkWiring, startBulkSupervisor } from '../../infra/bulk/index.ts';
import { createCanaryGuard } from '../../infra/canary/index.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import type { Config } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import { closeAll, onShutdownSignals } from '../../infra/kernel/lifecycle.ts';
import { createLogger, type Logger } from '../../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { metricsKey } from '../../infra/redis/keys.ts';
import { publishMetricsSnapshot } from '../../infra/telemetry/metrics.ts';
import { BULK_PROGRESS_WEBHOOK_INTERVAL_MS, createBulkNotifier } from '../webhooks/bulk-notifier.ts';
import { createWebhookMetrics } from '../webhooks/delivery-metrics.ts';
import { createDispatcher } from '../webhooks/dispatcher.ts';

/** How often the dispatcher's webhook metrics are published for the API's /metrics. */
const METRICS_PUBLISH_MS = 5_000;

/**
 * SIGTERM's drain limit: the dispatcher holds no work a longer wait would save (an attempt cut
 * short is retried; a bulk drive's lease lapses and another supervisor adopts the run), and a
 * drain waiting on an unreachable Redis must not keep it running.
 */
const DISPATCHER_DRAIN_LIMIT_MS = 10_000;

export interface RunningDispatcher {
  /** Drains attempts in flight, then closes its connections; idempotent. */
  close(): Promise<void>;
}

export interface DispatcherOptions {
  /** Minimum time between two `bulk.progress` webhooks of a run this dispatcher drives. Default 10 s. */
  bulkProgressIntervalMs?: number;
}

export function startDispatcher(config: Config, log: Logger, options: DispatcherOptions = {}): RunningDispatcher {
  const redis = createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error'));
  // Unique per process: a restarted dispatcher must not mistake its predecessor's leases for its own.
  const owner = `dispatcher:${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const registry = new Registry();
  const dispatcher = createDispatcher({
    redis,
    prefix: config.queuePrefix,
    clock: systemClock,
    config: config.webhooks,
    log,
    metrics: createWebhookMetrics(registry),
    // The bound the API's answers and event streams keep (config.api): a job webhook carries what its event does.
    maxJsonOutputElements: config.api.maxJsonOutputElements,
  });
  dispatcher.start();
  // The API's /metrics merges this snapshot with the workers' and the scaler's.
  const metricsTtlMs = 3 * METRICS_PUBLISH_MS;
  const publish = () =>
    publishMetricsSnapshot(redis, metricsKey(config.queuePrefix, owner.replaceAll(':', '-')), registry, metricsTtlMs).catch(
      (err: unknown) => log.debug({ err: errorMessage(err) }, 'dispatcher metrics not published'),
    );
  const publisher = setInterval(publish, METRICS_PUBLISH_MS);
  publisher.unref();
  const { enabled, tickMs, ...policy } = config.canary;
  const guard = createCanaryGuard({
    redis,
    prefix: config.queuePrefix,
    deployments: createDeploymentStore(redis, config.queuePrefix),
    clock: systemClock,
    log: log.child({ component: 'canary' }),
    policy,
    tickMs,
  });
  if (enabled) guard.start();
  const bulk = createBulkWiring(config, {
    redis,
    log: log.child({ component: 'bulk' }),
    notify: createBulkNotifier({ store: dispatcher.store, clock: systemClock }),
  });
  const supervisor = startBulkSupervisor(bulk.deps, {
    owner,
    drive: { webhookIntervalMs: options.bulkProgressIntervalMs ?? BULK_PROGRESS_WEBHOOK_INTERVAL_MS },
  });
  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= closeAll([
        // First: a driver mid-run may still notify into the dispatcher's store.
        ['bulk-supervisor', () => supervisor.close()],
        ['metrics', () => clearInterval(publisher)],
        ['canary', () => guard.close()],
        ['dispatcher', () => dispatcher.close()],
        ['bulk-s3', () => bulk.close()],
        ['redis', () => closeRedis(redis)],
      ]);
      return closing;
    },
  };
}

/** Runs until SIGINT/SIGTERM; resolves with the exit code. */
export async function dispatcherMain(config: Config): Promise<number> {
  const log = createLogger(config.logLevel, { role: 'dispatcher' });
  const running = startDispatcher(config, log);
  return new Promise<number>((resolve) => {
    onShutdownSignals(
      {
        drain: async () => {
          await running.close();
          resolve(0);
        },
        force: (signal, reason) => log.warn({ signal, reason }, 'forced exit'),
      },
      { forceAfterMs: DISPATCHER_DRAIN_LIMIT_MS },
    );
  });
}
