/**
 * The stack one chaos scenario runs against, all of it owned by the scenario so it can break
 * any part: its own redis-server (AOF on when asked) and S3-protocol server on fixed ports in a
 * folder of its own (so either can be stopped and started again on the same port and data),
 * the API in this process, and workers as real child processes (`warmpool worker`) that can be
 * SIGKILLed. Never the test suite's shared services: stopping those would break other suites.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ApiServer, startApiServer } from '../../api/main.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { type Config, loadConfig } from '../../infra/kernel/config.ts';
import { type Closer, closeAll } from '../../infra/kernel/lifecycle.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry } from '../../infra/registry/model-registry.ts';
import type { ObjectStore } from '../../infra/registry/object-store.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { freePort } from '../dev/free-port.ts';
import { type RedisClusterHandle, startRedisCluster } from '../dev/redis-cluster.ts';
import { ensureRedisServer, type RedisServerHandle, startRedisServer } from '../dev/redis-server.ts';
import { type S3ServerHandle, startS3Server } from '../dev/s3-server.ts';
import { stopChild } from '../dev/stop-child.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));
export const CHAOS_KEY = 'chaos-key-0123456789';
export const FEATURES = 16;
export const CHAOS_BUCKET = 'warmpool-chaos';

export interface ChaosStackOptions {
  /** A fresh folder: Redis data, S3 objects, the model cache and worker logs go under it. */
  dir: string;
  /** Variables for the API and every worker, over the chaos defaults. */
  env?: Record<string, string>;
  /** Redis persistence; off unless asked. */
  appendonly?: boolean;
  appendfsync?: 'always' | 'everysec' | 'no';
  /** One redis-server (default), or a local 3-master Redis Cluster (`npm run chaos -- --redis cluster`). */
  redis?: RedisTopology;
  log: (line: string) => void;
}

export type RedisTopology = 'single' | 'cluster';
export const CLUSTER_MASTERS = 3;

/** A server the scenario can stop and start again on the same port and data. */
export interface Restartable {
  readonly running: boolean;
  stop(signal?: 'SIGKILL' | 'SIGTERM' | 'graceful'): Promise<void>;
  start(): Promise<void>;
}

export interface ChaosStack {
  env: NodeJS.ProcessEnv;
  config: Config;
  api: ApiServer;
  /** On a cluster, stop/start act on every node; `cluster` reaches single nodes. */
  redis: Restartable & { url: string; cluster?: RedisClusterHandle };
  s3: Restartable;
  /** The chaos bucket (S3_BUCKET), keys relative to it: a scenario's own objects and listings. */
  objects: ObjectStore;
  /** fetch against the API with the chaos tenant's key. */
  call(urlPath: string, init?: RequestInit): Promise<Response>;
  /** Publishes a small MLP as `name` version 1 and deploys it; returns its manifest. */
  deployModel(name: string): Promise<ModelManifest>;
  /** Publishes `bytes` as `name` `version` (not deployed). */
  publishModel(name: string, version: string, bytes: Uint8Array, maxBatch?: number): Promise<ModelManifest>;
  /** A `warmpool worker` of `model` `version` ('1' unless named). */
  startWorker(model: string, extraEnv?: Record<string, string>, version?: string): ChildProcess;
  /** Workers started and not yet exited. */
  liveWorkers(): ChildProcess[];
  heartbeats(): Promise<HeartbeatPayload[]>;
  /** Resolves when `count` workers of `model` report `state`. */
  waitForWorkers(model: string, state: string, count?: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startChaosStack(options: ChaosStackOptions): Promise<ChaosStack> {
  const closers: Closer[] = [];
  try {
    return await build(options, closers);
  } catch (err) {
    await closeAll([...closers].reverse()).catch(() => undefined);
    throw err;
  }
}

async function build(options: ChaosStackOptions, closers: Closer[]): Promise<ChaosStack> {
  const redis = options.redis === 'cluster' ? await restartableCluster(options) : await restartableRedis(options);
  closers.push(['redis-server', () => redis.stop('graceful')]);
  const s3 = await restartableS3(path.join(options.dir, 's3'));
  closers.push(['s3-server', () => s3.stop()]);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    REDIS_URL: redis.url,
    QUEUE_PREFIX: 'chaos',
    S3_ENDPOINT: s3.endpoint,
    S3_BUCKET: CHAOS_BUCKET,
    S3_PREFIX: 'chaos',
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: s3.accessKeyId,
    AWS_SECRET_ACCESS_KEY: s3.secretAccessKey,
    MODEL_CACHE_DIR: path.join(options.dir, 'cache'),
    API_KEYS: `chaos:${CHAOS_KEY}`,
    ADMIN_TENANTS: 'chaos',
    HOST: '127.0.0.1',
    PORT: '0',
    // The suite is about faults, not limits: no rate limit in the way of its load.
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    // Fast recovery of a killed worker's jobs (lock expiry + stalled check), fast heartbeats.
    LOCK_DURATION_MS: '5000',
    STALLED_INTERVAL_MS: '2000',
    HEARTBEAT_INTERVAL_MS: '500',
    HEARTBEAT_TTL_MS: '3000',
    WARMUP_ITERATIONS: '2',
    INTRA_OP_THREADS: '1',
    CANARY_ENABLED: 'false',
    LOG_LEVEL: 'warn',
    ...options.env,
  };
  const config = loadConfig(env);
  const store = createS3ObjectStore(config.s3);
  closers.push(['s3-client', () => store.close()]);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  const admin = createRedis(config.redisUrl);
  closers.push(['admin-redis', () => closeRedis(admin)]);
  const deployments = createDeploymentStore(admin, config.queuePrefix);
  const api = await startApiServer(config, createLogger('silent', { role: 'chaos-api' }));
  closers.push(['api', () => api.close()]);
  const workers = workerPool(env, path.join(options.dir, 'logs'));
  closers.push(['workers', () => workers.stopAll()]);

  const stack: ChaosStack = {
    env,
    config,
    api,
    redis,
    s3,
    objects: store,
    call(urlPath, init = {}) {
      const headers = new Headers(init.headers);
      if (!headers.has('authorization')) headers.set('authorization', `Bearer ${CHAOS_KEY}`);
      if (init.body !== undefined && !headers.has('content-type')) headers.set('content-type', 'application/json');
      return fetch(`${api.url}${urlPath}`, { ...init, headers });
    },
    async deployModel(name) {
      const manifest = await stack.publishModel(name, '1', buildMlpModel({ features: FEATURES, hidden: 32, layers: 2 }));
      await deployments.put({ model: name, version: '1', min: 1, max: 8, standby: 0 });
      return manifest;
    },
    publishModel: (name, version, bytes, maxBatch = 64) =>
      registry.publish({ name, version, bytes, maxBatch, warmupBatches: [...new Set([1, Math.min(16, maxBatch), maxBatch])] }),
    startWorker: (model, extraEnv, version) => workers.start(model, extraEnv, version),
    liveWorkers: () => workers.live(),
    heartbeats: () => listHeartbeats(admin, config.queuePrefix),
    async waitForWorkers(model, state, count = 1, timeoutMs = 120_000) {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline) {
        const beats = (await listHeartbeats(admin, config.queuePrefix).catch(() => [])).filter((b) => b.model === model);
        if (beats.filter((b) => b.state === state).length >= count) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`timed out waiting for ${count} ${state} worker(s) of ${model}`);
    },
    close: once(() => closeAll([...closers].reverse())),
  };
  return stack;
}

