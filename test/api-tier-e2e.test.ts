/**
 * The API tier wired as `warmpool dev` wires it: the API process's app, a real worker process,
 * the webhook dispatcher, a real HTTP receiver. A product team's view: submit with a webhook,
 * get a signed `job.succeeded` whose outputs are the model's; deployments steer versions per job;
 * a bounded backlog answers 503 with Retry-After instead of growing.
 */

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunningDispatcher, startDispatcher } from '../api/dispatcher/main.ts';
import { PRIORITIES, queueName } from '../infra/contracts/job.ts';
import { createLogger } from '../infra/kernel/log.ts';
import { closeRedis, createRedis } from '../infra/redis/client.ts';
import { buildMlpModel } from '../scripts/fixtures/onnx-models.ts';
import { memberEntry } from './support/entries.ts';
import { KEY_B, startStack, type TestStack, waitForJob } from './support/stack.ts';

const F = 8;
let stack: TestStack;
let dispatcher: RunningDispatcher;
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

function job(version?: string, extra: Record<string, unknown> = {}) {
  return {
    method: 'POST',
    body: JSON.stringify({
      inputs: [{ name: 'features', shape: [1, F], datatype: 'FP32', data: Array.from({ length: F }, (_, i) => i / F) }],
      ...(version ? { version } : {}),
      ...extra,
    }),
  };
}

beforeAll(async () => {
  stack = await startStack({ WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1', WARMUP_ITERATIONS: '1' });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
  for (const version of ['1', '2']) {
    await stack.registry.publish({
      name: 'hooked',
      version,
      bytes: buildMlpModel({ features: F, hidden: 8, layers: 1, seed: Number(version) }),
    });
  }
  await stack.registry.publish({ name: 'bounded', version: '1', bytes: buildMlpModel({ features: F, hidden: 8, layers: 1 }) });
  await stack.deployments.put({ model: 'hooked', version: '1', min: 1, max: 1, standby: 0 });
  await stack.startWorker('hooked', '1');
  await stack.waitForWorkers('hooked', 'active');
  dispatcher = startDispatcher(stack.config, createLogger('silent'));
}, 120_000);

afterAll(async () => {
  await dispatcher?.close();
  await stack?.close();
  await new Promise<void>((resolve) => {
    receiver.closeAllConnections();
    receiver.close(() => resolve());
  });
});

describe('webhooks through the whole stack', () => {
  it('delivers a signed job.succeeded carrying the job resource, verifiable with the tenant secret', async () => {
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    const res = await stack.call('/v1/models/hooked/jobs', job(undefined, { webhook: { url } }));
    expect(res.status).toBe(202);
    const { id } = (await res.json()) as { id: string };
    const finished = await waitForJob(stack, id);
    expect(finished.status).toBe('succeeded');

    const deadline = Date.now() + 30_000;
    while (received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(received).toHaveLength(1);
    const { secret } = (await (await stack.call('/v1/webhooks/secret')).json()) as { secret: string };
    const event = new Webhook(secret).verify(received[0]!.body, received[0]!.headers) as {
      type: string;
      data: { id: string; status: string; outputs: unknown };
    };
    expect(event.type).toBe('job.succeeded');
    expect(event.data.id).toBe(id);
    expect(event.data.outputs).toEqual(finished.outputs);
  });

  it('refuses a literal loopback webhook at submit with 422 when the host is not allowed', async () => {
    const res = await stack.call('/v1/models/hooked/jobs', job(undefined, { webhook: { url: 'http://[::1]:9/x' } }));
    expect(res.status).toBe(422);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('webhook_url_blocked');
  });
});

describe('deployments steer each job', () => {
  it('the traffic split decides the version of jobs that name none; a named version wins', async () => {
    const put = await stack.call('/v1/deployments/hooked', {
      method: 'PUT',
      body: JSON.stringify({
        versions: [
          { version: '1', weight: 0 },
          { version: '2', weight: 100 },
        ],
      }),
    });
    expect(put.status).toBe(200);
    const versions = await Promise.all(
      Array.from(
        { length: 5 },
        async () => ((await (await stack.call('/v1/models/hooked/jobs', job())).json()) as { version: string }).version,
      ),
    );
    expect(versions).toEqual(['2', '2', '2', '2', '2']);
    const pinned = (await (await stack.call('/v1/models/hooked/jobs', job('1'))).json()) as { version: string };
    expect(pinned.version).toBe('1');

    // A deployment serves every tenant: only admin tenants change it; everyone may read it.
    const notAdmin = await stack.call('/v1/deployments/hooked/rollback', { method: 'POST', key: KEY_B });
    expect(notAdmin.status).toBe(403);
    expect(((await notAdmin.json()) as { error: { code: string } }).error.code).toBe('forbidden');
    expect((await stack.call('/v1/deployments/hooked', { key: KEY_B })).status).toBe(200);

    const canary = await stack.call('/v1/deployments/hooked/canary');
    expect(canary.status).toBe(200);
    expect(await canary.json()).toMatchObject({ model: 'hooked', events: [] });

    const rolled = await stack.call('/v1/deployments/hooked/rollback', { method: 'POST' });
    expect(rolled.status).toBe(200);
    expect(((await (await stack.call('/v1/models/hooked/jobs', job())).json()) as { version: string }).version).toBe('1');
  });
});

describe('admission', () => {
  it('past the backlog bound: 503 + Retry-After, or low priority when the request is degradable', async () => {
    await stack.deployments.put({ model: 'bounded', version: '1', min: 1, max: 1, standby: 0, backlogMax: 3 });
    for (let i = 0; i < 3; i++) expect((await stack.call('/v1/models/bounded/jobs', job())).status).toBe(202);
    const refused = await stack.call('/v1/models/bounded/jobs', job());
    expect(refused.status).toBe(503);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('backlog_full');

    const degraded = await stack.call('/v1/models/bounded/jobs', job(undefined, { degradable: true }));
    expect(degraded.status).toBe(202);
    const { id } = (await degraded.json()) as { id: string };
    const redis = createRedis(stack.config.redisUrl);
    const held = await memberEntry(redis, stack.config.queuePrefix, id);
    expect(held?.queue).toBe(queueName('bounded', '1'));
    expect(held?.entry.opts.priority).toBe(PRIORITIES.low); // its queue entry's
    await closeRedis(redis);
  });
});
