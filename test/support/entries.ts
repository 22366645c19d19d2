/**
 * Where a request lives in BullMQ, for tests that look behind the API: the job index names the
 * queue entry that carries it (`<queue>#<entryId>`, infra/contracts/entry.ts), and the entry is
 * a BullMQ job whose data lists the request among its members.
 */
import { type Job, Queue } from 'bullmq';
import { type EntryData, type EntryMember, type EntryResult, parseMemberLocation } from '../../infra/contracts/entry.ts';
import type { RedisClient } from '../../infra/redis/client.ts';
import { jobIndexKey } from '../../infra/redis/keys.ts';

/** The queue and entry the index points at; undefined for an unknown id or one that ended outside BullMQ (a tombstone, a cache hit). */
export async function locateMember(
  redis: RedisClient,
  prefix: string,
  jobId: string,
): Promise<{ queue: string; entryId: string } | undefined> {
  const raw = await redis.get(jobIndexKey(prefix, jobId));
  if (raw === null || raw.startsWith('{"')) return undefined;
  return parseMemberLocation(raw, jobId);
}

export interface HeldMember {
  queue: string;
  /** The BullMQ job: the entry carrying the request. */
  entry: Job<EntryData, EntryResult>;
  member: EntryMember;
}

/** The entry carrying request `jobId` and its member record; undefined when BullMQ holds no such member. */
export async function memberEntry(redis: RedisClient, prefix: string, jobId: string): Promise<HeldMember | undefined> {
  const at = await locateMember(redis, prefix, jobId);
  if (!at) return undefined;
  const queue = new Queue<EntryData, EntryResult>(at.queue, { connection: redis, prefix });
  try {
    const entry = await queue.getJob(at.entryId);
    const member = entry?.data.members.find((m) => m.id === jobId);
    return entry && member ? { queue: at.queue, entry, member } : undefined;
  } finally {
    await queue.close();
  }
}
