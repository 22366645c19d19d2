/**
 * `warmpool dev` (= `npm start`): the whole stack on one machine (DESIGN §2).
 *
 * Redis: the system's redis-server (installed from the OS packages when missing and we may),
 * unless REDIS_URL is set. S3: an embedded S3-compatible server on `.warmpool/s3`, unless
 * S3_ENDPOINT is set. Then the demo model is built, published and deployed if absent; the API
 * webhook dispatcher, the scaler and its local worker pool start; the URL, an API key and a ready-to-paste curl are printed; the
 * endpoints go to `.warmpool/dev.env` for other terminals. The Open Inference Protocol's gRPC
 * service is on too (GRPC_PORT, else a free port): its address is printed and stored there as
 * GRPC_URL. Ctrl-C drains and stops everything (a second Ctrl-C forces).
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startApiServer } from '../../api/main.ts';
import { startDispatcher } from '../../api/webhooks/main.ts';
import type { WorkerState } from '../../infra/contracts/worker-state.ts';
import { createDeploymentStore } from '../../infra/deployments/deployment-store.ts';
import { listHeartbeats } from '../../infra/fleet/worker-states.ts';
import { systemClock } from '../../infra/kernel/clock.ts';
import { loadConfig, parseApiKeys } from '../../infra/kernel/config.ts';
import { NotFoundError } from '../../infra/kernel/errors.ts';
import { closeAll, onShutdownSignals } from '../../infra/kernel/lifecycle.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { createLocalProvider } from '../../infra/pool/index.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { createModelRegistry, type ModelRegistry } from '../../infra/registry/model-registry.ts';
import { createS3ObjectStore } from '../../infra/registry/s3-object-store.ts';
import { startScaler } from '../../infra/scaler/main.ts';
import { buildMlpModel } from '../fixtures/onnx-models.ts';
import { startEmbeddedServices } from './embedded-services.ts';
import { freePort, isPortOpen } from './free-port.ts';

export const DEMO_MODEL = { name: 'demo-scorer', version: '1', features: 64 } as const;
const STATE_DIR = '.warmpool';
const BIN = fileURLToPath(new URL('../../bin/warmpool.mjs', import.meta.url));

export async function devMain(_args: string[]): Promise<number> {
  const env = process.env;
  mkdirSync(STATE_DIR, { recursive: true });
  const say = (line: string) => process.stdout.write(`${line}\n`);
  const closers: Array<[string, () => Promise<void> | void]> = [];
  const shutdown = () => closeAll([...closers].reverse());
  try {
    await startEmbeddedServices(env, { dir: STATE_DIR, preferredRedisPort: 6379, log: say, closers });
    if (!env.PORT && (await isPortOpen(8080))) env.PORT = String(await freePort());
    // gRPC beside HTTP: the port asked for, else any free one (0); loadConfig reads it, dev.env does not keep it.
    const grpcPort = env.GRPC_PORT?.trim() ? env.GRPC_PORT : '0';
    if (!env.API_KEYS) {
      env.API_KEYS = `dev:${devKey()}`;
      env.ADMIN_TENANTS ??= 'dev';
    }
    env.MODEL_CACHE_DIR ??= path.resolve(STATE_DIR, 'model-cache');
    // Each tenant's bulk runs get a folder of their own, beside the registry's models (docs/SECURITY.md).
    env.BULK_LOCATIONS ??= devBulkLocations(env);
    // Webhooks to a receiver on this machine are the point of a dev stack.
    env.WEBHOOK_ALLOWED_PRIVATE_HOSTS ??= '127.0.0.1,localhost,::1';
    const config = loadConfig({ ...env, GRPC_PORT: grpcPort });
    // The watcher narrates workers; the dev process's own JSON log only speaks up for problems.
    const log = createLogger(process.env.LOG_LEVEL ?? 'warn', { role: 'dev' });

    const store = createS3ObjectStore(config.s3);
    closers.push(['s3-client', () => store.close()]);
    const registry = createModelRegistry({ store, prefix: config.s3.prefix });
    const redis = createRedis(config.redisUrl);
    closers.push(['redis-client', () => closeRedis(redis)]);
    const deployments = createDeploymentStore(redis, config.queuePrefix);
    await ensureDemoModel(registry, say);
    if (!(await deployments.get(DEMO_MODEL.name))) {
      // One active and one warmed standby: a burst is absorbed in a second, not a cold start.
      await deployments.put({ model: DEMO_MODEL.name, version: DEMO_MODEL.version, min: 1, max: 3, standby: 1 });
      say(`deployed ${DEMO_MODEL.name}@${DEMO_MODEL.version}`);
    }

    const api = await startApiServer(config, log);
    closers.push(['api', () => api.close()]);
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
    closers.push(['pool', () => provider.close()]);
    const scaler = startScaler(config, log.child({ role: 'scaler' }), provider);
    closers.push(['scaler', () => scaler.close()]);
    const watcher = watchWorkers(redis, config.queuePrefix, say);
    closers.push(['watcher', () => watcher.close()]);
    if (!(await watcher.warmed(DEMO_MODEL.name, 180_000))) {
      say(`no ${DEMO_MODEL.name} worker is warmed yet: jobs queue until one is (see the lines above)`);
    }

    const key = config.api.apiKeys[0]?.key ?? '';
    writeDevEnv(env, api.url, api.grpcUrl);
    say('');
    // Before the "up" line: whoever waits for that line (scripts/dashboard-screenshots.ts) has this one too.
    if (api.grpcUrl) say(`gRPC (Open Inference Protocol, KServe v2): ${api.grpcUrl}   (metadata authorization: Bearer <key>)`);
    say(`warmpool is up: ${api.url}   (API key: ${key})`);
    say(`other terminals in this folder pick up ${STATE_DIR}/dev.env; Ctrl-C drains and stops`);
    say('');
    say(demoCurl(api.url, key));
    say('');

    return await new Promise<number>((resolve) => {
      onShutdownSignals({
        drain: async () => {
          say('\ndraining… (Ctrl-C again to force)');
          await shutdown().catch((err: unknown) => log.warn({ err }, 'some parts did not stop cleanly'));
          say('stopped');
          resolve(0);
        },
        force: () => say('forced exit'),
      });
    });
  } catch (err) {
    await shutdown().catch(() => undefined);
    throw err;
  }
}

/** Prints each worker's state changes from the heartbeats, the same view the pool API has. */
function watchWorkers(redis: RedisClient, prefix: string, say: (line: string) => void) {
  const seen = new Map<string, WorkerState>();
  const stop = new AbortController();
  const poll = async () => {
    for (const hb of await listHeartbeats(redis, prefix)) {
      if (seen.get(hb.id) === hb.state) continue;
      seen.set(hb.id, hb.state);
      const profile =
        hb.state === 'active' && hb.batchProfile ? ` (batch ${hb.batchProfile.chosenBatch}, ${hb.batchProfile.threads} threads)` : '';
      say(`worker   ${hb.model}@${hb.version} pid ${hb.pid}: ${hb.state}${profile}${hb.error ? ` — ${hb.error}` : ''}`);
    }
  };
  const loop = (async () => {
    while (!stop.signal.aborted) {
      await poll().catch(() => undefined);
      await systemClock.sleep(250, stop.signal).catch(() => undefined);
    }
  })();
  return {
    /** A worker of `model` is active, or warmed in standby (the scaler activates it on demand). */
    async warmed(model: string, timeoutMs: number): Promise<boolean> {
      const deadline = Date.now() + timeoutMs;
      while (Date.now() < deadline && !stop.signal.aborted) {
        await poll().catch(() => undefined);
        const beats = await listHeartbeats(redis, prefix);
        if (beats.some((hb) => hb.model === model && (hb.state === 'active' || hb.state === 'standby'))) return true;
        await systemClock.sleep(250);
      }
      return false;
    },
    async close() {
      stop.abort();
      await loop;
    },
  };
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

/** One key per checkout, kept across restarts so pasted curls keep working. */
function devKey(): string {
  const file = path.join(STATE_DIR, 'dev-key');
  if (existsSync(file)) return readFileSync(file, 'utf8').trim();
  const key = `wp_${randomBytes(18).toString('base64url')}`;
  writeFileSync(file, `${key}\n`, { mode: 0o600 });
  return key;
}

function writeDevEnv(env: NodeJS.ProcessEnv, url: string, grpcUrl: string | undefined): void {
  const names = [
    'REDIS_URL',
    'S3_ENDPOINT',
    'S3_BUCKET',
    'S3_PREFIX',
    'AWS_ACCESS_KEY_ID',
    'AWS_SECRET_ACCESS_KEY',
    'AWS_REGION',
    'API_KEYS',
    'ADMIN_TENANTS',
    'BULK_LOCATIONS',
    'QUEUE_PREFIX',
    'MODEL_CACHE_DIR',
  ];
  const lines = names.filter((n) => env[n] !== undefined).map((n) => `${n}=${env[n]}`);
  lines.push(`WARMPOOL_URL=${url}`);
  if (grpcUrl) lines.push(`GRPC_URL=${grpcUrl}`);
  writeFileSync(path.join(STATE_DIR, 'dev.env'), `${lines.join('\n')}\n`, { mode: 0o600 });
}

function demoCurl(url: string, key: string): string {
  const row = Array.from({ length: DEMO_MODEL.features }, (_, i) => Number((Math.sin(i) * 0.5).toFixed(3)));
  const body = JSON.stringify({ inputs: [{ name: 'features', shape: [1, DEMO_MODEL.features], datatype: 'FP32', data: row }] });
  return [
    'Try it (sync, Open Inference Protocol):',
    `  curl -s ${url}/v2/models/${DEMO_MODEL.name}/infer -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '${body}'`,
    'Or async:',
    `  curl -s ${url}/v1/models/${DEMO_MODEL.name}/jobs -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' -d '${body}'`,
    `  curl -s ${url}/v1/jobs/<id> -H 'Authorization: Bearer ${key}'`,
  ].join('\n');
}
