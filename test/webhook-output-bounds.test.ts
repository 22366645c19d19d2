/**
 * A job webhook bounded like the JSON answers (issue 33, attack 6's webhook leg), on a real API,
 * a real worker (ONNX Runtime), the dispatcher as `warmpool dispatcher` wires it (config's
 * MAX_JSON_OUTPUT_ELEMENTS) and a real HTTP receiver:
 *   - a job whose outputs pass the bound: its `job.succeeded` arrives signed, without `outputs`,
 *     with `outputsOmitted` (the count, how to read them binary), and the delivery Redis keeps
 *     for its retries is a few hundred bytes, not the MB its outputs would make;
 *   - a job under the bound: its outputs as before, the model's own.
 *
 * Model: `repeat` (x FP32 [b, n] → y [b, 256 n], scripts/fixtures' buildRepeatModel).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import { deliveryId } from '../api/webhooks/event-source.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { webhookDeliveryKey } from '../infra/redis/keys.ts';
import { buildRepeatModel } from '../scripts/fixtures/onnx-models.ts';
import { startStack, type TestStack } from './support/stack.ts';

const TIMES = 256;
const MAX_JSON = 65_536;
let stack: TestStack;
let dispatcher: RunningDispatcher;
let redis: RedisClient;
const received: Array<{ headers: Record<string, string>; body: string }> = [];
const receiver = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (c: string) => (body += c));
  req.on('end', () => {
    received.push({ headers: req.headers as Record<string, string>, body });
    res.writeHead(204).end();
  });
});

beforeAll(async () => {
  stack = await startStack({
    WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1',
    WARMUP_ITERATIONS: '1',
    HEARTBEAT_INTERVAL_MS: '300',
    MAX_JSON_OUTPUT_ELEMENTS: String(MAX_JSON),
  });
  redis = createRedis(stack.config.redisUrl);
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  await stack.registry.publish({ name: 'repeat', version: '1', bytes: buildRepeatModel(TIMES), maxBatch: 4 });
  await stack.deployments.put({ model: 'repeat', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('repeat', '1');
  await stack.waitForWorkers('repeat', 'active');
  dispatcher = startDispatcher(stack.config, createLogger('silent'));
}, 180_000);

afterAll(async () => {
  await dispatcher?.close();
  if (redis) await closeRedis(redis);
  await stack?.close();
  await new Promise<void>((resolve) => {
    receiver.closeAllConnections();
    receiver.close(() => resolve());
  });
});

/** `n` floats, different per seed, exact in FP32. */
function floats(n: number, seed: number): number[] {
  return Array.from({ length: n }, (_, i) => Math.round(Math.sin(seed * 7 + i) * 1000) / 8);
}

/** Submits `x` to `repeat` with a webhook to this file's receiver; the job's id. */
async function submitHooked(x: number[]): Promise<string> {
  const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const res = await stack.call('/v1/models/repeat/jobs', {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'x', datatype: 'FP32', shape: [1, x.length], data: x }], webhook: { url } }),
  });
  expect(res.status).toBe(202);
  return ((await res.json()) as { id: string }).id;
}

/** The job's verified `job.succeeded` as the receiver got it (it comes once the job succeeded), and its raw body. */
async function succeededHook(id: string): Promise<{ body: string; data: Record<string, unknown> }> {
  const webhookId = deliveryId(id, 'job.succeeded');
  const deadline = Date.now() + 60_000;
  let got = received.find((r) => r.headers['webhook-id'] === webhookId);
  while (!got && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    got = received.find((r) => r.headers['webhook-id'] === webhookId);
  }
  if (!got) throw new Error(`no job.succeeded for ${id}`);
  const { secret } = (await (await stack.call('/v1/webhooks/secret')).json()) as { secret: string };
  const event = new Webhook(secret).verify(got.body, got.headers) as { type: string; data: Record<string, unknown> };
  expect(event.type).toBe('job.succeeded');
  return { body: got.body, data: event.data };
}

/** The stored delivery's payload bytes in Redis (HSTRLEN), and the whole hash's (MEMORY USAGE). */
async function storedSize(id: string): Promise<{ payload: number; key: number }> {
  const key = webhookDeliveryKey(stack.config.queuePrefix, deliveryId(id, 'job.succeeded'));
  const payload = await redis.hstrlen(key, 'payload');
  const usage = Number(await redis.call('MEMORY', 'USAGE', key));
  return { payload, key: usage };
}

describe('a job webhook past MAX_JSON_OUTPUT_ELEMENTS', () => {
  it('arrives signed with outputsOmitted and no outputs; the delivery Redis keeps is small', async () => {
    const id = await submitHooked(floats(512, 1)); // 128 Ki elements out: twice the bound
    const { body, data } = await succeededHook(id);
    expect(data).toMatchObject({ id, model: 'repeat', version: '1', status: 'succeeded', timings: { batchRows: 1 } });
    expect(data.outputs).toBeUndefined();
    const omitted = data.outputsOmitted as { elements: number; message: string };
    expect(omitted.elements).toBe(512 * TIMES);
    expect(omitted.message).toContain(`more than the ${MAX_JSON}`);
    expect(omitted.message).toContain(`GET /v1/jobs/${id} with Accept: application/octet-stream, or ?binary_data_output=true`);
    // Stored as sent: a few hundred bytes, where 128 Ki floats as JSON are ~1 MB.
    const size = await storedSize(id);
    expect(size.payload).toBe(Buffer.byteLength(body));
    expect(size.payload).toBeLessThan(1024);
    expect(size.key).toBeLessThan(4096);
    // And the outputs are there to read binary, as the message says.
    const binary = await stack.call(`/v1/jobs/${id}`, { headers: { accept: 'application/octet-stream' } });
    expect(binary.status).toBe(200);
    expect((await binary.arrayBuffer()).byteLength).toBeGreaterThan(4 * 512 * TIMES);
  }, 90_000);

  it('under the bound, its outputs as before: the model’s, as GET shows them', async () => {
    const x = floats(16, 2); // 4 Ki elements out
    const id = await submitHooked(x);
    const { body, data } = await succeededHook(id);
    expect(data.outputsOmitted).toBeUndefined();
    const expected = Array.from({ length: TIMES }, () => x).flat();
    expect(data.outputs).toEqual([{ name: 'y', datatype: 'FP32', shape: [1, 16 * TIMES], data: expected }]);
    const got = (await (await stack.call(`/v1/jobs/${id}`)).json()) as { outputs: unknown };
    expect(data.outputs).toEqual(got.outputs);
    expect((await storedSize(id)).payload).toBe(Buffer.byteLength(body));
  }, 90_000);
});
