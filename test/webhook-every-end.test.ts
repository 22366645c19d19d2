/**
 * Every way a job with a webhook ends sends its webhook, through the real path: jobs submitted
 * over HTTP to the API of the test stack, real `warmpool worker` processes, the webhook
 * dispatcher on the same Redis, and a real receiver on 127.0.0.1 that verifies each delivery
 * with the standardwebhooks library and the tenant's secret, as a user's receiver would.
 *
 *   queued past its deadline, seen by the API (a GET)    → job.failed  deadline_exceeded
 *   queued past its deadline, refused by a worker        → job.failed  deadline_exceeded
 *   canceled while queued (DELETE)                       → job.failed  status and code canceled
 *   degraded by admission onto the fallback model        → job.succeeded, from the fallback
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDispatcher, type Dispatcher } from '../api/webhooks/dispatcher.ts';
import { deliveryId } from '../api/webhooks/event-source.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack } from './support/stack.ts';

const F = 4;

interface Delivered {
  id: string;
  type: string;
  data: { id: string; model: string; status: string; error?: { code: string; message: string } };
}

/** A receiver that keeps every delivery whose signature verifies with the tenant's secret. */
function receiver(secret: () => Promise<string>) {
  const delivered: Delivered[] = [];
  const refused: string[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => (body += chunk));
    req.on('end', async () => {
      try {
        const payload = new Webhook(await secret()).verify(body, req.headers as Record<string, string>) as Omit<Delivered, 'id'>;
        delivered.push({ id: String(req.headers['webhook-id']), ...payload });
        res.writeHead(204).end();
      } catch (err) {
        refused.push(String(err));
        res.writeHead(400).end();
      }
    });
  });
  return {
    delivered,
    refused,
    start: () => new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve())),
    url: (path: string) => `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

let stack: TestStack;
let redis: RedisClient;
let dispatcher: Dispatcher;
let hooks: ReturnType<typeof receiver>;
let seed = 0;

beforeAll(async () => {
  stack = await startStack({ WARMUP_ITERATIONS: '1', HEARTBEAT_INTERVAL_MS: '300', WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1' });
  const mlp = buildMlpModel({ features: F, hidden: 8, layers: 1 });
  for (const name of ['idle', 'late', 'primary', 'lite']) {
    await stack.registry.publish({ name, version: '1', bytes: mlp, maxBatch: 8, warmupBatches: [1] });
  }
  // No scaler runs in the test stack: a min-0 deployment takes jobs, and only the workers this file starts run them.
  for (const model of ['idle', 'late', 'lite']) await stack.deployments.put({ model, version: '1', min: 0, max: 1, standby: 0 });
  await stack.deployments.put({ model: 'primary', version: '1', min: 0, max: 1, standby: 0, backlogMax: 1, fallback: { model: 'lite' } });
  let secret: Promise<string> | undefined;
  hooks = receiver(() => {
    secret ??= stack.call('/v1/webhooks/secret').then(async (res) => ((await res.json()) as { secret: string }).secret);
    return secret;
  });
  await hooks.start();
  redis = createRedis(stack.config.redisUrl);
  dispatcher = createDispatcher({
    redis,
    prefix: stack.config.queuePrefix,
    clock: systemClock,
    config: stack.config.webhooks,
    log: silentLog,
    pollIntervalMs: 50,
    discoverIntervalMs: 200,
  });
  dispatcher.start();
}, 120_000);

afterAll(async () => {
  await dispatcher?.close();
  await hooks?.close();
  await stack?.close();
  if (redis) await closeRedis(redis);
});

async function submit(model: string, extra: Record<string, unknown>): Promise<{ id: string; model: string }> {
  const data = Array.from({ length: F }, (_, i) => (seed + i) / 10);
  seed++;
  const res = await stack.call(`/v1/models/${model}/jobs`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data }], ...extra }),
  });
  if (res.status !== 202) throw new Error(`submit to ${model} answered ${res.status}: ${await res.text()}`);
  return (await res.json()) as { id: string; model: string };
}

/** The delivery `webhook-id` = `id`, once it has come. */
async function deliveryOf(id: string, timeoutMs = 60_000): Promise<Delivered> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = hooks.delivered.find((d) => d.id === id);
    if (got) return got;
    if (Date.now() > deadline) throw new Error(`delivery ${id} never came (refused: ${hooks.refused.join('; ') || 'none'})`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('every end of a job with a webhook sends it', () => {
  it('a queued job past its deadline, expired by the API when read: job.failed deadline_exceeded', async () => {
    const job = await submit('idle', { timeoutMs: 50, webhook: { url: hooks.url('/expired') } });
    await pause(100);
    const read = (await (await stack.call(`/v1/jobs/${job.id}`)).json()) as Delivered['data'];
    expect(read).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
    const got = await deliveryOf(deliveryId(job.id, 'job.failed'));
    expect(got).toMatchObject({ type: 'job.failed', data: { id: job.id, model: 'idle', status: 'failed', error: read.error } });
  });

  it('a queued job canceled: job.failed saying canceled, to a webhook that asks for failures only', async () => {
    const quiet = await submit('idle', { webhook: { url: hooks.url('/quiet'), events: ['job.succeeded'] } });
    const job = await submit('idle', { webhook: { url: hooks.url('/canceled') } });
    // In this order: the events stream is read in order, so once `job`'s delivery came, `quiet`'s would have.
    for (const id of [quiet.id, job.id]) expect((await stack.call(`/v1/jobs/${id}`, { method: 'DELETE' })).status).toBe(200);
    const got = await deliveryOf(deliveryId(job.id, 'job.failed'));
    expect(got).toMatchObject({ type: 'job.failed', data: { id: job.id, status: 'canceled', error: { code: 'canceled' } } });
    expect(await dispatcher.store.get(deliveryId(quiet.id, 'job.failed'))).toBeNull();
    expect(hooks.delivered.filter((d) => d.data.id === quiet.id)).toEqual([]);
  });

  it('a queued job past its deadline, refused by the worker that takes it: job.failed deadline_exceeded, no job.started', async () => {
    // Nobody reads the job: it is still queued when the worker comes.
    const job = await submit('late', { timeoutMs: 50, webhook: { url: hooks.url('/refused'), events: ['job.started', 'job.failed'] } });
    await pause(100);
    await stack.startWorker('late', '1');
    const got = await deliveryOf(deliveryId(job.id, 'job.failed'));
    expect(got).toMatchObject({
      type: 'job.failed',
      data: { id: job.id, model: 'late', status: 'failed', error: { code: 'deadline_exceeded' } },
    });
    expect(got.data.error?.message).toMatch(/waited \d+ ms for a worker; its deadline was 50 ms/);
    // The entry's `active` came before its `completed` in the stream: had it delivered, it would be stored by now.
    expect(await dispatcher.store.get(deliveryId(job.id, 'job.started'))).toBeNull();
  }, 90_000);

  it('a degradable job sent to the fallback model by admission: job.succeeded from the fallback', async () => {
    await stack.startWorker('lite', '1');
    await stack.waitForWorkers('lite', 'active');
    await submit('primary', { cache: false }); // fills the backlog of 1: no worker runs primary
    const job = await submit('primary', { degradable: true, cache: false, webhook: { url: hooks.url('/fallback') } });
    expect(job.model).toBe('lite');
    const got = await deliveryOf(deliveryId(job.id, 'job.succeeded'));
    expect(got).toMatchObject({ type: 'job.succeeded', data: { id: job.id, model: 'lite', status: 'succeeded' } });
  }, 90_000);
});
