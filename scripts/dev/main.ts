/**
 * `warmpool dev [--fresh]` (= `npm start`): the whole stack on one machine (DESIGN §2).
 *
 * One stack per folder (dev-lock.ts): a second `warmpool dev` here refuses, naming the running
 * one, before it takes a port or touches dev.env. Redis: the system's redis-server (installed
 * from the OS packages when missing and we may) unless REDIS_URL is set, with its data kept in
 * `.warmpool/redis` across restarts (append-only file); S3: an embedded S3-compatible server on
 * `.warmpool/s3`, unless S3_ENDPOINT is set (embedded-services.ts). `--fresh` removes that state
 * first (fresh-state.ts). Then the demo model is published and deployed if absent (a deployment
 * the user changed is left as it is); the API, the webhook dispatcher, the scaler and its local
 * worker pool start; the URL, the dashboard, an API key and a ready-to-paste curl are printed;
 * the settings and endpoints go to `.warmpool/dev.env` for other terminals (dev-env.ts). The
 * Open Inference Protocol's gRPC service is on too (GRPC_PORT, else a free port).
 *
 * Stopping, as a state machine (signals through infra/kernel/lifecycle.ts from the first moment):
 *
 *   starting --signal--> stopping: start-up is abandoned at its next step, and everything
 *                        started so far is stopped as below (no worker outlives it)
 *   up --signal (Ctrl-C, SIGTERM)--> draining: the watcher, the scaler (no new decisions), the
 *                        workers (they finish what they hold), the dispatcher, the API, then
 *                        the S3 and Redis servers, last, since everything before uses them;
 *                        exit 0 when all stopped
 *   draining --the signal again | the workers' DRAIN_LIMIT_MS + 10 s--> forced: workers get SIGTERM,
 *                        Redis is told to write its file out and stop, exit 128 + signal
 *
 * Redis runs in a process group of its own, so the terminal's Ctrl-C (SIGINT to the foreground
 * group) reaches this process and the workers, not the server they drain into; the S3 server
 * runs inside this process, and stops when this process says.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { startDispatcher } from '../../api/dispatcher/main.ts';
import { startApiServer } from '../../api/main.ts';
import type { PoolProvider } from '../../infra/contracts/pool.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { CONFIG_SECTIONS, loadConfig, parseApiKeys } from '../../infra/kernel/config.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import { type Closer, closeAll, DRAIN_LIMIT_MS, onShutdownSignals, supervisorDrainLimitMs } from '../../infra/kernel/lifecycle.ts';
import { createLogger, type Logger } from '../../infra/kernel/log.ts';
import { createLocalProvider } from '../../infra/pool/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry, type ModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { startScaler } from '../../infra/scaler/main.ts';
import { DEV } from '../commands/cli-options.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { writeDevEnv } from './dev-env.ts';
import { acquireDevLock, type DevLock, type DevLockInfo } from './dev-lock.ts';
import { startEmbeddedServices } from './embedded-services.ts';
import { freePort, isPortOpen } from './free-port.ts';
import { clearDevState } from './fresh-state.ts';
import { stopLeftovers } from './leftovers.ts';
import { watchWorkers } from './worker-watcher.ts';

export const DEMO_MODEL = { name: 'demo-scorer', version: '1', features: 64 } as const;
const STATE_DIR = '.warmpool';
const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));
/** How long start-up waits for the demo's first worker before saying so and serving anyway. */
const WARM_WAIT_MS = 180_000;

/** Raised inside start-up once a signal asked it to stop. */
class StartAborted extends Error {}

export async function devMain(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: DEV.options, strict: true });
  const say = (line: string) => process.stdout.write(`${line}\n`);
  mkdirSync(STATE_DIR, { recursive: true });
  const taken = acquireDevLock(STATE_DIR);
  if ('running' in taken) {
    process.stderr.write(`${refusal(taken.running)}\n`);
    return 2;
  }
  const { lock } = taken;
  try {
    if (taken.stale) await stopLeftovers(taken.stale, say);
    if (values.fresh) say(clearDevState(STATE_DIR, process.env));
    return await runStack(lock, say);
  } finally {
    lock.release();
  }
}

