/**
 * The webhook event source never stalls for good on a read that never answers. On a Redis
 * Cluster, ioredis can leave a command pending forever when the node it went to is killed: the
 * chaos suite saw every job succeed while the webhooks of 300 were never stored. Here the
 * source's first XREAD never answers (on the real test Redis, the one command held back); the
 * round is given up at its deadline and the entry is read, and its delivery stored, again.
 */
import { expect, it } from 'vitest';
import { createEventSource } from '../api/webhooks/event-source.ts';
import { queueName } from '../infra/contracts/job.ts';
import { systemClock } from '../infra/kernel/clock.ts';
import { eventsStreamKey } from '../infra/queue/bullmq-keys.ts';
import { closeRedis, duplicateClient, type RedisClient } from '../infra/redis/client.ts';
import { webhookCursorKey } from '../infra/redis/keys.ts';
import { useTestRedis } from './support/services.ts';
import { until } from './support/until.ts';

const { redis, prefixes } = useTestRedis();

/** `client` whose first `xread` is never answered, as a command lost with its node; the rest pass through. */
function firstReadLost(client: RedisClient, lost: { count: number }): RedisClient {
  return new Proxy(client, {
    get(target, key) {
      const value = Reflect.get(target, key, target);
      if (key !== 'xread' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return (...args: unknown[]) => {
        if (lost.count++ === 0) return new Promise(() => undefined);
        return value.apply(target, args);
      };
    },
  });
}

/** A `buried` stream event as infra/queue/tombstones.ts writes it: the request's final view and its webhook. */
function buriedFields(id: string): string[] {
  const view = {
    id,
    tenant: 'tenant-a',
    model: 'm',
    version: '1',
    status: 'canceled',
    createdAt: 1,
    attemptsMade: 0,
    error: { code: 'canceled', message: 'canceled' },
  };
  return [
    'event',
    'buried',
    'view',
    JSON.stringify(view),
    'webhook',
    JSON.stringify({ url: 'https://hooks.example/x', events: ['job.failed'] }),
  ];
}

it('a round whose read never answers is given up at its deadline; the entry is read again and its delivery stored', async () => {
  const prefix = prefixes.take('stall');
  const queue = queueName('m', '1');
  await redis.xadd(eventsStreamKey(prefix, queue), '*', ...buriedFields('job_stalled'));
  const lost = { count: 0 };
  const blocking = duplicateClient(redis);
  const stored: string[] = [];
  const warnings: string[] = [];
  const stop = new AbortController();
  const source = createEventSource({
    redis: firstReadLost(redis, lost),
    blocking: firstReadLost(blocking, lost),
    prefix,
    clock: systemClock,
    store: {
      enqueue: async (d) => {
        stored.push(d.id);
        return true;
      },
    },
    log: { warn: (_: unknown, msg: string) => warnings.push(msg) } as never,
    blockMs: 50,
    roundDeadlineMs: 300,
  });
  const running = source.run(stop.signal);
  try {
    await until('a delivery stored', async () => (stored.length > 0 ? true : undefined), 20_000);
    expect(stored).toEqual(['msg_job_stalled_failed']);
    expect(lost.count).toBeGreaterThan(1);
    expect(warnings).toContain('webhook event source: a read round overran its deadline; reading again');
    // The cursor moved past the entry, once its delivery was stored.
    expect(await until('the cursor moved', async () => (await redis.get(webhookCursorKey(prefix, queue))) ?? undefined, 20_000)).toMatch(
      /^\d+-\d+$/,
    );
  } finally {
    stop.abort();
    await running;
    await closeRedis(blocking);
  }
});
