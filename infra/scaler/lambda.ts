/**
 * The scaler on AWS Lambda (serverless.yml): an EventBridge schedule invokes it once a minute
 * and each invocation runs one controller tick (controller.ts `tick()`), the same pass the
 * `warmpool scaler` process runs on its own timer. Config is read and connections are opened on
 * the first invocation, not at import (a cold start with a bad variable fails that invocation,
 * naming the variable), then reused while the execution environment lives.
 *
 * What makes a tick per invocation safe:
 *   - the controller keeps what it must remember in Redis (policy memory, measurements, leader
 *     lock), so a fresh execution environment carries on where the last one stopped;
 *   - the lock identity is the function's name, not the host's: with reserved concurrency 1 only
 *     one environment runs at a time, and a new one renews its predecessor's lock at once instead
 *     of waiting out the TTL; a `warmpool scaler` process elsewhere still never acts beside it;
 *   - `SCALER_TICK_MS` must equal the schedule's period (serverless.yml sets both): the
 *     controller sizes its forecast horizon, lock TTL and metrics TTL from it.
 * What a provider keeps in memory (e.g. start-as states queued for launching workers) lives as
 * long as the environment; losing it costs one tick of correction (see the providers' headers).
 */

import type { PoolProvider } from '../contracts/pool.ts';
import { loadConfig } from '../kernel/config.ts';
import { closeAll, once } from '../kernel/lifecycle.ts';
import { createLogger } from '../kernel/log.ts';
import { closeRedis, createRedis } from '../redis/client.ts';
import type { ScalerController } from './controller.ts';
import { createPoolProvider, createScaler } from './main.ts';

export interface ScalerTickResult {
  /** Whether this invocation held the leader lock (a follower does nothing). */
  leader: boolean;
  tookMs: number;
}

export interface ScalerLambda {
  /** One tick; the first call reads config and connects. */
  handle(): Promise<ScalerTickResult>;
  /** Releases the lock and closes connections (tests; Lambda itself just freezes the process). */
  close(): Promise<void>;
}

interface Runtime {
  controller: ScalerController;
  close(): Promise<void>;
}

/** A handler over `env`, read on the first call (the Lambda's process.env by default). */
export function createScalerLambda(env: NodeJS.ProcessEnv = process.env): ScalerLambda {
  let runtime: Promise<Runtime> | undefined;
  const start = (): Promise<Runtime> => {
    runtime ??= startRuntime(env).catch((err: unknown) => {
      runtime = undefined; // The next invocation tries again (e.g. a variable fixed meanwhile).
      throw err;
    });
    return runtime;
  };
  return {
    async handle() {
      const { controller } = await start();
      const started = Date.now();
      await controller.tick();
      return { leader: controller.isLeader(), tookMs: Date.now() - started };
    },
    close: once(async () => {
      const current = await runtime?.catch(() => undefined);
      await current?.close();
    }),
  };
}

async function startRuntime(env: NodeJS.ProcessEnv): Promise<Runtime> {
  const config = loadConfig(env);
  const log = createLogger(config.logLevel, { role: 'scaler-lambda' });
  const redis = createRedis(config.redisUrl, {}, (err) => log.warn({ err: err.message }, 'redis connection error'));
  let provider: PoolProvider;
  try {
    provider = await createPoolProvider(config, log, config.scaler.provider, redis);
  } catch (err) {
    await closeRedis(redis);
    throw err;
  }
  const scaler = createScaler(config, log, provider, { identity: `lambda:${env.AWS_LAMBDA_FUNCTION_NAME ?? 'warmpool-scaler'}` }, redis);
  log.info({ provider: provider.name, tickMs: config.scaler.tickMs }, 'scaler lambda ready');
  return {
    controller: scaler.controller,
    close: () =>
      closeAll([
        ['scaler', () => scaler.close()],
        ['provider', () => provider.close()],
        ['redis', () => closeRedis(redis)],
      ]),
  };
}

const lambda = createScalerLambda();

/** The Lambda entry (serverless.yml `functions.scaler`): one tick per scheduled invocation. */
export const scalerLambdaHandler = (): Promise<ScalerTickResult> => lambda.handle();