/** One line naming the stack that holds this folder, and what to do. */
function refusal(running: DevLockInfo): string {
  const where = running.url ? `is running at ${running.url} (pid ${running.pid})` : `is starting (pid ${running.pid})`;
  return `warmpool dev: a warmpool dev ${where} in this folder; use it, or stop it first (Ctrl-C in its terminal, or kill ${running.pid})`;
}

/** What start-up has made so far, for stopping it (closers in start order) and forcing. */
interface Started {
  closers: Closer[];
  provider?: PoolProvider;
}

/** Starts the stack under signal handling from the first moment; resolves with the exit code once it stopped. */
/**
 * The drain limit of the workers this stack starts (DRAIN_LIMIT_MS), read before the stack's
 * config is (a signal can come while it starts) from the config's worker section alone. A worker
 * section the config refuses gets the default here; starting the stack then says what is wrong.
 */
function workersDrainLimitMs(env: NodeJS.ProcessEnv): number {
  const worker = CONFIG_SECTIONS.worker.safeParse(env);
  return worker.success ? worker.data.drainLimitMs : DRAIN_LIMIT_MS;
}

async function runStack(lock: DevLock, say: (line: string) => void): Promise<number> {
  // The watcher narrates workers; this process's own JSON log only speaks up for problems.
  const log = createLogger(process.env.LOG_LEVEL ?? 'warn', { role: 'dev' });
  const started: Started = { closers: [] };
  const starting = new AbortController();
  let startup: Promise<void> = Promise.resolve();
  let isUp = false;
  const stopAll = () => closeAll([...started.closers].reverse());
  const forceAfterMs = supervisorDrainLimitMs(workersDrainLimitMs(process.env));
  let unsubscribe: () => void = () => {};
  const stopped = new Promise<number>((resolve) => {
    unsubscribe = onShutdownSignals(
      {
        drain: async () => {
          say(isUp ? '\ndraining… (Ctrl-C again to force)' : '\nstopping: start-up interrupted… (Ctrl-C again to force)');
          starting.abort();
          await startup.catch(() => undefined);
          await stopAll().catch((err: unknown) => log.warn({ err }, 'some parts did not stop cleanly'));
          say('stopped');
          resolve(0);
        },
        force: (_signal, reason) => {
          say(reason === 'timeout' ? `not stopped after ${forceAfterMs / 1000} s: forcing` : 'forced exit');
          // Its workers get SIGTERM (if the drain has not sent it yet); Redis gets its own on exit (redis-server.ts).
          void started.provider?.close();
        },
      },
      { forceAfterMs },
    );
  });
  startup = startStack(process.env, lock, started, starting.signal, { log, say });
  try {
    await startup;
    isUp = true;
  } catch (err) {
    if (starting.signal.aborted) return await stopped;
    unsubscribe();
    await stopAll().catch(() => undefined);
    throw err;
  }
  return await stopped;
}

interface Io {
  log: Logger;
  say: (line: string) => void;
}

