/**
 * What the bench runs on: Redis and S3 (embedded unless REDIS_URL / S3_ENDPOINT are set), the
 * registry, and `warmpool` roles started as child processes, as they run in production. Each
 * measurement gets its own queue prefix so no count mixes with another's.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { type HeartbeatPayload, listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { type Config, loadConfig } from '../../infra/kernel/config.ts';
import { errorMessage } from '../../infra/kernel/errors.ts';
import type { Closer } from '../../infra/kernel/lifecycle.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { createModelRegistry, type ModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { startEmbeddedServices } from '../dev/embedded-services.ts';
import { stopChild } from '../dev/stop-child.ts';

const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

export const BENCH_TENANT = 'bench';
export const BENCH_KEY = 'key-bench-0123456789';

export interface BenchContext {
  /** The environment every process of the bench starts from. */
  env: NodeJS.ProcessEnv;
  registry: ModelRegistry;
  /** Folder for this run's files (model caches, servers' data). */
  dir: string;
  quick: boolean;
  out: (line: string) => void;
  /** Stoppers, in start order (stopped in reverse). */
  closers: Closer[];
}

export async function startBenchContext(
  dir: string,
  quick: boolean,
  out: (line: string) => void,
  closers: Closer[],
): Promise<BenchContext> {
  const stamp = Date.now().toString(36);
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    LOG_LEVEL: 'warn',
    QUEUE_PREFIX: `bench-${stamp}`,
    S3_PREFIX: `bench-${stamp}`,
    API_KEYS: `${BENCH_TENANT}:${BENCH_KEY}`,
    // The bench measures the pipeline, not the per-tenant limiter (its own tests cover it).
    RATE_LIMIT_RPS: '1000000',
    RATE_LIMIT_BURST: '1000000',
    // Nor the per-tenant byte budget, which a CNN's single-row bodies (tens of KB) at the bench's rates exceed.
    RATE_LIMIT_BYTES_PER_S: '0',
    MODEL_CACHE_DIR: path.join(dir, 'cache'),
  };
  await startEmbeddedServices(env, { dir, log: out, closers });
  const config = loadConfig(env);
  const store = createS3ObjectStore(config.s3);
  closers.push(['s3-client', () => store.close()]);
  return { env, registry: createModelRegistry({ store, prefix: config.s3.prefix }), dir, quick, out, closers };
}

let scopes = 0;

/**
 * The context's environment with a queue prefix of its own (and any overrides), and its config.
 * Each call gets a new prefix: an earlier measurement's queues, counters and cached results
 * (which would answer this one's jobs without running them) are never seen.
 */
export function scopedEnv(ctx: Pick<BenchContext, 'env'>, label: string, overrides: Record<string, string> = {}) {
  const env: NodeJS.ProcessEnv = { ...ctx.env, ...overrides, QUEUE_PREFIX: `${ctx.env.QUEUE_PREFIX}-${label}-${++scopes}` };
  return { env, config: loadConfig(env) };
}

export interface ChildRole {
  child: ChildProcess;
  /** SIGTERM (drain), SIGKILL after `graceMs`; resolves on exit. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

export interface SpawnOptions {
  /** Go to node itself (e.g. --cpu-prof). */
  nodeArgs?: string[];
  /** Each line the role writes to stdout (its pino log); stdout is ignored without it. */
  onLine?: (line: string) => void;
}

/** `warmpool <args>` as a child process. stderr is kept (last 4 KB) so a role that dies says why. */
export function spawnRole(args: string[], env: NodeJS.ProcessEnv, options: SpawnOptions = {}): ChildRole {
  return spawnNode([BIN, ...args], `warmpool ${args[0] ?? ''}`, env, options);
}

/** A TypeScript program of the bench's own (`node --import tsx FILE <args>`) as a child process, as spawnRole. */
export function spawnScript(file: string, args: string[], env: NodeJS.ProcessEnv, options: SpawnOptions = {}): ChildRole {
  return spawnNode(['--import', 'tsx', file, ...args], [file.split('/').at(-1), ...args].join(' '), env, options);
}

function spawnNode(argv: string[], label: string, env: NodeJS.ProcessEnv, options: SpawnOptions): ChildRole {
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), ...argv], {
    env,
    stdio: ['ignore', options.onLine ? 'pipe' : 'ignore', 'pipe'],
  });
  if (options.onLine && child.stdout) {
    const onLine = options.onLine;
    createInterface({ input: child.stdout }).on('line', (line) => onLine(line));
  }
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4096);
  });
  let stopping: Promise<void> | undefined;
  child.once('exit', (code, signal) => {
    if (!stopping) process.stderr.write(`bench: ${label} exited early (${code ?? signal})\n${stderr}`);
  });
  return {
    child,
    stop(graceMs = 15_000) {
      stopping ??= stopChild(child, { graceMs });
      return stopping;
    },
  };
}

/** `warmpool <args>` run to its end: exit code and output (killed after `timeoutMs`). */
export function runRole(
  args: string[],
  env: NodeJS.ProcessEnv,
  timeoutMs: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout?.on('data', (c: Buffer) => out.push(c));
    child.stderr?.on('data', (c: Buffer) => err.push(c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', reject);
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      const stderr = Buffer.concat(err).toString() + (signal ? `\n(killed by ${signal})` : '');
      resolve({ code: code ?? 1, stdout: Buffer.concat(out).toString(), stderr });
    });
  });
}

/** Resolves with the heartbeats once `count` workers of `model` report `state`; throws on a failed one. */
export async function waitForWorkers(
  redis: Pick<RedisClient, 'scan' | 'mget' | 'get'>,
  config: Pick<Config, 'queuePrefix'>,
  model: string,
  state: WorkerState,
  options: { count?: number; timeoutMs?: number } = {},
): Promise<HeartbeatPayload[]> {
  const deadline = Date.now() + (options.timeoutMs ?? 120_000);
  const count = options.count ?? 1;
  while (Date.now() < deadline) {
    const beats = (await listHeartbeats(redis, config.queuePrefix)).filter((b) => b.model === model);
    const failed = beats.find((b) => b.state === 'failed');
    if (failed) throw new Error(`a worker of ${model} failed to start: ${failed.error ?? 'no reason given'}`);
    const ready = beats.filter((b) => b.state === state);
    if (ready.length >= count) return ready;
    await systemClock.sleep(50);
  }
  throw new Error(`timed out waiting for ${count} ${state} worker(s) of ${model}`);
}

/** Polls `url` until it answers 2xx. */
export async function waitForHttp(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.ok) return;
      last = `HTTP ${res.status}`;
    } catch (err) {
      last = errorMessage(err);
    }
    await systemClock.sleep(100);
  }
  throw new Error(`${url} did not answer in ${timeoutMs} ms (${last})`);
}

/** `promise`, or a rejection naming `what` after `ms`. The timer never outlives the race. */
export async function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
