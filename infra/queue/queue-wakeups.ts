/**
 * What a worker that holds its most bulk chunks waits on instead of polling (worker/intake.ts):
 * the queue's own events stream, read with a blocking XREAD on a connection of its own, only
 * while someone waits. It wakes the waiter when
 *   - `entry`: an online job became waiting (an `entry` is never a `bulk:` id; a chunk added or
 *     handed back wakes nobody), so online work never waits behind a worker's chunks;
 *   - `drained`: a worker finished a job and found nothing waiting, so one is idle and the held
 *     chunk should go where it can run.
 * One blocking read per batch of events (or per BLOCK_MS while none come), whatever the number
 * of chunks queued.
 */
import { blockingOptions, duplicateClient, type RedisClient } from '../redis/client.ts';
import { bullQueueKey, eventsStreamKey } from './bullmq-keys.ts';
import { BULK_BASE } from './fair-share.ts';

export type Wakeup = 'entry' | 'drained';

export interface QueueWakeups {
  /** Resolves at the first wake-up (or now, when an online job waits already); `aborted` when the signal fires first. */
  next(signal: AbortSignal): Promise<Wakeup | 'aborted'>;
  close(): Promise<void>;
}

/** Longest single blocking read: how soon a reader nobody waits on any more stops. */
const BLOCK_MS = 5_000;
const PRIORITY_LEVEL = 2 ** 32;

export function createQueueWakeups(redis: RedisClient, prefix: string, queue: string): QueueWakeups {
  const stream = eventsStreamKey(prefix, queue);
  const prioritized = bullQueueKey(prefix, queue, 'prioritized');
  let reader: RedisClient | undefined;
  let reading: Promise<void> | undefined;
  let closed = false;
  const waiters = new Set<(w: Wakeup) => void>();

  const wake = (w: Wakeup) => {
    for (const resolve of [...waiters]) resolve(w);
  };

  async function read(from: string): Promise<void> {
    let last = from;
    while (waiters.size > 0 && !closed) {
      reader ??= duplicateClient(redis, blockingOptions({}));
      const reply = (await reader.xread('BLOCK', BLOCK_MS, 'STREAMS', stream, last)) as Array<[string, Array<[string, string[]]>]> | null;
      for (const [, entries] of reply ?? []) {
        for (const [id, fields] of entries) {
          last = id;
          const w = wakeupOf(fields);
          if (w) wake(w);
        }
      }
    }
  }

  return {
    async next(signal) {
      if (closed || signal.aborted) return 'aborted';
      return new Promise<Wakeup | 'aborted'>((resolve) => {
        const done = (w: Wakeup | 'aborted') => {
          waiters.delete(done);
          signal.removeEventListener('abort', onAbort);
          resolve(w);
        };
        const onAbort = () => done('aborted');
        signal.addEventListener('abort', onAbort, { once: true });
        waiters.add(done);
        if (reading) return;
        reading = (async () => {
          // The stream's end first, then a look at the queue: nothing between the two is missed.
          const newest = (await redis.xrevrange(stream, '+', '-', 'COUNT', 1))[0]?.[0] ?? '0';
          const online = await redis.zrangebyscore(prioritized, '-inf', `(${BULK_BASE * PRIORITY_LEVEL}`, 'LIMIT', 0, 1);
          if (online.length > 0) wake('entry');
          await read(newest);
        })()
          .catch(() => wake('drained'))
          .finally(() => {
            reading = undefined;
          });
      });
    },
    async close() {
      closed = true;
      wake('drained');
      reader?.disconnect();
      await reading?.catch(() => undefined);
    },
  };
}

function wakeupOf(fields: string[]): Wakeup | undefined {
  const get = (name: string) => {
    const i = fields.indexOf(name);
    return i >= 0 && i % 2 === 0 ? fields[i + 1] : undefined;
  };
  const event = get('event');
  if (event === 'drained') return 'drained';
  if (event === 'waiting' && !(get('jobId') ?? '').startsWith('bulk:')) return 'entry';
  return undefined;
}
