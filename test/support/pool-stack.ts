/**
 * A shared pool wired as `warmpool dev` wires it, for the end-to-end pool tests: the test stack
 * (API, real Redis/S3), a shared pool with every model deployed into it, the scaler with its pool
 * controller, and the local provider forking real `warmpool worker --pool` processes. Each model
 * has an ONNX Runtime session in the test's own process, so a test can check every answer against
 * ONNX Runtime for that model.
 */

import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import type { PoolProvider } from '../../infra/contracts/pool.ts';
import type { SharedPoolConfig } from '../../infra/contracts/shared-pool.ts';
import { createSharedPoolStore } from '../../infra/deployments/pool-store.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { createLocalProvider } from '../../infra/pool/local-provider.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { type RunningScaler, startScaler } from '../../infra/scaler/main.ts';
import { startStack, type TestStack } from './stack.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

export interface PoolStack {
  stack: TestStack;
  /** The test's own connection (heartbeats, stores); closed by close(). */
  redis: RedisClient;
  provider: PoolProvider;
  scaler: RunningScaler;
  /** The pool's workers' heartbeats (a stopped one's last beat included until its TTL). */
  beats(): Promise<HeartbeatPayload[]>;
  /** ONNX Runtime's answer for `model` on one row of FP32 `features`: its `score` output. */
  expectedScore(model: string, row: number[]): Promise<number>;
  close(): Promise<void>;
}

export interface PoolStackOptions {
  pool: string;
  config: SharedPoolConfig;
  /** Each model's name and bytes: an MLP with a `features` input and a `score` output. */
  models: ReadonlyArray<{ name: string; bytes: Uint8Array }>;
  /** Environment over the test stack's (ticks, heartbeats, warm-up). */
  env: Record<string, string>;
}

export async function startPoolStack(o: PoolStackOptions): Promise<PoolStack> {
  const stack = await startStack(o.env);
  const redis = createRedis(stack.config.redisUrl);
  const prefix = stack.config.queuePrefix;
  const sessions = new Map<string, ort.InferenceSession>();
  await createSharedPoolStore(redis, prefix).put({ name: o.pool, ...o.config });
  for (const { name, bytes } of o.models) {
    await stack.registry.publish({ name, version: '1', bytes, maxBatch: 8, warmupBatches: [1, 8] });
    await stack.deployments.put({ model: name, version: '1', min: 0, max: 1, standby: 0, pool: o.pool });
    sessions.set(name, await ort.InferenceSession.create(bytes));
  }
  const provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    env: stack.env,
    redis,
    prefix,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });
  const scaler = startScaler(stack.config, createLogger('silent'), provider);
  let closed: Promise<void> | undefined;
  return {
    stack,
    redis,
    provider,
    scaler,
    beats: async () => (await listHeartbeats(redis, prefix)).filter((b) => b.pool === o.pool),
    async expectedScore(model, row) {
      const session = sessions.get(model);
      if (!session) throw new Error(`no session for ${model}`);
      const out = await session.run({ features: new ort.Tensor('float32', Float32Array.from(row), [1, row.length]) });
      return (out.score as ort.Tensor).data[0] as number;
    },
    close() {
      closed ??= (async () => {
        await scaler.close();
        await provider.close();
        await closeRedis(redis);
        for (const s of sessions.values()) await s.release();
        await stack.close();
      })();
      return closed;
    },
  };
}
