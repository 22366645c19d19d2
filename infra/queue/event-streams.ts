/**
 * The model queues' BullMQ events streams, read directly: for readers that keep their own
 * cursor in Redis (the webhook event source) instead of a QueueEvents' in-memory one. An entry
 * is BullMQ's: `event` (added, active, completed, failed, …), `jobId`, and per event more
 * fields (`returnvalue`, `failedReason`, …).
 */
import { type RedisClient, scanKeys } from '../redis/client.ts';
import { eventsStreamKey, eventsStreamPattern, queueOfEventsStream } from './bullmq-keys.ts';

/** The names of the model queues, `{infer.<model>.<version>}` (infra/contracts/job.ts). */
const MODEL_QUEUES = '{infer.*}';

export interface StreamEntry {
  /** The stream entry's id (`<ms>-<seq>`, Redis's clock when BullMQ wrote it). */
  id: string;
  fields: Record<string, string>;
}

export interface QueueStreamEntries {
  queue: string;
  entries: StreamEntry[];
}

/** Batches of the names of model queues that have an events stream (SCAN, every master on a cluster). */
export async function* modelQueuesWithEvents(redis: RedisClient, prefix: string): AsyncGenerator<string[]> {
  for await (const keys of scanKeys(redis, eventsStreamPattern(prefix, MODEL_QUEUES), 1000)) {
    yield keys.flatMap((key) => queueOfEventsStream(prefix, key) ?? []);
  }
}

/**
 * The entries after each cursor (`[queue, last id read]`), at most `count` per stream, by one
 * XREAD; it blocks up to `blockMs` for the first entry when given. One XREAD cannot span hash
 * slots: on a Redis Cluster read one queue per call. Queues with no new entry are left out.
 */
export async function readEventStreams(
  redis: RedisClient,
  prefix: string,
  cursors: ReadonlyArray<readonly [queue: string, after: string]>,
  options: { count: number; blockMs?: number },
): Promise<QueueStreamEntries[]> {
  if (cursors.length === 0) return [];
  const streams = [...cursors.map(([queue]) => eventsStreamKey(prefix, queue)), ...cursors.map(([, after]) => after)];
  const reply = (
    options.blockMs === undefined
      ? await redis.xread('COUNT', options.count, 'STREAMS', ...streams)
      : await redis.xread('COUNT', options.count, 'BLOCK', options.blockMs, 'STREAMS', ...streams)
  ) as Array<[string, Array<[string, string[]]>]> | null;
  return (reply ?? []).map(([key, entries]) => ({
    queue: queueOfEventsStream(prefix, key) ?? key,
    entries: entries.map(([id, flat]) => ({ id, fields: pairs(flat) })),
  }));
}

function pairs(flat: string[]): Record<string, string> {
  const fields: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) fields[flat[i] as string] = flat[i + 1] as string;
  return fields;
}