/** Everything, in order; each thing started is added to `started` before the next step. */
async function startStack(env: NodeJS.ProcessEnv, lock: DevLock, started: Started, signal: AbortSignal, { log, say }: Io): Promise<void> {
  const step = () => {
    if (signal.aborted) throw new StartAborted('start-up interrupted');
  };
  const { closers } = started;
  const startedAt = Date.now();
  const services = await startEmbeddedServices(env, { dir: STATE_DIR, preferredRedisPort: 6379, persist: true, log: say, closers });
  if (services.redis) lock.update({ redis: services.redis });
  step();
  if (!env.PORT && (await isPortOpen(8080))) env.PORT = String(await freePort());
  // gRPC beside HTTP: the port asked for, else any free one (0); loadConfig reads it, dev.env does not keep it.
  const grpcPort = env.GRPC_PORT?.trim() ? env.GRPC_PORT : '0';
  const generatedKey = !env.API_KEYS;
  if (generatedKey) {
    env.API_KEYS = `dev:${devKey()}`;
    env.ADMIN_TENANTS ??= 'dev';
  }
  env.MODEL_CACHE_DIR ??= path.resolve(STATE_DIR, 'model-cache');
  // Each tenant's bulk runs get a folder of their own, beside the registry's models (docs/SECURITY.md).
  env.BULK_LOCATIONS ??= devBulkLocations(env);
  // Webhooks to a receiver on this machine are the point of a dev stack.
  env.WEBHOOK_ALLOWED_PRIVATE_HOSTS ??= '127.0.0.1,localhost,::1';
  const config = loadConfig({ ...env, GRPC_PORT: grpcPort });
  lock.update({ queuePrefix: config.queuePrefix });

  const store = createS3ObjectStore(config.s3);
  closers.push(['s3-client', () => store.close()]);
  const registry = createModelRegistry({ store, prefix: config.s3.prefix });
  const redis = createRedis(config.redisUrl);
  closers.push(['redis-client', () => closeRedis(redis)]);
  await ensureDemoModel(registry, say);
  step();
  await ensureDemoDeployment(createDeploymentStore(redis, config.queuePrefix), say);
  step();

  const api = await startApiServer(config, log);
  closers.push(['api', () => api.close()]);
  step();
  const dispatcher = startDispatcher(config, log.child({ role: 'dispatcher' }));
  closers.push(['dispatcher', () => dispatcher.close()]);
  // Workers are local processes; the scaler decides how many, active or standby (closed in
  // reverse: the scaler stops deciding before the provider drains the workers).
  const provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    // Workers' own logs are JSON for machines; here the watcher below says what matters.
    env: { ...env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
    redis,
    prefix: config.queuePrefix,
    clock: systemClock,
    log,
  });
  started.provider = provider;
  closers.push(['pool', () => provider.close()]);
  const createTuner = config.scaler.selfTuning ? (await import('../../infra/simulator/index.ts')).createTuner : undefined;
  const scaler = startScaler(config, log.child({ role: 'scaler' }), provider, createTuner ? { createTuner } : {});
  closers.push(['scaler', () => scaler.close()]);
  const watcher = watchWorkers(redis, config.queuePrefix, startedAt, say);
  closers.push(['watcher', () => watcher.close()]);
  if (!(await watcher.warmed(DEMO_MODEL.name, WARM_WAIT_MS, signal))) {
    step();
    say(`no ${DEMO_MODEL.name} worker is warmed yet: jobs queue until one is (see the lines above)`);
  }

  // The key is never printed: a terminal's scrollback, a CI log or a shared screen keeps what is
  // printed. The banner says where it is, and the curls read it from there.
  const key = keyReference(generatedKey);
  const dashboardUrl = `${api.url}/dashboard`;
  writeDevEnv(path.join(STATE_DIR, 'dev.env'), env, { url: api.url, dashboardUrl, ...(api.grpcUrl ? { grpcUrl: api.grpcUrl } : {}) });
  lock.update({ url: api.url, dashboardUrl });
  say('');
  // Before the "up" line: whoever waits for that line (scripts/dashboard-screenshots.ts) has these too.
  if (api.grpcUrl) say(`gRPC (Open Inference Protocol, KServe v2): ${api.grpcUrl}   (metadata authorization: Bearer <key>)`);
  say(`dashboard: ${dashboardUrl}   (sign in with the API key: ${key.where})`);
  say(`warmpool is up: ${api.url}   (API key: ${key.where})`);
  say(`state is kept in ${STATE_DIR}/ across restarts (warmpool dev --fresh, or npm start -- --fresh, starts clean)`);
  say(`other terminals in this folder pick up ${STATE_DIR}/dev.env; Ctrl-C drains and stops`);
  say('');
  say(demoCurl(api.url, key.shell));
  say('');
}

