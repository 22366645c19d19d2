/**
 * The worker's control listener on a real Redis: the doorbell delivers commands, the
 * desired-state key is the truth (a stale doorbell never undoes a newer command, a SET without
 * its publish is caught by the next check), foreign values are ignored, close() is idempotent.
 */
import { afterEach, beforeEach, expect, it } from 'vitest';
import { type ControlCommand, sendControl } from '../infra/fleet/worker-control.ts';
import { closeRedis, createRedis, type RedisClient } from '../infra/redis/client.ts';
import { controlChannel, controlStateKey } from '../infra/redis/keys.ts';
import { testServices, uniqueId } from '../test/support/services.ts';
import { type ControlListener, createControlListener } from './control.ts';

let redis: RedisClient;
let subscriber: RedisClient;
let listener: ControlListener;
let received: ControlCommand[];
let prefix: string;
const workerId = 'w-1';

beforeEach(async () => {
  redis = createRedis(testServices().redisUrl);
  subscriber = createRedis(testServices().redisUrl);
  prefix = uniqueId('ctl');
  received = [];
  listener = createControlListener({ redis, subscriber, prefix, workerId, onCommand: (c) => received.push(c) });
});

afterEach(async () => {
  await listener.close();
  await closeRedis(redis);
});

async function until(check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`condition not met; received ${JSON.stringify(received)}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

it('picks up a command sent before it listened, then each doorbell', async () => {
  await sendControl(redis, prefix, workerId, 'standby');
  await listener.start();
  expect(received).toEqual(['standby']);
  await sendControl(redis, prefix, workerId, 'activate');
  await until(() => received.at(-1) === 'activate');
  await sendControl(redis, prefix, workerId, 'drain');
  await until(() => received.at(-1) === 'drain');
});

it('reads the key on check(): a SET without publish is caught', async () => {
  await listener.start();
  expect(received).toEqual([]); // nothing sent: no change
  await redis.set(controlStateKey(prefix, workerId), JSON.stringify({ command: 'activate', sentAt: 1 }), 'PX', 10_000);
  await listener.check();
  expect(received).toEqual(['activate']);
});

it('trusts the key over a late doorbell, and the doorbell only when the key is gone', async () => {
  await listener.start();
  await sendControl(redis, prefix, workerId, 'activate');
  await until(() => received.length === 1);
  // A stale doorbell (say 'standby', delayed) must not undo the newer 'activate' the key holds.
  await redis.publish(controlChannel(prefix, workerId), JSON.stringify({ command: 'standby', sentAt: 0 }));
  await until(() => received.length === 2);
  expect(received).toEqual(['activate', 'activate']);

  await redis.del(controlStateKey(prefix, workerId));
  await redis.publish(controlChannel(prefix, workerId), JSON.stringify({ command: 'standby', sentAt: 0 }));
  await until(() => received.length === 3);
  expect(received.at(-1)).toBe('standby');
});

it('ignores foreign values and closes idempotently', async () => {
  await listener.start();
  await redis.set(controlStateKey(prefix, workerId), 'not json');
  await redis.publish(controlChannel(prefix, workerId), JSON.stringify({ command: 'explode' }));
  await listener.check();
  expect(received).toEqual([]);
  // Doorbells arrive in order: once this one is delivered, the foreign one before it was dropped.
  await redis.publish(controlChannel(prefix, workerId), JSON.stringify({ command: 'activate', sentAt: 2 }));
  await until(() => received.length > 0);
  expect(received).toEqual(['activate']);
  received = [];
  await listener.close();
  await listener.close();
  await until(() => subscriber.status === 'end');
  await sendControl(redis, prefix, workerId, 'activate');
  await listener.check();
  expect(received).toEqual([]);
});
