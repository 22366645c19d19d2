/**
 * warmpool as the stack under test: the real API (a `warmpool api` child process by default, or
 * in the bench's own process) and one real `warmpool worker` process for the model, on a queue
 * prefix of their own. Requests go to POST /v1/models/{m}/jobs with the bench tenant's key; the
 * API also serves OIP gRPC (GRPC_PORT) for grpc_vs_http.
 *
 * The API runs as a child by default, like the worker: in this process it would share one event
 * loop with the load generator, and on 2 cores the generator's CPU would be charged to the API
 * (docs/BENCHMARKS.md has both measured). In process, the API's CPU row counts the generator too.
 */
import { startApiServer } from '../../api/main.ts';
import { queueName } from '../../infra/contracts/job.ts';
import type { ModelManifest } from '../../infra/contracts/manifest.ts';
import { createLogger } from '../../infra/kernel/log.ts';
import { openQueueProbes } from '../../infra/queue/index.ts';
import { closeRedis, createRedis } from '../../infra/redis/client.ts';
import { freePort } from '../dev/free-port.ts';
import type { ApiMode, StackUnderTest } from './e2e.ts';
import { redisServerPid } from './proc-cpu.ts';
import { RequestWatch } from './queue-watch.ts';
import { BENCH_KEY, type BenchContext, scopedEnv, spawnRole, waitForHttp, waitForWorkers } from './services.ts';
import { submitTarget } from './submit-target.ts';

export interface WarmpoolStack extends StackUnderTest {
  /** The worker's intra-op threads (its warm-up's choice; 0 when it did not say). */
  workerThreads: number;
  /** The API's OIP gRPC service, `host:port` (GRPC_PORT is set for the bench). */
  grpcUrl: string;
}

/** `nodeArgs` go to the child processes' node (e.g. `--cpu-prof --cpu-prof-dir=DIR`, to profile them). */
export async function startWarmpoolStack(
  ctx: BenchContext,
  manifest: ModelManifest,
  api: ApiMode,
  options: { nodeArgs?: string[] } = {},
): Promise<WarmpoolStack> {
  const spawnOptions = options.nodeArgs ? { nodeArgs: options.nodeArgs } : {};
  const grpcPort = await freePort();
  const { env, config } = scopedEnv(ctx, `e2e-${manifest.name}-${api}`, { PORT: String(await freePort()), GRPC_PORT: String(grpcPort) });
  const redis = createRedis(config.redisUrl);
  // A reader: it never rewrites the queue's settings (the events stream's maxLen).
  const probes = openQueueProbes(redis, config.queuePrefix);
  const queue = probes.queue(queueName(manifest.name, manifest.version));
  const stops: Array<() => Promise<void>> = [];
  const stop = async () => {
    for (const s of stops.reverse()) await s().catch(() => undefined);
    await queue.obliterate().catch(() => undefined);
    await probes.close();
    await closeRedis(redis);
  };
  try {
    let apiPid: number | undefined = process.pid;
    let url: string;
    if (api === 'in-process') {
      const server = await startApiServer(config, createLogger('warn', { role: 'bench-api' }));
      stops.push(() => server.close());
      url = server.url;
    } else {
      const child = spawnRole(['api'], env, spawnOptions);
      stops.push(() => child.stop());
      apiPid = child.child.pid;
      url = `http://127.0.0.1:${config.api.port}`;
      await waitForHttp(`${url}/v2/health/ready`);
    }
    const worker = spawnRole(['worker', '--model', manifest.name, '--version', manifest.version], env, spawnOptions);
    stops.push(() => worker.stop());
    const [beat] = await waitForWorkers(redis, config, manifest.name, 'active');
    return {
      label: 'warmpool',
      target: submitTarget(url, manifest, { authorization: `Bearer ${BENCH_KEY}` }),
      watch: new RequestWatch(queue),
      pids: { api: apiPid, worker: worker.child.pid, redis: await redisServerPid(redis) },
      workerThreads: beat?.batchProfile?.threads ?? 0,
      grpcUrl: `127.0.0.1:${grpcPort}`,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
