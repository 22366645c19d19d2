/**
 * One process of the minimal stack (scripts/bench/minimal-stack.ts), the least a queue-backed
 * HTTP service built on the same parts can do per request:
 *
 *   api      hono on @hono/node-server: POST /v1/models/:model/jobs → JSON parse → BullMQ
 *            `queue.add` of the parsed body → 202 {"id"}
 *   worker   a BullMQ Worker whose processor does nothing
 *
 * Run as `node --import tsx minimal-stack-role.ts api|worker`, with MINIMAL_REDIS_URL,
 * MINIMAL_PREFIX, MINIMAL_QUEUE, and MINIMAL_PORT (api) or MINIMAL_CONCURRENCY (worker). It
 * writes `ready` to stdout once it serves or consumes, and closes on SIGTERM.
 */
import { serve } from '@hono/node-server';
import { Queue, Worker } from 'bullmq';
import { Hono } from 'hono';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';

interface RoleEnv {
  redisUrl: string;
  prefix: string;
  queue: string;
  port: number;
  concurrency: number;
}

function roleEnv(env: NodeJS.ProcessEnv): RoleEnv {
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new Error(`minimal stack: ${name} is not set`);
    return value;
  };
  return {
    redisUrl: need('MINIMAL_REDIS_URL'),
    prefix: need('MINIMAL_PREFIX'),
    queue: need('MINIMAL_QUEUE'),
    port: Number(env.MINIMAL_PORT ?? 0),
    concurrency: Number(env.MINIMAL_CONCURRENCY ?? 1),
  };
}

async function runApi(e: RoleEnv): Promise<() => Promise<void>> {
  const connection = createRedis(e.redisUrl);
  const queue = new Queue(e.queue, { connection, prefix: e.prefix });
  const app = new Hono();
  app.post('/v1/models/:model/jobs', async (c) => {
    const job = await queue.add('infer', await c.req.json());
    return c.json({ id: job.id }, 202);
  });
  const server = await new Promise<ReturnType<typeof serve>>((resolve) => {
    const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: e.port }, () => resolve(s));
  });
  return async () => {
    await new Promise((resolve) => server.close(resolve));
    await queue.close();
    await closeRedis(connection);
  };
}

async function runWorker(e: RoleEnv): Promise<() => Promise<void>> {
  const connection = createRedis(e.redisUrl);
  const worker = new Worker(e.queue, async () => undefined, { connection, prefix: e.prefix, concurrency: e.concurrency });
  worker.on('error', () => undefined);
  await worker.waitUntilReady();
  return async () => {
    await worker.close();
    await closeRedis(connection);
  };
}

async function main(role: string | undefined): Promise<void> {
  const e = roleEnv(process.env);
  if (role !== 'api' && role !== 'worker') throw new Error(`minimal stack: the role is 'api' or 'worker' (got '${role}')`);
  const close = role === 'api' ? await runApi(e) : await runWorker(e);
  process.once('SIGTERM', () => {
    void close().finally(() => process.exit(0));
  });
  process.stdout.write('ready\n');
}

main(process.argv[2]).catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
