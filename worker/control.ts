/**
 * The worker's end of the control channel (infra/fleet/worker-control.ts): the desired-state
 * listener (doorbell-listener.ts) on the control key and channel, handing each command it reads
 * to `onCommand`, which sees repeats (every heartbeat re-delivers the current command) and must
 * be idempotent.
 */

import { type ControlCommand, parseControlMessage, readControl } from '../infra/fleet/worker-control.ts';
import type { RedisClient } from '../infra/redis/client.ts';
import { controlChannel } from '../infra/redis/keys.ts';
import { createDoorbellListener, type DoorbellListener } from './doorbell-listener.ts';

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

export type ControlListener = DoorbellListener;

export function createControlListener(options: ControlListenerOptions): ControlListener {
  const { redis, prefix, workerId } = options;
  return createDoorbellListener({
    subscriber: options.subscriber,
    channel: controlChannel(prefix, workerId),
    read: () => readControl(redis, prefix, workerId),
    parse: parseControlMessage,
    deliver: (message) => options.onCommand(message.command),
    ...(options.onError ? { onError: options.onError } : {}),
  });
}
