/**
 * A warmpool stack for integration tests on the real services: config from testEnv(), the
 * API served in-process on a free port, workers as real child processes (`warmpool worker`),
 * so a test can SIGKILL one. Everything it starts is stopped by close().
 */

import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { type ApiServer, startApiServer } from '../../api/main.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { createDeploymentStore, type DeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { type Config, loadConfig } from '../../infra/kernel/config.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry, type ModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { stopChild } from '../../scripts/dev/stop-child.ts';
import { testEnv } from './services.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

export interface TestStack {
  env: NodeJS.ProcessEnv;
  config: Config;
  registry: ModelRegistry;
  deployments: DeploymentStore;
  api: ApiServer;
  /** fetch against the API with tenant-a's key unless told otherwise. */
  call(path: string, init?: RequestInit & { key?: string | null }): Promise<Response>;
  startWorker(model: string, version: string, extraEnv?: Record<string, string>): Promise<ChildProcess>;
  /**
   * Submits `count` jobs of `rows` rows of `features` FP32 values each through the API (202
   * expected; the data is a fixed function of the job index) and returns their ids.
   */
  submitMany(model: string, count: number, options: { features: number; rows?: number }): Promise<string[]>;
  /** BullMQ's own view of a model version's queue, opened for `fn` and closed after. */
  withQueue<T>(model: string, version: string, fn: (queue: Queue) => Promise<T>): Promise<T>;
  /** Resolves when `count` workers of the model report `state` in their heartbeats. */
  waitForWorkers(model: string, state: string, count?: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export const KEY_A = 'key-aaaaaaaaaaaaaaaa';
export const KEY_B = 'key-bbbbbbbbbbbbbbbb';

export async function startStack(overrides: Record<string, string> = {}): Promise<TestStack> {
  // Suites that flood the API are about workers, not limits (test/api-jobs.test.ts tests 429).
  const env = testEnv({ PORT: '0', RATE_LIMIT_RPS: '100000', RATE_LIMIT_BURST: '100000', ...overrides });
  const config = loadConfig(env);
  const store = createS3ObjectStore(config.s3);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  const redis = createRedis(config.redisUrl);
  const deployments = createDeploymentStore(redis, config.queuePrefix);
  const api = await startApiServer(config, createLogger(config.logLevel, { role: 'api-test' }));
  const children: ChildProcess[] = [];

  const stack: TestStack = {
    env,
    config,
    registry,
    deployments,
    api,
    call(path, init = {}) {
      const { key = KEY_A, ...rest } = init;
      const headers = new Headers(rest.headers);
      if (key !== null) headers.set('authorization', `Bearer ${key}`);
      if (rest.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${api.url}${path}`, { ...rest, headers });
    },
    async startWorker(model, version, extraEnv = {}) {
      const child = spawn(process.execPath, [BIN, 'worker', '--model', model, '--version', version], {
        env: { ...env, ...extraEnv },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      children.push(child);
      return child;
    },
    submitMany(model, count, { features, rows = 1 }) {
      return Promise.all(
        Array.from({ length: count }, async (_, i) => {
          const data = Array.from({ length: rows * features }, (_, k) => Math.sin(i + k));
          const res = await stack.call(`/v1/models/${model}/jobs`, {
            method: 'POST',
            body: JSON.stringify({ inputs: [{ name: 'features', shape: [rows, features], datatype: 'FP32', data }] }),
          });
          if (res.status !== 202) throw new Error(`submit to ${model} answered ${res.status}: ${await res.text()}`);
          return ((await res.json()) as { id: string }).id;
        }),
      );
    },
    async withQueue(model, version, fn) {
      const connection = createRedis(config.redisUrl);
      // skipMetasUpdate: a reader must not reset the events stream's maxLen (infra/queue/queue-stats.ts).
      const queue = new Queue(queueName(model, version), { connection, prefix: config.queuePrefix, skipMetasUpdate: true });
      try {
        return await fn(queue);
      } finally {
        await queue.close();
        await closeRedis(connection);
      }
    },
    async waitForWorkers(model, state, count = 1, timeoutMs = 60_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const beats = (await listHeartbeats(redis, config.queuePrefix)).filter((b) => b.model === model);
        if (beats.filter((b) => b.state === state).length >= count) return;
        const failed = beats.find((b) => b.state === 'failed');
        if (failed) throw new Error(`a worker of ${model} failed to start: ${failed.error ?? 'no reason given'}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`timed out waiting for ${count} ${state} worker(s) of ${model}`);
    },
    async close() {
      await Promise.all(children.map((c) => stopChild(c)));
      await api.close();
      await closeRedis(redis);
      store.close();
    },
  };
  return stack;
}

/** Polls GET /v1/jobs/{id} until the job is terminal. */
export async function waitForJob(stack: TestStack, id: string, timeoutMs = 60_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  // From 50 ms, a quarter longer each time, to 1 s: tests wait on hundreds of jobs at once, and
  // a fixed 50 ms had the API in their process answer thousands of polls a second.
  for (let pauseMs = 50; Date.now() < deadline; pauseMs = Math.min(1_000, pauseMs * 1.25)) {
    const res = await stack.call(`/v1/jobs/${id}`);
    const body = (await res.json()) as Record<string, unknown>;
    if (['succeeded', 'failed', 'canceled'].includes(String(body.status))) return body;
    await new Promise((r) => setTimeout(r, pauseMs));
  }
  throw new Error(`job ${id} did not finish in ${timeoutMs} ms`);
}
