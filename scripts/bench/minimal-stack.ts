/**
 * The minimal stack warmpool is compared with end to end (`e2e_vs_minimal_stack`): the least a
 * queue-backed HTTP service on the same parts does per request. A hono POST handler that parses
 * the JSON body and BullMQ-`add`s it, answering 202, in one child process; a BullMQ Worker with
 * a no-op processor and the warmpool worker's concurrency in another (minimal-stack-role.ts).
 * Same Redis, same processes as warmpool (an API and a worker), same load generator and bodies:
 * its completed requests/s is what the queue tier could do if it added nothing.
 */
import { fileURLToPath } from 'node:url';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { openQueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { freePort } from '../dev/free-port.ts';
import type { StackUnderTest } from './e2e.ts';
import { redisServerPid } from './proc-cpu.ts';
import { RequestWatch } from './queue-watch.ts';
import { type BenchContext, type ChildRole, scopedEnv, spawnScript, withTimeout } from './services.ts';
import { submitTarget } from './submit-target.ts';

const ROLE = fileURLToPath(new URL('./minimal-stack-role.ts', import.meta.url));

/** Hash-tagged like warmpool's queues, so the stack also runs on a Redis Cluster. */
const QUEUE = '{minimal}';

export async function startMinimalStack(ctx: BenchContext, manifest: ModelManifest, concurrency: number): Promise<StackUnderTest> {
  const { env, config } = scopedEnv(ctx, `minimal-${manifest.name}`);
  const port = await freePort();
  const roleEnv = {
    ...env,
    MINIMAL_REDIS_URL: config.redisUrl,
    MINIMAL_PREFIX: config.queuePrefix,
    MINIMAL_QUEUE: QUEUE,
    MINIMAL_PORT: String(port),
    MINIMAL_CONCURRENCY: String(concurrency),
  };
  const redis = createRedis(config.redisUrl);
  const probes = openQueueProbes(redis, config.queuePrefix);
  const queue = probes.queue(QUEUE);
  const roles: ChildRole[] = [];
  const stop = async () => {
    for (const role of roles.reverse()) await role.stop().catch(() => undefined);
    await queue.obliterate().catch(() => undefined);
    await probes.close();
    await closeRedis(redis);
  };
  try {
    const [api, worker] = await Promise.all(['api', 'worker'].map((role) => startRole(role, roleEnv, roles)));
    return {
      label: 'minimal stack',
      target: submitTarget(`http://127.0.0.1:${port}`, manifest),
      watch: new RequestWatch(queue),
      pids: { api: api?.child.pid, worker: worker?.child.pid, redis: await redisServerPid(redis) },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Spawns one role and waits for its `ready` line. */
async function startRole(role: string, env: NodeJS.ProcessEnv, roles: ChildRole[]): Promise<ChildRole> {
  let ready = () => {};
  const isReady = new Promise<void>((resolve) => {
    ready = resolve;
  });
  const child = spawnScript(ROLE, [role], env, { onLine: (line) => line === 'ready' && ready() });
  roles.push(child);
  const exited = new Promise<never>((_, reject) =>
    child.child.once('exit', (code) => reject(new Error(`the minimal stack's ${role} exited (${code}) before it was ready`))),
  );
  exited.catch(() => undefined); // once ready, its exit at stop() is no error
  await withTimeout(Promise.race([isReady, exited]), 60_000, `the minimal stack's ${role}`);
  return child;
}
