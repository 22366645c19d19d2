/**
 * A pool worker's end of the holdings channel (infra/fleet/pool-holdings.ts), as worker/control.ts
 * is of the control channel: subscribes to its doorbell and reads its desired-holdings key, on the
 * doorbell and whenever `check()` is called (every heartbeat), and hands each message read to
 * `onHoldings`. Reads are serialised and delivered in order on one connection, so the last one
 * delivered is what Redis held last; `onHoldings` sees repeats and must be idempotent (messages
 * carry `rev`, which only grows).
 */
import { type HoldingsMessage, parseHoldings, readHoldings } from '../infra/fleet/pool-holdings.ts';
import { closeRedis, type RedisClient } from '../infra/redis/client.ts';
import { holdingsChannel } from '../infra/redis/keys.ts';

export interface HoldingsListenerOptions {
  redis: Pick<RedisClient, 'get'>;
  /** A connection of its own (subscribed); closed by close(). */
  subscriber: RedisClient;
  prefix: string;
  workerId: string;
  onHoldings: (message: HoldingsMessage) => void;
  onError?: (err: unknown) => void;
}

export interface HoldingsListener {
  start(): Promise<void>;
  check(): Promise<void>;
  close(): Promise<void>;
}

export function createHoldingsListener(options: HoldingsListenerOptions): HoldingsListener {
  const { redis, subscriber, prefix, workerId } = options;
  const channel = holdingsChannel(prefix, workerId);
  let chain: Promise<void> = Promise.resolve();
  let closed = false;

  /** `fallback`: the doorbell's own payload, used only when the key has expired. */
  const check = (fallback?: HoldingsMessage): Promise<void> => {
    if (closed) return chain;
    const read = readHoldings(redis, prefix, workerId);
    chain = chain.then(async () => {
      try {
        const message = (await read) ?? fallback;
        if (message && !closed) options.onHoldings(message);
      } catch (err) {
        options.onError?.(err);
      }
    });
    return chain;
  };

  const onMessage = (from: string, raw: string): void => {
    if (from === channel) void check(parseHoldings(raw));
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
