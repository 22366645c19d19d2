/**
 * The worker's end of the control channel (infra/fleet/worker-control.ts): subscribes to its doorbell
 * and reads its desired-state key, on the doorbell and whenever `check()` is called (every
 * heartbeat), and hands each command it reads to `onCommand`.
 *
 * Reads are serialised and delivered in order on one connection, so the last command delivered
 * is always the one Redis held last: a heartbeat read that started before a new command was
 * SET is delivered before the doorbell's read that sees it. `onCommand` sees repeats (every beat
 * re-delivers the current command) and must be idempotent.
 */

import { type ControlCommand, type ControlMessage, parseControlMessage, readControl } from '../infra/fleet/worker-control.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { closeRedis } from '../infra/redis/client.ts';
import { controlChannel } from '../infra/redis/keys.ts';

export interface ControlListenerOptions {
  /** For GET; shared with the worker's other commands. */
  redis: Pick<RedisClient, 'get'>;
  /** A connection of its own: once subscribed it can run no other command. Closed by close(). */
  subscriber: RedisClient;
  prefix: string;
  workerId: string;
  onCommand: (command: ControlCommand) => void;
  onError?: (err: unknown) => void;
}

export interface ControlListener {
  /** Subscribes and reads the key once (a command sent before the worker listened). */
  start(): Promise<void>;
  /** Reads the desired-state key now; resolves once its command (if any) was delivered. */
  check(): Promise<void>;
  close(): Promise<void>;
}

export function createControlListener(options: ControlListenerOptions): ControlListener {
  const { redis, subscriber, prefix, workerId } = options;
  const channel = controlChannel(prefix, workerId);
  let chain: Promise<void> = Promise.resolve();
  let closed = false;

  /** `fallback`: the doorbell's own payload, used only when the key has expired. */
  const check = (fallback?: ControlMessage): Promise<void> => {
    if (closed) return chain;
    const read = readControl(redis, prefix, workerId);
    chain = chain.then(async () => {
      try {
        const message = (await read) ?? fallback;
        if (message && !closed) options.onCommand(message.command);
      } catch (err) {
        options.onError?.(err);
      }
    });
    return chain;
  };

  const onMessage = (from: string, raw: string): void => {
    if (from !== channel) return;
    void check(parseControlMessage(raw));
  };

  return {
    async start() {
      subscriber.on('message', onMessage);
      await subscriber.subscribe(channel);
      await check();
    },
    check: () => check(),
    async close() {
      if (closed) return;
      closed = true;
      subscriber.off('message', onMessage);
      await chain;
      await closeRedis(subscriber);
    },
  };
}
