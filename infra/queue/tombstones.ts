/**
 * Tombstones: how the API ends a job BullMQ still holds as queued (canceled, or past its
 * deadline) without a worker ever taking it.
 *
 * One script removes the job from BullMQ's wait/paused/prioritized/delayed sets and writes the
 * tombstone (the job's final view as JSON), atomically with respect to a worker's fetch (also a
 * script): a job a worker already took is never touched. The script writes the tombstone next
 * to the queue's keys (`<prefix>:{queue}:tomb:<id>`, the queue's hash slot on a Redis Cluster,
 * where one script cannot also reach the index key); the index key is then pointed at the same
 * tombstone. Until it is (or if the API dies in between) a reader that finds the job gone from
 * the queue reads the tombstone there.
 *
 * A request inside a queue entry with other members (infra/contracts/entry.ts) cannot take the
 * entry out of the queue: a second script checks the entry is still queued and adds the member
 * to the entry's skip set (the worker that takes the entry reads it and never runs the member)
 * and writes its tombstone. Once the index points at the tombstone, a `member-ended` event in
 * the queue's events stream makes every API process's followers of the entry look again (sent
 * before, a follower could read the index first, find the entry still queued, and wait on). When
 * every member is skipped the entry itself is taken out, as a single job is.
 *
 * Both scripts also tell the webhook dispatcher (api/webhooks/event-source.ts): when the job
 * has a webhook (read by the script from the BullMQ job's own data), they append a `buried`
 * event to the queue's events stream carrying the job's id, its final view (the tombstone) and
 * its webhook. Written by the same script as the tombstone, it cannot be lost between the two
 * (an API that dies right after the script has still told the dispatcher), and it needs nothing
 * that may be gone by the time the dispatcher reads it (an entry whose members were all ended is
 * removed). A job with no webhook adds nothing. `buried` is not `member-ended`: that one is a
 * hint for followers and must come after the index (see above); this one must come with the
 * tombstone.
 */

import { EVENTS_STREAM_MAX_LEN, type JobStatus, type JobView } from '../contracts/job.ts';
import type { Clock } from '../kernel/clock.ts';
import type { RedisClient } from '../redis/client.ts';
import { entryInputsKey, entrySkipKey, jobTombstoneKey } from '../redis/keys.ts';
import type { OpenJobs } from '../redis/open-jobs.ts';
import { bullJobKey, bullQueueKey } from './bullmq-keys.ts';
import type { JobIndex } from './job-index.ts';
import type { QueueLease } from './queue-cache.ts';

/**
 * Lua: `tell(jobKey, events, memberId, view, maxLen)` appends the `buried` event (see the
 * header) when the job has a webhook: a job from before entries keeps it in its data's
 * `webhook`, an entry in its member's. Data that does not decode tells nothing: the tombstone
 * is what matters, and a job whose data is not ours has no webhook of ours.
 */
const TELL = `
local function tell(jobKey, events, memberId, view, maxLen)
  local raw = redis.call('HGET', jobKey, 'data')
  if not raw then return end
  local ok, data = pcall(cjson.decode, raw)
  if not ok or type(data) ~= 'table' then return end
  local hook = data.webhook
  if data.entry == 1 then
    hook = nil
    if type(data.members) == 'table' then
      for _, m in ipairs(data.members) do
        if type(m) == 'table' and m.id == memberId then hook = m.webhook end
      end
    end
  end
  if type(hook) ~= 'table' then return end
  redis.call('XADD', events, 'MAXLEN', '~', maxLen, '*', 'event', 'buried', 'jobId', memberId, 'view', view, 'webhook', cjson.encode(hook))
end
`;

/**
 * KEYS: wait, paused, prioritized, delayed, tombstone, job hash, events (all in the queue's slot).
 * ARGV: job id, tombstone, ttl s, events stream max length.
 * The same sets BullMQ's own fetch (moveToActive) pops from: once out of them, no worker can
 * take the job. BullMQ's removeJob then deletes the rest (it is no longer in any set).
 */
const BURY = `${TELL}
local id = ARGV[1]
if redis.call('ZREM', KEYS[3], id) == 1 or redis.call('ZREM', KEYS[4], id) == 1
  or redis.call('LREM', KEYS[1], 1, id) == 1 or redis.call('LREM', KEYS[2], 1, id) == 1 then
  redis.call('SET', KEYS[5], ARGV[2], 'EX', ARGV[3])
  tell(KEYS[6], KEYS[7], id, ARGV[2], ARGV[4])
  return 1
end
return 0
`;

/**
 * KEYS: wait, paused, prioritized, delayed, skip, tombstone, entry hash, events (the queue's slot).
 * ARGV: entry id, member id, tombstone, ttl s, members in the entry, events stream max length.
 * 0: the entry is not queued (any more); 1: the member is skipped; 2: so is every member, and the entry is out of the queue.
 */
