// Webhook slots shared fairly between tenants, on real Redis with real HTTP receivers on
// 127.0.0.1 (issue 33, attack 9): tenant B's receivers hang and B has many deliveries due, yet
// tenant A's are all delivered while B's still hang, and B never holds more than its share; a
// receiver streaming an endless body ends its attempt with its status and holds no memory.

import { readFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDispatcher } from '../api/dispatcher/main.ts';
import { createDeliveryStore, type Delivery, type DeliveryStore } from '../api/webhooks/delivery-store.ts';
import { createDispatcher, type Dispatcher } from '../api/webhooks/dispatcher.ts';
import { type Clock, systemClock } from '../infra/kernel/clock.ts';
import { type Config, loadConfig } from '../infra/kernel/config.ts';
import { createLogger, silentLog } from '../infra/kernel/log.ts';
import { closeRedis, createRedis, deleteMany, scanKeys } from '../infra/redis/client.ts';
import { testEnv, testServices, uniqueId } from './support/services.ts';
import { until } from './support/until.ts';

type Answer = (res: http.ServerResponse) => void;

/** A receiver on 127.0.0.1: counts requests open at once (and the most ever), records webhook-ids it answered. */
async function receiver(answer: Answer) {
  let open = 0;
  let mostOpen = 0;
  const answered: string[] = [];
  const server = http.createServer((req, res) => {
    open++;
    mostOpen = Math.max(mostOpen, open);
    res.on('close', () => open--);
    req.resume();
    req.on('end', () => {
      answered.push(String(req.headers['webhook-id']));
      answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    answered,
    open: () => open,
    mostOpen: () => mostOpen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const never: Answer = () => undefined;
const ok: Answer = (res) => res.writeHead(204).end();
/** 200, then a body that never ends: 16 KiB chunks as fast as the socket takes them. */
const endless: Answer = (res) => {
  const chunk = Buffer.alloc(16 * 1024, 'x');
  res.writeHead(200, { 'content-type': 'text/plain' });
  const more = () => {
    while (!res.destroyed) if (!res.write(chunk)) return void res.once('drain', more);
  };
  more();
};

const rssBytes = () => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) * 1024;

describe('webhook delivery shared fairly between tenants', () => {
  const redis = createRedis(testServices().redisUrl);
  const prefixes: string[] = [];
  const receivers: Array<{ close(): Promise<void> }> = [];
  const dispatchers: Dispatcher[] = [];
  const config: Config['webhooks'] = {
    allowedPrivateHosts: ['127.0.0.1'],
    // Far beyond the test: a hanging receiver holds its slot for all of it.
    timeoutMs: 120_000,
    retryScheduleMs: [60_000],
    concurrency: 16,
    concurrencyPerTenant: 4,
  };

  /** The delivery loops' rounds so far: each ends in one sleep of the dispatchers' clock. */
  let rounds = 0;
  const clock: Clock = {
    ...systemClock,
    sleep: (ms, signal) => {
      rounds++;
      return systemClock.sleep(ms, signal);
    },
  };

  function dispatcher(prefix: string): Dispatcher {
    const d = createDispatcher({
      redis,
      prefix,
      clock,
      config,
      log: silentLog,
      pollIntervalMs: 50,
      discoverIntervalMs: 60_000,
    });
    dispatchers.push(d);
    d.start();
    return d;
  }

  async function receiverFor(answer: Answer) {
    const r = await receiver(answer);
    receivers.push(r);
    return r;
  }

  async function enqueue(d: Pick<Dispatcher, 'store'>, tenant: string, url: string, count: number, from = 0): Promise<string[]> {
    const ids = Array.from({ length: count }, (_, i) => `msg_${tenant}_${from + i}`);
    for (const id of ids) {
      await d.store.enqueue({ id, tenant, jobId: id, event: 'job.succeeded', url, payload: JSON.stringify({ id }) }, Date.now());
    }
    return ids;
  }

  const states = async (d: Pick<Dispatcher, 'store'>, ids: string[]) =>
    Promise.all(ids.map(async (id) => (await d.store.get(id)) as Delivery));

  afterEach(async () => {
    // Receivers first: closing them ends the hanging attempts, which close() waits for.
    await Promise.all(receivers.splice(0).map((r) => r.close()));
    await Promise.all(dispatchers.splice(0).map((d) => d.close()));
  });

  afterAll(async () => {
    for (const p of prefixes) for await (const keys of scanKeys(redis, `${p}:*`)) await deleteMany(redis, keys);
    await closeRedis(redis);
  });

  const newPrefix = () => {
    const p = uniqueId('whfair');
    prefixes.push(p);
    return p;
  };

  it("delivers A's webhooks while B's receivers hang, B holding at most what leaves A's share free", async () => {
    const prefix = newPrefix();
    const hanging = await receiverFor(never);
    const answering = await receiverFor(ok);
    const d = dispatcher(prefix);
    // B's deliveries come first and in large numbers; A's after all of them.
    const bIds = await enqueue(d, 'tenant-b', hanging.url, 300);
    // Alone, B is lent the idle slots but one share (16 − 4): a lone tenant is not held to 4.
    await until('B to hold all but one share', async () => (hanging.open() === 12 ? true : undefined));
    const aIds = await enqueue(d, 'tenant-a', answering.url, 40);

    await until("all of A's deliveries to succeed", async () =>
      (await states(d, aIds)).every((x) => x.state === 'succeeded') ? true : undefined,
    );
    // Each exactly once, and all while B's receivers still hang.
    expect([...answering.answered].sort()).toEqual([...aIds].sort());
    expect(hanging.open()).toBe(12);
    expect(hanging.mostOpen()).toBe(12);
    const b = await states(d, bIds);
    expect(b.every((x) => x.state === 'pending' && x.attempts.length === 0)).toBe(true);
  });

  it('keeps B to its share per dispatcher with two dispatchers, and claims without spinning while B is at it', async () => {
    const prefix = newPrefix();
    const hanging = await receiverFor(never);
    const answering = await receiverFor(ok);
    const [d1] = [dispatcher(prefix), dispatcher(prefix)];
    if (!d1) throw new Error('no dispatcher');
    await enqueue(d1, 'tenant-b', hanging.url, 200);
    await until('B to hold all but one share at both dispatchers', async () => (hanging.open() === 24 ? true : undefined));

    // Every due delivery is B's and B is at all but one share at both: each dispatcher only
    // polls. Counted as the delivery loop's rounds (each claims at most twice, then sleeps):
    // MONITOR on the suite's shared Redis sees every other file's commands too.
    const roundsBefore = rounds;
    const started = Date.now();
    await new Promise((r) => setTimeout(r, 1_000));
    const elapsedMs = Date.now() - started;
    const claimRounds = rounds - roundsBefore;
    // Two dispatchers, one round per 50 ms poll each at most (noise only makes it fewer).
    expect(claimRounds).toBeGreaterThan(0);
    expect(claimRounds).toBeLessThanOrEqual(2 * (elapsedMs / 50 + 2));

    const aIds = await enqueue(d1, 'tenant-a', answering.url, 30);
    await until("all of A's deliveries to succeed", async () =>
      (await states(d1, aIds)).every((x) => x.state === 'succeeded') ? true : undefined,
    );
    expect([...answering.answered].sort()).toEqual([...aIds].sort());
    expect(hanging.mostOpen()).toBe(24);
  });

  it("ends an endless body's attempt with its status, the dispatcher's memory bounded", async () => {
    const prefix = newPrefix();
    const streaming = await receiverFor(endless);
    const d = dispatcher(prefix);
    const before = rssBytes();
    const ids = await enqueue(d, 'tenant-c', streaming.url, 40);
    const done = await until(
      'the endless-body deliveries to finish',
      async () => {
        const all = await states(d, ids);
        return all.every((x) => x.state !== 'pending') ? all : undefined;
      },
      45_000,
    );
    // The status alone decided: 200, each in one attempt (long before the 120 s timeout).
    expect(done.map((x) => [x.state, x.attempts.length, x.attempts[0]?.status])).toEqual(ids.map(() => ['succeeded', 1, 200]));
    await until('the receiver to see every connection closed', async () => (streaming.open() === 0 ? true : undefined));
    // 40 bodies without end: what the process grew by is buffers, not bodies.
    expect(rssBytes() - before).toBeLessThan(64 * 1024 * 1024);
  });

  it('takes its shares from WEBHOOK_CONCURRENCY and WEBHOOK_CONCURRENCY_PER_TENANT (the `warmpool dispatcher` wiring)', async () => {
    const config = loadConfig(
      testEnv({
        WEBHOOK_ALLOWED_PRIVATE_HOSTS: '127.0.0.1',
        WEBHOOK_TIMEOUT_MS: '120000',
        WEBHOOK_CONCURRENCY: '3',
        WEBHOOK_CONCURRENCY_PER_TENANT: '2',
      }),
    );
    prefixes.push(config.queuePrefix);
    const hanging = await receiverFor(never);
    const answering = await receiverFor(ok);
    const running = startDispatcher(config, createLogger('silent'));
    try {
      const store: { store: DeliveryStore } = { store: createDeliveryStore(redis, config.queuePrefix) };
      await enqueue(store, 'tenant-b', hanging.url, 20);
      await until('B to hold its share', async () => (hanging.open() === 2 ? true : undefined));
      const aIds = await enqueue(store, 'tenant-a', answering.url, 10);
      // One slot of three is left to A: its ten go through it one after another.
      await until("all of A's deliveries to succeed", async () =>
        (await states(store, aIds)).every((x) => x.state === 'succeeded') ? true : undefined,
      );
      expect(hanging.mostOpen()).toBe(2);
      expect(answering.mostOpen()).toBe(1);
    } finally {
      await Promise.all(receivers.splice(0).map((r) => r.close()));
      await running.close();
    }
  });
});
