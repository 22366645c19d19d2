/**
 * Fair share of a model queue's bulk capacity between runs, and so between tenants: the BullMQ
 * priority a run's next chunk job is added with. Workers take the lowest priority first (FIFO
 * within one), so the priorities decide the order in which queued chunks are served.
 *
 * Start-time fair queueing over virtual time, with a run as a flow. Each run keeps a tag, the
 * virtual time its next chunk starts at; the queue's virtual time V is the tag of the chunk at
 * the head of the queue (the lowest bulk priority waiting). A chunk starts at S = max(its run's
 * tag, V), is queued with priority BULK_BASE + S, and moves its run's tag to S + weight, the
 * weight being the run's tenant's active runs. So:
 *   - runs that have chunks waiting are served in turn, one chunk per round each, whatever order
 *     their drivers enqueued in: a run that queued its whole window first gets no more than one
 *     chunk ahead per round;
 *   - a tenant's runs share one turn (each is weighted by the tenant's runs): a tenant with four
 *     runs gets, all runs together, what a tenant with one run gets;
 *   - a run that arrives (or had nothing waiting) starts at V, the chunk being served now, never
 *     behind a backlog queued before it, and never with credit saved from idle time.
 * Why fair: at any moment, between two backlogged tenants the number of chunks served differs
 * by at most about one per run of theirs (the classic SFQ bound), while FIFO served them in
 * proportion to how many chunks each had queued.
 *
 * Online entries keep precedence: their priorities (1, 5, 10) are all below BULK_BASE, and a
 * late run's chunks (priority `urgent`) are not placed here.
 *
 * Tags grow with virtual time, and BullMQ's priorities end at 2^21: the tags restart from 0
 * whenever no bulk chunk waits in the queue (the hash is deleted), and should a queue stay
 * backlogged for two million rounds without a gap, priorities stop at the limit and those
 * chunks are served in FIFO order, today's order, until the queue next drains.
 *
 *   <p>:<queue>:bulk-fair   hash: run ref → its tag (infra/redis/keys.ts), in the queue's slot
 */
import { BULK_PRIORITIES } from '../contracts/job.ts';
import type { RedisClient } from '../redis/client.ts';
import { bulkFairShareKey } from '../redis/keys.ts';
import { bullQueueKey } from './bullmq-keys.ts';

/** The lowest priority a fairly placed chunk gets: bulk's own, below every online priority. */
export const BULK_BASE = BULK_PRIORITIES.bulk;
/** BullMQ's largest priority (its Job's PRIORITY_LIMIT). */
export const PRIORITY_LIMIT = 2 ** 21 - 1;

/** BullMQ scores a prioritized job priority × 2^32 + a counter. */
const PRIORITY_LEVEL = 2 ** 32;

/** KEYS: the fair-share hash, the queue's prioritized set. ARGV: run ref, weight, base, limit, level. Returns the priority. */
const PLACE = `
local base, limit, level = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local head = redis.call('ZRANGEBYSCORE', KEYS[2], base * level, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
local v = 0
if #head == 0 then
  redis.call('DEL', KEYS[1])
else
  v = math.floor(tonumber(head[2]) / level) - base
end
local tag = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local start = math.max(tag, v)
redis.call('HSET', KEYS[1], ARGV[1], start + tonumber(ARGV[2]))
return math.min(base + start, limit)`;

export interface FairShare {
  /** The priority of run `ref`'s next chunk, its run weighed `weight` (its tenant's active runs, at least 1). */
  place(ref: string, weight: number): Promise<number>;
  /** The run has nothing more to queue here: its tag goes (the hash is also emptied whenever the queue drains). */
  forget(ref: string): Promise<void>;
}

export function createFairShare(redis: RedisClient, prefix: string, queue: string): FairShare {
  const key = bulkFairShareKey(prefix, queue);
  const prioritized = bullQueueKey(prefix, queue, 'prioritized');
  return {
    async place(ref, weight) {
      const w = Math.max(1, Math.floor(weight));
      return Number(await redis.eval(PLACE, 2, key, prioritized, ref, w, BULK_BASE, PRIORITY_LIMIT, PRIORITY_LEVEL));
    },
    async forget(ref) {
      await redis.hdel(key, ref);
    },
  };
}
