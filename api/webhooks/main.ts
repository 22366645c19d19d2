/**
 * `warmpool dispatcher`: the webhook dispatcher process (issue 3 §3), which also runs the canary
 * guard (infra/canary: both read the queues' events streams, neither is on a request's path).
 * `startDispatcher` is the same thing without signal handling, for `warmpool dev` in-process.
 */
import { systemClock } from '../../infra/clock.ts';
import type { Config } from '../../infra/config.ts';
import { closeAll, onShutdownSignals } from '../../infra/lifecycle.ts';
import { createLogger, type Logger } from '../../infra/log.ts';
import { closeRedis, createRedis } from '../../infra/redis.ts';
import { createCanaryGuard } from '../../infra/canary/index.ts';
import { createDeploymentStore } from '../../infra/deployments.ts';
import { createDispatcher } from './dispatcher.ts';

export interface RunningDispatcher {
  /** Drains attempts in flight, then closes its connections; idempotent. */
  close(): Promise<void>;
}

export function startDispatcher(config: Config, log: Logger): RunningDispatcher {
  const redis = createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error'));
  const dispatcher = createDispatcher({
    redis,
    prefix: config.queuePrefix,
    clock: systemClock,
    config: config.webhooks,
    log,
  });
  dispatcher.start();
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
  let closing: Promise<void> | undefined;
  return {
    close() {
      closing ??= closeAll([
        ['canary', () => guard.close()],
        ['dispatcher', () => dispatcher.close()],
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
    onShutdownSignals({
      drain: async () => {
        await running.close();
        resolve(0);
      },
      force: (signal) => log.warn({ signal }, 'forced exit'),
    });
  });
}
