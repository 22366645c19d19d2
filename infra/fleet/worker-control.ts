/**
 * The control channel between whoever runs the pool (the scaler's providers, tools) and one
 * worker (DESIGN §6: standby ⇄ active within a second). Both sides use this module.
 *
 * Two Redis parts, because pub/sub alone loses a message sent while the worker reconnects:
 *
 * - the desired-state key `${prefix}:control-state:${workerId}` holds the last command (SET
 *   with a TTL of three heartbeat TTLs). It is the truth: the worker reads it on every
 *   heartbeat, so a missed publish is caught at the next beat;
 * - the channel `${prefix}:control:${workerId}` is the doorbell: `sendControl` publishes right
 *   after the SET, and the worker re-reads the key at once (so a late doorbell never undoes a
 *   newer command; the payload counts only when the key is gone).
 *
 * Commands: `activate` (standby → active: take jobs), `standby` (active → standby: stop
 * fetching, finish held jobs, take none), `drain` (as SIGTERM: stop taking, finish held, exit 0).
 * A command sent before the worker is warmed waits for warm-up to finish; a missing key means
 * "no change", so a key that expired leaves the worker where it was.
 */

import type { WorkerState } from '../contracts/worker-state.ts';
import type { RedisClient } from '../redis/client.ts';
import { controlChannel, controlStateKey } from '../redis/keys.ts';

export const CONTROL_COMMANDS = ['activate', 'standby', 'drain'] as const;
export type ControlCommand = (typeof CONTROL_COMMANDS)[number];

/** What the key holds and the channel carries (JSON). */
export interface ControlMessage {
  command: ControlCommand;
  /** Epoch ms when it was sent; for logs and tools, never for ordering. */
  sentAt: number;
}

/** Three default heartbeat TTLs (infra/kernel/config.ts HEARTBEAT_TTL_MS = 10 s). */
export const DEFAULT_CONTROL_TTL_MS = 30_000;

/** The state a command leads to once applied. */
export function stateFor(command: ControlCommand): WorkerState {
  return command === 'activate' ? 'active' : command === 'standby' ? 'standby' : 'draining';
}

/** A provider's `setState` target as the command that reaches it. */
export function commandFor(state: 'active' | 'standby'): ControlCommand {
  return state === 'active' ? 'activate' : 'standby';
}

export interface SendControlOptions {
  /** How long the desired state outlives a missed publish; default DEFAULT_CONTROL_TTL_MS. */
  ttlMs?: number;
  now?: number;
}

/** Records the desired state, then rings the doorbell. Idempotent: sending twice is harmless. */
export async function sendControl(
  redis: Pick<RedisClient, 'set' | 'publish'>,
  prefix: string,
  workerId: string,
  command: ControlCommand,
  options: SendControlOptions = {},
): Promise<void> {
  const message = JSON.stringify({ command, sentAt: options.now ?? Date.now() } satisfies ControlMessage);
  await redis.set(controlStateKey(prefix, workerId), message, 'PX', options.ttlMs ?? DEFAULT_CONTROL_TTL_MS);
  await redis.publish(controlChannel(prefix, workerId), message);
}

/** The worker's desired state, if one was sent within the TTL. */
export async function readControl(redis: Pick<RedisClient, 'get'>, prefix: string, workerId: string): Promise<ControlMessage | undefined> {
  return parseControlMessage(await redis.get(controlStateKey(prefix, workerId)));
}

/** A well-formed message, or undefined for anything else (a foreign value is not a command). */
export function parseControlMessage(raw: string | null | undefined): ControlMessage | undefined {
  if (!raw) return undefined;
  try {
    const value = JSON.parse(raw) as Partial<ControlMessage>;
    if (!CONTROL_COMMANDS.includes(value.command as ControlCommand)) return undefined;
    return { command: value.command as ControlCommand, sentAt: typeof value.sentAt === 'number' ? value.sentAt : 0 };
  } catch {
    return undefined;
  }
}
