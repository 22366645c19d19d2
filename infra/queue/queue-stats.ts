/**
 * QueueStats: the scaler's view of a deployment's queues (DESIGN §8). The backlog is every job
 * not yet finished that a worker must still run — waiting + prioritized + delayed (BullMQ keeps
 * prioritized and delayed jobs in sorted sets, outside the wait list, so `LLEN wait` alone
 * under-counts) + active — summed over the versions asked for, and the age of the oldest job
 * not yet taken.
 *
 * The oldest age peeks instead of scanning, so a tick costs a few commands per queue however
 * deep it is:
 * - wait: BullMQ pushes on the left and workers take from the right, so the oldest is `LINDEX -1`;
 * - prioritized: BullMQ 6 scores a job `priority·2³² + counter`, so each priority level is in
 *   arrival order and its head is that level's oldest; we read the head of every level present
 *   (one ZRANGEBYSCORE each, a handful: the job contract has three priorities). Should BullMQ
 *   change that encoding, the answer is still the age of a real queued job, only maybe not the
 *   oldest;
 * - delayed: a delayed job (a retry's back-off) is not waiting for a worker until it is due, so
 *   its age counts from its due time (the score is `due·2¹² + counter`), never from its creation.
 * Ages of wait and prioritized jobs count from the job's `timestamp` (when it was submitted).
 *
 * Counts are in requests: BullMQ counts queue entries (infra/contracts/entry.ts), each carrying
 * one or more requests, so each count is scaled by the requests per entry the APIs have lately
 * been writing to the queue (entry-writer.ts publishes it once a second). Exact without
 * coalescing; under load an estimate, as good as recent entries are like queued ones.
 *
 * Rows: a request may carry many rows, and the scaler's capacity is in rows, so the backlog says
 * how many rows a queued request carries on average (`rowsPerJob`): the rows per request the
 * APIs have lately been writing (entry-writer.ts publishes that mean with the other). Over
 * several versions it is their mean weighted by the requests each holds. Absent when no API has
 * published one (queues written before, or by hand), which the contract reads as 1.
 *
 * The Queues are the process's shared readers on the caller's Redis client (queue-cache.ts),
 * which never rewrite a queue's settings; `close()` releases them, once.
 */
import type { JobType } from 'bullmq';
import { queueName } from '../contracts/job.ts';
import type { Backlog } from '../contracts/pool.ts';
import type { Clock } from '../kernel/clock.ts';
import { once } from '../kernel/lifecycle.ts';
import type { RedisClient } from '../redis/client.ts';
import { entryMembersKey, entryRowsKey } from '../redis/keys.ts';
import { bullJobKey, bullQueueKey } from './bullmq-keys.ts';
import { leaseQueues, type QueueLease } from './queue-cache.ts';

/** A deployment's queues: one per version named. */
export interface BacklogTarget {
  model: string;
  versions: readonly string[];
}

export interface QueueStats {
  /** Summed over `target.versions`; `oldestAgeMs` is the oldest across them. */
  backlog(target: BacklogTarget): Promise<Backlog>;
  close(): Promise<void>;
}

export interface QueueStatsDeps {
  redis: RedisClient;
  /** BullMQ key prefix (QUEUE_PREFIX). */
  prefix: string;
  clock: Clock;
}

const PRIORITY_LEVEL = 2 ** 32;
const DELAY_SCALE = 0x1000;
/** Priority levels walked per queue; the job contract uses three. */
const MAX_PRIORITY_LEVELS = 16;

export function emptyBacklog(): Backlog {
  return { waiting: 0, prioritized: 0, delayed: 0, active: 0, oldestAgeMs: 0 };
}

/**
 * Adds two backlogs: counts sum, the oldest age is the larger, and rows per job is the mean of
 * both weighted by the jobs each holds (one without it counts as 1; with no jobs in either, the
 * larger). Absent when neither has it.
 */
export function addBacklogs(a: Backlog, b: Backlog): Backlog {
  const sum: Backlog = {
    waiting: a.waiting + b.waiting,
    prioritized: a.prioritized + b.prioritized,
    delayed: a.delayed + b.delayed,
    active: a.active + b.active,
    oldestAgeMs: Math.max(a.oldestAgeMs, b.oldestAgeMs),
  };
  if (a.rowsPerJob === undefined && b.rowsPerJob === undefined) return sum;
  const [ra, rb] = [a.rowsPerJob ?? 1, b.rowsPerJob ?? 1];
  const [wa, wb] = [queuedJobs(a) + a.active, queuedJobs(b) + b.active];
  sum.rowsPerJob = wa + wb > 0 ? (wa * ra + wb * rb) / (wa + wb) : Math.max(ra, rb);
  return sum;
}

/** Jobs a worker has not taken yet (the part of the backlog that waits). */
export function queuedJobs(b: Backlog): number {
  return b.waiting + b.prioritized + b.delayed;
}

