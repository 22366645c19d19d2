/**
 * The warm pool end to end, wired as `warmpool dev` wires it: the scaler with the local provider
 * forking real workers, the API, real Redis/S3 and ONNX Runtime. What an infra team expects:
 * a warmed standby before any traffic; a burst grows the active pool and the backlog clears; a
 * worker SIGKILLed mid-burst loses no job; when traffic stops the pool drains back to the
 * standby setting. Times here are short settings, not assertions: every wait is "eventually".
 */

import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { queueName } from '../infra/contracts/job.ts';
import type { PoolProvider } from '../infra/contracts/pool.ts';
import { type HeartbeatPayload, listHeartbeats } from '../infra/fleet/worker-states.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { createLocalProvider } from '../infra/pool/local-provider.ts';
import { createBullJobQueue, openQueueProbes } from '../infra/queue/index.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { type RunningScaler, startScaler } from '../infra/scaler/main.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack } from './support/stack.ts';

const BIN = fileURLToPath(new URL('../bin/warmpool.mjs', import.meta.url));
const F = 256;
let stack: TestStack;
let provider: PoolProvider;
let scaler: RunningScaler;
// The provider borrows this client; the file closes it after the provider.
let providerRedis: ReturnType<typeof createRedis> | undefined;
const redis = () => createRedis(stack.config.redisUrl);

async function beats(): Promise<HeartbeatPayload[]> {
  const r = redis();
  try {
    return (await listHeartbeats(r, stack.config.queuePrefix)).filter((b) => b.model === 'pooled');
  } finally {
    await closeRedis(r);
  }
}

async function eventually(what: string, check: (b: HeartbeatPayload[]) => boolean, timeoutMs = 90_000): Promise<HeartbeatPayload[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const b = await beats();
    if (check(b)) return b;
    if (Date.now() > deadline) {
      const pool = (await (await stack.call('/v1/pool')).json()) as { deployments: Array<{ decisions: Array<Record<string, unknown>> }> };
      const last = pool.deployments[0]?.decisions.slice(0, 3).map((d) => ({
        r: (d.decision as { reasons: string[] }).reasons,
        rate: d.perWorkerRatePerSec,
        backlog: d.backlog,
        workers: d.workers,
      }));
      throw new Error(
        `timed out waiting for ${what}; workers: ${JSON.stringify(b.map((x) => x.state))}; decisions: ${JSON.stringify(last)}`,
      );
    }
    await new Promise((r) => setTimeout(r, 200));
  }
}

const count = (b: HeartbeatPayload[], state: string) => b.filter((x) => x.state === state).length;

beforeAll(async () => {
  stack = await startStack({
    SCALER_TICK_MS: '300',
    SLO_QUEUE_WAIT_MS: '500',
    COLD_START_DEFAULT_MS: '3000',
    SCALE_DOWN_STABILIZATION_MS: '3000',
    HEARTBEAT_INTERVAL_MS: '300',
    LOCK_DURATION_MS: '2000',
    STALLED_INTERVAL_MS: '1000',
    WARMUP_ITERATIONS: '1',
    INTRA_OP_THREADS: '1',
  });
  await stack.registry.publish({
    name: 'pooled',
    version: '1',
    bytes: buildMlpModel({ features: F, hidden: 2048, layers: 4, seed: 9 }),
    maxBatch: 32,
    warmupBatches: [1, 32],
  });
  await stack.deployments.put({ model: 'pooled', version: '1', min: 0, max: 3, standby: 1 });
  providerRedis = createRedis(stack.config.redisUrl);
  provider = createLocalProvider({
    command: [process.execPath, BIN, 'worker'],
    env: stack.env,
    redis: providerRedis,
    prefix: stack.config.queuePrefix,
    clock: systemClock,
    log: createLogger('silent'),
    stdio: 'ignore',
  });
  scaler = startScaler(stack.config, createLogger('silent'), provider);
}, 60_000);

afterAll(async () => {
  await scaler?.close();
  await provider?.close();
  if (providerRedis) await closeRedis(providerRedis);
  await stack?.close();
});

it('standby before traffic, grows on a burst, survives a SIGKILL, drains back to standby', async () => {
  // Before any traffic: one warmed standby, nothing active.
  const idle = await eventually('a warmed standby', (b) => count(b, 'standby') === 1);
  expect(count(idle, 'active')).toBe(0);

  // A burst: 500 jobs of 16 rows land at once (through the API's own entry writer, as a surge
  // of API submissions would, without the test's own HTTP load slowing the surge down): far more
  // than the warm workers clear within a cold start. One request per entry, so BullMQ's counts
  // are the burst's.
  const connection = redis();
  const jobs = createBullJobQueue({
    connection: stack.config.redisUrl,
    prefix: stack.config.queuePrefix,
    retentionS: 3600,
    attempts: 3,
    coalesceMaxRequests: 1,
  });
  const probes = openQueueProbes(connection, stack.config.queuePrefix);
  const queue = probes.queue(queueName('pooled', '1'));
  const ids = Array.from({ length: 500 }, (_, i) => `job_burst${i}`);
  await Promise.all(
    ids.map((jobId, i) =>
      jobs.enqueue(
        {
          tenant: 'tenant-a',
          model: 'pooled',
          version: '1',
          submittedAt: Date.now(),
          rows: 16,
          inputs: [
            { name: 'features', shape: [16, F], datatype: 'FP32', data: Float32Array.from({ length: 16 * F }, (_, k) => Math.sin(i + k)) },
          ],
        },
        { priority: 'normal', jobId },
      ),
    ),
  );
  await jobs.close();

  // The pool grows beyond the one standby that was activated.
  const grown = await eventually('two active workers', (b) => count(b, 'active') >= 2);
  // Kill one active worker without warning, mid-burst.
  const victim = grown.find((b) => b.state === 'active');
  expect(victim).toBeDefined();
  process.kill(victim!.pid, 'SIGKILL');

  // Every job of the burst completes, the killed worker's included (its locks expire, another
  // worker takes them again). A generous bound, not a timing claim: on a loaded 2-core machine
  // the burst has taken longer than four minutes.
  const deadline = Date.now() + 420_000;
  while ((await queue.counts('completed')).completed < ids.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
  expect(await queue.counts('completed', 'failed')).toEqual({ completed: ids.length, failed: 0 });
  await probes.close();
  await closeRedis(connection);

  // Traffic stopped: after the stabilisation window the pool drains back to the standby setting.
  const settled = await eventually(
    'back to one standby, none active',
    (b) => count(b, 'active') === 0 && count(b, 'standby') === 1,
    120_000,
  );
  expect(count(settled, 'failed')).toBe(0);

  // The decisions that did it are on record, with their inputs.
  const pool = (await (await stack.call('/v1/pool')).json()) as { deployments: Array<{ model: string; decisions: unknown[] }> };
  expect(pool.deployments.find((d) => d.model === 'pooled')?.decisions.length).toBeGreaterThan(0);
}, 660_000);