async function ensureDemoModel(registry: ModelRegistry, say: (line: string) => void): Promise<void> {
  try {
    await registry.getManifest(DEMO_MODEL.name, DEMO_MODEL.version);
  } catch (err) {
    if (!(err instanceof NotFoundError)) throw err;
    await registry.publish({
      name: DEMO_MODEL.name,
      version: DEMO_MODEL.version,
      bytes: buildMlpModel({ features: DEMO_MODEL.features }),
      maxBatch: 128,
      warmupBatches: [1, 8, 32, 128],
      labels: { source: 'warmpool dev demo', task: 'scoring' },
    });
    say(`published ${DEMO_MODEL.name}@${DEMO_MODEL.version} (a ${DEMO_MODEL.features}-feature MLP scorer)`);
  }
}

/** Deploys the demo only where it has no deployment: one kept from an earlier run, as the user left it, stays. */
async function ensureDemoDeployment(deployments: ReturnType<typeof createDeploymentStore>, say: (line: string) => void): Promise<void> {
  if (await deployments.get(DEMO_MODEL.name)) return;
  // One active and one warmed standby: a burst is absorbed in a second, not a cold start.
  await deployments.put({ model: DEMO_MODEL.name, version: DEMO_MODEL.version, min: 1, max: 3, standby: 1 });
  say(`deployed ${DEMO_MODEL.name}@${DEMO_MODEL.version}`);
}

/**
 * The dev stack's BULK_LOCATIONS when none is set: each API_KEYS tenant (`dev` unless API_KEYS
 * says otherwise) may read and write `s3://<S3_BUCKET>/<S3_PREFIX/>bulk/<tenant>/`, and nothing
 * else: tenants of one dev stack are as isolated from each other as in production.
 */
export function devBulkLocations(env: NodeJS.ProcessEnv): string {
  const bucket = env.S3_BUCKET ?? 'warmpool';
  const root = (env.S3_PREFIX ?? '').replace(/^\/+|\/+$/g, '');
  const tenants = [...new Set(parseApiKeys(env.API_KEYS ?? '').map((k) => k.tenant))];
  return tenants.map((t) => `${t}:s3://${bucket}/${root ? `${root}/` : ''}bulk/${t}/`).join(';');
}

/** One key per checkout, kept across restarts (and --fresh) so pasted curls keep working. */
function devKey(): string {
  const file = path.join(STATE_DIR, 'dev-key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const key = `wp_${randomBytes(18).toString('base64url')}`;
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

/** Where the banner says the key is, and how a pasted command reads it (never the key itself). */
function keyReference(generated: boolean): { where: string; shell: string } {
  const file = path.join(STATE_DIR, 'dev-key');
  return generated ? { where: `in ${file}`, shell: `$(cat ${file})` } : { where: 'the first of your API_KEYS', shell: '$WARMPOOL_KEY' };
}

/** `key`: a shell expression that yields the key (the commands are pasted into a shell). */
function demoCurl(url: string, key: string): string {
  const row = Array.from({ length: DEMO_MODEL.features }, (_, i) => Number((Math.sin(i) * 0.5).toFixed(3)));
  const body = JSON.stringify({ inputs: [{ name: 'features', shape: [1, DEMO_MODEL.features], datatype: 'FP32', data: row }] });
  return [
    'Try it (sync, Open Inference Protocol):',
    `  curl -s ${url}/v2/models/${DEMO_MODEL.name}/infer -H "Authorization: Bearer ${key}" -H 'Content-Type: application/json' -d '${body}'`,
    'Or async:',
    `  curl -s ${url}/v1/models/${DEMO_MODEL.name}/jobs -H "Authorization: Bearer ${key}" -H 'Content-Type: application/json' -d '${body}'`,
    `  curl -s ${url}/v1/jobs/<id> -H "Authorization: Bearer ${key}"`,
  ].join('\n');
}
