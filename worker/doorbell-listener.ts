/**
 * A worker's end of a desired-state channel (infra/fleet/worker-control.ts, pool-holdings.ts: a
 * key that holds the truth, and a pub/sub doorbell rung after each write): subscribes to the
 * doorbell and reads the key, on the doorbell and whenever `check()` is called (every heartbeat),
 * and hands each message read to `deliver`.
 *
 * Reads are serialised and delivered in order on one connection, so the last message delivered
 * is always the one Redis held last: a heartbeat read that started before a new write is
 * delivered before the doorbell's read that sees it. The doorbell's own payload counts only when
 * the key has expired. `deliver` sees repeats (every beat re-delivers the current message) and
 * must be idempotent.
 */

import { closeRedis, type RedisClient } from '../infra/redis/client.ts';

export interface DoorbellListenerOptions<M> {
  /** A connection of its own: once subscribed it can run no other command. Closed by close(). */
  subscriber: RedisClient;
  channel: string;
  /** Reads the desired-state key (on the worker's shared connection). */
  read: () => Promise<M | undefined>;
  /** The doorbell's payload, for when the key has expired. */
  parse: (raw: string) => M | undefined;
  deliver: (message: M) => void;
  onError?: (err: unknown) => void;
}

export interface DoorbellListener {
  /** Subscribes and reads the key once (a message written before the worker listened). */
  start(): Promise<void>;
  /** Reads the key now; resolves once its message (if any) was delivered. */
  check(): Promise<void>;
  close(): Promise<void>;
}

export function createDoorbellListener<M>(options: DoorbellListenerOptions<M>): DoorbellListener {
  const { subscriber, channel } = options;
  let chain: Promise<void> = Promise.resolve();
  let closed = false;

  const check = (fallback?: M): Promise<void> => {
    if (closed) return chain;
    const read = options.read();
    chain = chain.then(async () => {
      try {
        const message = (await read) ?? fallback;
        if (message !== undefined && !closed) options.deliver(message);
      } catch (err) {
        options.onError?.(err);
      }
    });
    return chain;
  };

  const onMessage = (from: string, raw: string): void => {
    if (from === channel) void check(options.parse(raw));
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
