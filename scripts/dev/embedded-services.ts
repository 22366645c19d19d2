/**
 * The services a one-machine stack needs when none are configured: a redis-server (from the OS
 * packages, installed when missing and permitted) unless REDIS_URL is set, and an embedded
 * S3-compatible server unless S3_ENDPOINT is set. Used by `warmpool dev` and `warmpool bench`.
 * Fills the variables it provides into `env` and registers how to stop what it started.
 *
 * `persist` (warmpool dev): Redis keeps an append-only file in `<dir>/redis`, so deployments,
 * jobs, webhook secrets and bulk runs survive a restart, as the S3 folder's objects always did.
 * fsync every second (appendfsync everysec, Redis's default): a clean stop loses nothing (Redis
 * writes the file out on SHUTDOWN and on SIGTERM), a crash of the machine at most the last second,
 * which a dev stack can afford; `always` would fsync every write of every job. The server also
 * runs in its own process group there, so a Ctrl-C reaches only the processes that use it, and
 * the dev stack stops it last (redis-server.ts).
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isPortOpen } from './free-port.ts';
import { ensureRedisServer, type RedisServerHandle, startRedisServer } from './redis-server.ts';
import { startS3Server } from './s3-server.ts';

export interface EmbeddedServicesOptions {
  /** Folder for the servers' data: `<dir>/redis`, `<dir>/s3`. */
  dir: string;
  /** Use this port for Redis when it is free (dev: 6379, so other tools find it); else any free one. */
  preferredRedisPort?: number;
  /** Keep Redis's data across restarts, and keep Redis out of the terminal's process group (see the header). */
  persist?: boolean;
  log: (line: string) => void;
  /** Where the stoppers go, in start order (stop them in reverse). */
  closers: Array<[string, () => Promise<void> | void]>;
}

/** What was started, for whoever must find it again (the dev stack's lock file names the Redis pid). */
export interface EmbeddedServices {
  redis?: { url: string; pid: number };
  s3?: { endpoint: string };
}

export async function startEmbeddedServices(env: NodeJS.ProcessEnv, options: EmbeddedServicesOptions): Promise<EmbeddedServices> {
  const { dir, log, closers } = options;
  const started: EmbeddedServices = {};
  if (!env.REDIS_URL) {
    const redis = await startRedis(options);
    closers.push(['redis-server', () => redis.close()]);
    env.REDIS_URL = redis.url;
    started.redis = { url: redis.url, pid: redis.pid };
    const kept = options.persist ? 'data kept in' : 'data in';
    log(`redis    ${redis.url} (redis-server, ${kept} ${path.join(dir, 'redis')})`);
  }
  if (!env.S3_ENDPOINT) {
    env.S3_BUCKET ??= 'warmpool';
    const s3 = await startS3Server({ directory: path.join(dir, 's3'), buckets: [env.S3_BUCKET] });
    closers.push(['s3-server', () => s3.close()]);
    env.S3_ENDPOINT = s3.endpoint;
    env.AWS_ACCESS_KEY_ID ??= s3.accessKeyId;
    env.AWS_SECRET_ACCESS_KEY ??= s3.secretAccessKey;
    started.s3 = { endpoint: s3.endpoint };
    log(`s3       ${s3.endpoint} (embedded, data in ${path.join(dir, 's3')})`);
  }
  return started;
}

/** On the preferred port when it is free, else on any: a stack started beside another may lose the race for it. */
async function startRedis(options: EmbeddedServicesOptions): Promise<RedisServerHandle> {
  const binary = await ensureRedisServer({ install: 'auto', log: options.log });
  const base = {
    binary,
    dir: path.join(options.dir, 'redis'),
    extraArgs: ['--maxmemory', String(redisMaxmemory()), '--maxmemory-policy', 'noeviction'],
    ...(options.persist ? { appendonly: true, appendfsync: 'everysec' as const, detached: true } : {}),
  };
  const preferred = options.preferredRedisPort;
  if (preferred !== undefined && !(await isPortOpen(preferred))) {
    try {
      return await startRedisServer({ ...base, port: preferred });
    } catch (err) {
      if (!(err instanceof Error && /address already in use/i.test(err.message))) throw err;
    }
  }
  return startRedisServer(base); // a free port, retried if taken before Redis binds it
}

/**
 * The embedded Redis's maxmemory: a quarter of this machine's memory (its cgroup limit when
 * lower), so a full Redis refuses writes (noeviction: 503 storage_full, nothing lost) before
 * the machine swaps or the OOM killer picks a process. A quarter because the same machine runs
 * the API, the workers with their models and the S3 server, and an AOF rewrite forks Redis,
 * whose copy-on-write pages can cost up to as much again. To change it while the stack runs:
 * `redis-cli CONFIG SET maxmemory <bytes>`; or point REDIS_URL at a Redis of your own.
 */
export function redisMaxmemory(): number {
  let memory = os.totalmem();
  try {
    const limit = Number(readFileSync('/sys/fs/cgroup/memory.max', 'utf8').trim()); // 'max': NaN
    if (Number.isFinite(limit) && limit > 0) memory = Math.min(memory, limit);
  } catch {
    // no cgroup v2 limit here
  }
  return Math.floor(memory / 4);
}
