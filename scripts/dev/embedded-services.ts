/**
 * The services a one-machine stack needs when none are configured: a redis-server (from the OS
 * packages, installed when missing and permitted) unless REDIS_URL is set, and an embedded
 * S3-compatible server unless S3_ENDPOINT is set. Used by `warmpool dev` and `warmpool bench`.
 * Fills the variables it provides into `env` and registers how to stop what it started.
 */
import path from 'node:path';
import { freePort, isPortOpen } from './free-port.ts';
import { ensureRedisServer, startRedisServer } from './redis-server.ts';
import { startS3Server } from './s3-server.ts';

export interface EmbeddedServicesOptions {
  /** Folder for the servers' data: `<dir>/redis`, `<dir>/s3`. */
  dir: string;
  /** Use this port for Redis when it is free (dev: 6379, so other tools find it); else any free one. */
  preferredRedisPort?: number;
  log: (line: string) => void;
  /** Where the stoppers go, in start order (stop them in reverse). */
  closers: Array<[string, () => Promise<void> | void]>;
}

export async function startEmbeddedServices(env: NodeJS.ProcessEnv, options: EmbeddedServicesOptions): Promise<void> {
  const { dir, log, closers } = options;
  if (!env.REDIS_URL) {
    const binary = await ensureRedisServer({ install: 'auto', log });
    const preferred = options.preferredRedisPort;
    const port = preferred !== undefined && !(await isPortOpen(preferred)) ? preferred : await freePort();
    const redis = await startRedisServer({ binary, dir: path.join(dir, 'redis'), port });
    closers.push(['redis-server', () => redis.close()]);
    env.REDIS_URL = redis.url;
    log(`redis    ${redis.url} (redis-server, data in ${path.join(dir, 'redis')})`);
  }
  if (!env.S3_ENDPOINT) {
    env.S3_BUCKET ??= 'warmpool';
    const s3 = await startS3Server({ directory: path.join(dir, 's3'), buckets: [env.S3_BUCKET] });
    closers.push(['s3-server', () => s3.close()]);
    env.S3_ENDPOINT = s3.endpoint;
    env.AWS_ACCESS_KEY_ID ??= s3.accessKeyId;
    env.AWS_SECRET_ACCESS_KEY ??= s3.secretAccessKey;
    log(`s3       ${s3.endpoint} (embedded, data in ${path.join(dir, 's3')})`);
  }
}