/** A state BullMQ counts a queue's jobs in. */
export type JobCountState = Extract<JobType, 'waiting' | 'prioritized' | 'delayed' | 'active' | 'paused' | 'completed' | 'failed'>;

/** BullMQ's count of a queue's jobs in each of `states` (0 where none). */
export async function countJobs<S extends JobCountState>(
  queues: Pick<QueueLease, 'reader'>,
  name: string,
  ...states: S[]
): Promise<Record<S, number>> {
  const counts = await queues.reader(name).getJobCounts(...states);
  return Object.fromEntries(states.map((state) => [state, counts[state] ?? 0])) as Record<S, number>;
}

export function createQueueStats(deps: QueueStatsDeps): QueueStats {
  const queues = leaseQueues(deps.redis, deps.prefix);
  let closed = false;

  const versionBacklog = async (model: string, version: string): Promise<Backlog> => {
    if (closed) throw new Error('queue stats are closed');
    const name = queueName(model, version);
    const [counts, perEntry, rowsPerJob] = await Promise.all([
      countJobs(queues, name, 'waiting', 'prioritized', 'delayed', 'active'),
      requestsPerEntry(deps.redis, deps.prefix, name),
      rowsPerRequest(deps.redis, deps.prefix, name),
    ]);
    const scale = (n: number) => Math.round(n * perEntry);
    const backlog: Backlog = {
      waiting: scale(counts.waiting),
      prioritized: scale(counts.prioritized),
      delayed: scale(counts.delayed),
      active: scale(counts.active),
      oldestAgeMs: 0,
    };
    if (rowsPerJob !== undefined) backlog.rowsPerJob = rowsPerJob;
    if (queuedJobs(backlog) > 0) backlog.oldestAgeMs = await oldestAge(deps.redis, deps.prefix, name, deps.clock.now());
    return backlog;
  };

  return {
    async backlog(target) {
      const each = await Promise.all(target.versions.map((v) => versionBacklog(target.model, v)));
      return each.reduce(addBacklogs, emptyBacklog());
    },
    close: once(async () => {
      closed = true;
      await queues.release();
    }),
  };
}

/**
 * Requests per queue entry lately in queue `name` (infra/contracts/entry.ts), as the API's entry
 * writers publish it (entry-writer.ts): BullMQ counts entries, the backlog is in requests. 1
 * when none is published (no API wrote lately, or jobs from before entries).
 */
async function requestsPerEntry(redis: RedisClient, prefix: string, name: string): Promise<number> {
  const value = Number(await redis.get(entryMembersKey(prefix, name)));
  return Number.isFinite(value) && value >= 1 ? value : 1;
}

/**
 * Rows per request lately in queue `name`, as the API's entry writers publish it (entry-writer.ts);
 * undefined when none is published.
 */
async function rowsPerRequest(redis: RedisClient, prefix: string, name: string): Promise<number | undefined> {
  const raw = await redis.get(entryRowsKey(prefix, name));
  const value = Number(raw);
  return raw !== null && Number.isFinite(value) && value >= 1 ? value : undefined;
}

/** The age of the oldest job of one queue not yet taken (see the header for how each set is read). */
async function oldestAge(redis: RedisClient, prefix: string, name: string, now: number): Promise<number> {
  const submitted: number[] = [];
  const waitHead = await redis.lindex(bullQueueKey(prefix, name, 'wait'), -1);
  const heads = [...(waitHead ? [waitHead] : []), ...(await priorityHeads(redis, bullQueueKey(prefix, name, 'prioritized')))];
  for (const id of heads) {
    const ts = Number(await redis.hget(bullJobKey(prefix, name, id), 'timestamp'));
    // A job taken (or removed) between the peek and this read has no hash left: it no longer waits.
    if (Number.isFinite(ts) && ts > 0) submitted.push(ts);
  }
  const [, dueScore] = await redis.zrange(bullQueueKey(prefix, name, 'delayed'), '0', '0', 'WITHSCORES');
  if (dueScore !== undefined) submitted.push(Math.floor(Number(dueScore) / DELAY_SCALE));
  if (submitted.length === 0) return 0;
  return Math.max(0, now - Math.min(...submitted));
}

/** The first job id of each priority level present, lowest level first. */
async function priorityHeads(redis: RedisClient, key: string): Promise<string[]> {
  const heads: string[] = [];
  let min = 0;
  for (let i = 0; i < MAX_PRIORITY_LEVELS; i++) {
    const [id, score] = await redis.zrangebyscore(key, min, '+inf', 'WITHSCORES', 'LIMIT', 0, 1);
    if (id === undefined || score === undefined) break;
    heads.push(id);
    min = (Math.floor(Number(score) / PRIORITY_LEVEL) + 1) * PRIORITY_LEVEL;
  }
  return heads;
}
