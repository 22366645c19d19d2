/**
 * A pool worker's end of the holdings channel (infra/fleet/pool-holdings.ts): the desired-state
 * listener (doorbell-listener.ts) on the holdings key and its doorbell, handing each message read
 * to `onHoldings`, which sees repeats and must be idempotent (messages carry `rev`, which only
 * grows).
 */
import { type HoldingsMessage, parseHoldings, readHoldings } from '../infra/fleet/pool-holdings.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { holdingsChannel } from '../infra/redis/keys.ts';
import { createDoorbellListener, type DoorbellListener } from './doorbell-listener.ts';

export interface HoldingsListenerOptions {
  redis: Pick<RedisClient, 'get'>;
  /** A connection of its own (subscribed); closed by close(). */
  subscriber: RedisClient;
  prefix: string;
  workerId: string;
  onHoldings: (message: HoldingsMessage) => void;
  onError?: (err: unknown) => void;
}

export type HoldingsListener = DoorbellListener;

export function createHoldingsListener(options: HoldingsListenerOptions): HoldingsListener {
  const { redis, prefix, workerId } = options;
  return createDoorbellListener({
    subscriber: options.subscriber,
    channel: holdingsChannel(prefix, workerId),
    read: () => readHoldings(redis, prefix, workerId),
    parse: parseHoldings,
    deliver: options.onHoldings,
    ...(options.onError ? { onError: options.onError } : {}),
  });
}