const BURY_MEMBER = `${TELL}
local id = ARGV[1]
local queued = redis.call('ZSCORE', KEYS[3], id) or redis.call('ZSCORE', KEYS[4], id)
  or redis.call('LPOS', KEYS[1], id) or redis.call('LPOS', KEYS[2], id)
if not queued then return 0 end
redis.call('SADD', KEYS[5], ARGV[2])
redis.call('EXPIRE', KEYS[5], ARGV[4])
redis.call('SET', KEYS[6], ARGV[3], 'EX', ARGV[4])
tell(KEYS[7], KEYS[8], ARGV[2], ARGV[3], ARGV[6])
if redis.call('SCARD', KEYS[5]) >= tonumber(ARGV[5]) then
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('LREM', KEYS[1], 1, id)
  redis.call('LREM', KEYS[2], 1, id)
  return 2
end
return 1
`;

/** Where a queued job is: its queue, and the entry carrying it (its own id for a job from before entries). */
export interface QueuedAt {
  view: JobView;
  queue: string;
  entryId?: string;
  /** Members in the entry. */
  members?: number;
}

export interface Tombstones {
  /** Ends a queued job with a tombstone; null when it is no longer queued (a worker took it, or it ended). */
  bury(at: QueuedAt, status: JobStatus, error: { code: string; message: string }): Promise<JobView | null>;
  /** The tombstone beside the queue, for a job gone from it whose index may not point at it yet. */
  read(queue: string, jobId: string): Promise<JobView | null>;
}

export interface TombstoneDeps {
  redis: RedisClient;
  prefix: string;
  retentionS: number;
  clock: Clock;
  index: JobIndex;
  queues: QueueLease;
  onError: (err: Error) => void;
  /** Released when a job is buried: it no longer counts among its tenant's open jobs. */
  openJobs?: Pick<OpenJobs, 'release'> | undefined;
}

export function createTombstones(deps: TombstoneDeps): Tombstones {
  const { redis, prefix } = deps;
  return {
    async bury(at, status, error) {
      const { queue, view } = at;
      const tombstone: JobView = { ...view, status, error, finishedAt: deps.clock.now() };
      if (at.entryId !== undefined && at.entryId !== view.id) return buryMember(at, tombstone);
      const keys = [
        ...(['wait', 'paused', 'prioritized', 'delayed'] as const).map((k) => bullQueueKey(prefix, queue, k)),
        jobTombstoneKey(prefix, queue, view.id),
        bullJobKey(prefix, queue, view.id),
        bullQueueKey(prefix, queue, 'events'),
      ];
      const args = [view.id, JSON.stringify(tombstone), deps.retentionS, EVENTS_STREAM_MAX_LEN];
      const done = await redis.eval(BURY, keys.length, ...keys, ...args);
      if (done !== 1) return null;
      // A release Redis refuses is reported, not thrown: the job has ended, and its entry ages out.
      await deps.openJobs?.release(view.tenant, [view.id]).catch(deps.onError);
      await deps.index.pointAtTombstone(tombstone);
      // Deletes the job's hash and emits `removed`, which wakes watchers in every API process.
      await deps.queues.producer(queue).remove(view.id).catch(deps.onError);
      return tombstone;
    },

    read: readTomb,
  };

  async function readTomb(queue: string, jobId: string): Promise<JobView | null> {
    const tomb = await redis.get(jobTombstoneKey(prefix, queue, jobId));
    return tomb === null ? null : (JSON.parse(tomb) as JobView);
  }

  async function buryMember(at: QueuedAt, tombstone: JobView): Promise<JobView | null> {
    const { queue } = at;
    const entryId = at.entryId as string;
    const keys = [
      ...(['wait', 'paused', 'prioritized', 'delayed'] as const).map((k) => bullQueueKey(prefix, queue, k)),
      entrySkipKey(prefix, queue, entryId),
      jobTombstoneKey(prefix, queue, tombstone.id),
      bullJobKey(prefix, queue, entryId),
      bullQueueKey(prefix, queue, 'events'),
    ];
    const args = [entryId, tombstone.id, JSON.stringify(tombstone), deps.retentionS, at.members ?? 1, EVENTS_STREAM_MAX_LEN];
    const done = await redis.eval(BURY_MEMBER, keys.length, ...keys, ...args);
    if (done !== 1 && done !== 2) return null;
    await deps.openJobs?.release(tombstone.tenant, [tombstone.id]).catch(deps.onError);
    await deps.index.pointAtTombstone(tombstone);
    // A hint only, so after the index (see the header); a follower that misses it still reads the tombstone on its next look.
    await redis
      .xadd(bullQueueKey(prefix, queue, 'events'), 'MAXLEN', '~', EVENTS_STREAM_MAX_LEN, '*', ...memberEnded(entryId, tombstone.id))
      .catch(deps.onError);
    if (done === 2) {
      await deps.queues.producer(queue).remove(entryId).catch(deps.onError);
      await redis.del(entryInputsKey(prefix, queue, entryId)).catch(deps.onError);
    }
    return tombstone;
  }
}

/** The events stream's fields for a member the API ended (job-follow.ts wakes the entry's followers on it). */
function memberEnded(entryId: string, memberId: string): string[] {
  return ['event', 'member-ended', 'jobId', entryId, 'memberId', memberId];
}
