/**
 * BullMQ's own key names, in one place. BullMQ 6 keeps every key of a queue under
 * `<prefix>:<queue>:` (its QueueKeys.toKey: infra/redis/keys.ts `queueKey`), so with a
 * hash-tagged queue name (infra/contracts/job.ts) all of a queue's keys share one slot on a Redis
 * Cluster. infra/queue/ is the only code that reads these keys, and it names them only here: a
 * BullMQ upgrade that renames one is answered in this file.
 */
import { queueKey } from '../redis/keys.ts';

/** A queue's own lists, sorted sets and stream. */
export type BullQueueKey = 'wait' | 'paused' | 'prioritized' | 'delayed' | 'active' | 'events';

/** One of a queue's own keys. */
export function bullQueueKey(prefix: string, queue: string, key: BullQueueKey): string {
  return queueKey(prefix, queue, key);
}

/** The hash BullMQ keeps a job in (its data, state fields, return value, failed reason). */
export function bullJobKey(prefix: string, queue: string, jobId: string): string {
  return queueKey(prefix, queue, jobId);
}

/** The stream BullMQ appends a queue's job events to (what QueueEvents reads). */
export function eventsStreamKey(prefix: string, queue: string): string {
  return bullQueueKey(prefix, queue, 'events');
}

/** A SCAN pattern for the events streams of the queues whose names match `queuePattern` (a glob). */
export function eventsStreamPattern(prefix: string, queuePattern: string): string {
  return queueKey(prefix, queuePattern, 'events');
}

/** The queue an events stream belongs to; undefined for a key that is not one. */
export function queueOfEventsStream(prefix: string, key: string): string | undefined {
  const head = `${prefix}:`;
  const tail = ':events';
  if (!key.startsWith(head) || !key.endsWith(tail) || key.length <= head.length + tail.length) return undefined;
  return key.slice(head.length, -tail.length);
}