function once(fn: () => Promise<void>): () => Promise<void> {
  let done: Promise<void> | undefined;
  return () => {
    done ??= fn();
    return done;
  };
}

/** Worker child processes; each one's output goes to a log file of its own. */
function workerPool(env: NodeJS.ProcessEnv, logDir: string) {
  mkdirSync(logDir, { recursive: true });
  const children = new Set<ChildProcess>();
  let n = 0;
  return {
    start(model: string, extraEnv: Record<string, string> = {}, version = '1'): ChildProcess {
      const child = spawn(process.execPath, [BIN, 'worker', '--model', model, '--version', version], {
        env: { ...env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      // Its logs (pino writes to stdout) and anything on stderr, in one file per worker.
      const log = createWriteStream(path.join(logDir, `worker-${++n}.log`));
      child.stdout?.pipe(log, { end: false });
      child.stderr?.pipe(log, { end: false });
      child.once('exit', () => log.end());
      children.add(child);
      child.once('exit', () => children.delete(child));
      return child;
    },
    live: () => [...children],
    async stopAll(): Promise<void> {
      await Promise.all([...children].map((c) => stopChild(c)));
    },
  };
}

async function restartableRedis(options: ChaosStackOptions): Promise<Restartable & { url: string }> {
  const binary = await ensureRedisServer({ install: 'auto', log: options.log });
  const dir = path.join(options.dir, 'redis');
  const port = await freePort();
  const settings = { binary, dir, port, appendonly: options.appendonly, appendfsync: options.appendfsync };
  let handle: RedisServerHandle | undefined = await startRedisServer(settings);
  return {
    url: handle.url,
    get running() {
      return handle !== undefined;
    },
    async stop(signal = 'graceful') {
      const h = handle;
      handle = undefined;
      if (!h) return;
      // A signal is the fault; close() then reaps the process (or shuts down a graceful one).
      if (signal !== 'graceful') process.kill(h.pid, signal);
      await h.close();
    },
    async start() {
      handle ??= await startRedisServer(settings);
    },
  };
}

/** A local cluster whose nodes all stop and start together (each keeps its port, folder and AOF). */
async function restartableCluster(options: ChaosStackOptions): Promise<Restartable & { url: string; cluster: RedisClusterHandle }> {
  const binary = await ensureRedisServer({ install: 'auto', log: options.log });
  const cluster = await startRedisCluster({
    binary,
    dir: path.join(options.dir, 'redis-cluster'),
    masters: CLUSTER_MASTERS,
    appendonly: options.appendonly,
    appendfsync: options.appendfsync,
  });
  const indexes = cluster.nodes.map((_, i) => i);
  return {
    url: cluster.url,
    cluster,
    get running() {
      return indexes.some((i) => cluster.isRunning(i));
    },
    async stop(signal = 'graceful') {
      await Promise.all(indexes.map((i) => cluster.stopNode(i, signal)));
    },
    async start() {
      for (const i of indexes) await cluster.startNode(i);
    },
  };
}

async function restartableS3(directory: string): Promise<Restartable & S3ServerHandle> {
  let handle: S3ServerHandle | undefined = await startS3Server({ directory, buckets: [CHAOS_BUCKET] });
  const first = handle;
  const port = Number(new URL(first.endpoint).port);
  return {
    endpoint: first.endpoint,
    accessKeyId: first.accessKeyId,
    secretAccessKey: first.secretAccessKey,
    get running() {
      return handle !== undefined;
    },
    async stop() {
      const h = handle;
      handle = undefined;
      await h?.close();
    },
    async start() {
      handle ??= await startS3Server({ directory, port, buckets: [CHAOS_BUCKET] });
    },
    close: async () => {
      await handle?.close();
    },
  };
}
