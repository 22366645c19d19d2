/**
 * The requests a model's queue has finished, in requests, not BullMQ jobs. Online requests reach
 * BullMQ inside queue entries (infra/contracts/entry.ts): one job carrying one or more requests,
 * its members. A request is finished once the entry that carries it is in BullMQ's completed
 * set (each member has its outcome) or its failed set (failed for good: every member fails with
 * it); either way GET /v1/jobs/{id} shows it terminal. A job from before entries is its own
 * request; a bulk chunk job carries none (its rows belong to a bulk run) and is not counted.
 *
 * The ledger reads incrementally, as scripts/bench/queue-watch.ts does: the finished sets are
 * sorted by finishing time, so a poll reads the ids scored from a little before the newest it
 * has seen, and reads a whole set only when its size says something finished earlier than that.
 * Each new job costs one HGET of its data (the member list; the inputs live in a key of their own).
 */
import { isEntryData } from '../../infra/contracts/entry.ts';
import { queueName } from '../../infra/contracts/job.ts';
import { type JobCountState, leaseQueues } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';

/** How far before the newest finishing time seen each poll reads again. */
const OVERLAP_MS = 1_000;

/** States in which a job still has work ahead of it. */
const OPEN_STATES: JobCountState[] = ['waiting', 'prioritized', 'delayed', 'active'];

export interface RequestLedger {
  /** Reads what finished since the last poll. */
  poll(): Promise<void>;
  /** Ids of the requests finished so far (members of finished entries). */
  readonly finished: ReadonlySet<string>;
  /** Finished BullMQ jobs that carry requests (entries, and jobs from before entries). */
  readonly jobs: number;
  /** Jobs of the queue not finished yet, in any state. */
  open(): Promise<number>;
  close(): Promise<void>;
}

/** A ledger of `model` version `version`'s queue, on a connection of its own. */
export function openRequestLedger(redisUrl: string, prefix: string, model: string, version = '1'): RequestLedger {
  const redis = createRedis(redisUrl);
  const queues = leaseQueues(redis, prefix);
  const name = queueName(model, version);
  const finished = new Set<string>();
  const seen = { completed: new Set<string>(), failed: new Set<string>() };
  const newest = { completed: 0, failed: 0 };
  let jobs = 0;

  async function read(set: 'completed' | 'failed'): Promise<void> {
    const queue = queues.reader(name);
    const key = queue.keys[set];
    if (!key) throw new Error(`BullMQ has no ${set} key for queue ${name}`);
    const known = seen[set];
    const size = await redis.zcard(key);
    if (size <= known.size) return;
    let fresh = await unseen(redis, key, known, newest[set] - OVERLAP_MS);
    // Something finished before the window: read the whole set once.
    if (known.size + fresh.length < size) fresh = await unseen(redis, key, known, 0);
    if (fresh.length === 0) return;
    const pipeline = redis.pipeline();
    for (const [id] of fresh) pipeline.hget(queue.toKey(id), 'data');
    const replies = (await pipeline.exec()) ?? [];
    fresh.forEach(([id, score], i) => {
      const [err, data] = replies[i] ?? [undefined, undefined];
      // Unread (a reply lost): read again by the next poll.
      if (err || data === undefined) return;
      known.add(id);
      newest[set] = Math.max(newest[set], score);
      const members = requestsOf(id, data as string | null);
      if (members.length > 0) jobs++;
      for (const m of members) finished.add(m);
    });
  }

  return {
    async poll() {
      await read('completed');
      await read('failed');
    },
    finished,
    get jobs() {
      return jobs;
    },
    async open() {
      const counts = await queues.reader(name).getJobCounts(...OPEN_STATES);
      return OPEN_STATES.reduce((n, s) => n + (counts[s] ?? 0), 0);
    },
    async close() {
      await queues.release();
      await closeRedis(redis);
    },
  };
}

/**
 * The request ids a finished job carries: an entry's members, or a job from before entries
 * itself; none for a bulk chunk, or a job whose hash is gone (removed by its retention).
 */
export function requestsOf(jobId: string, rawData: string | null): string[] {
  if (rawData === null) return [];
  let data: unknown;
  try {
    data = JSON.parse(rawData);
  } catch {
    return [jobId];
  }
  if (isEntryData(data)) return data.members.map((m) => m.id);
  return typeof data === 'object' && data !== null && 'bulk' in data ? [] : [jobId];
}

/** [id, finishing time] of the set's members scored from `since` on that are not in `known`. */
async function unseen(
  redis: Pick<RedisClient, 'zrangebyscore'>,
  key: string,
  known: ReadonlySet<string>,
  since: number,
): Promise<Array<[string, number]>> {
  const flat = await redis.zrangebyscore(key, Math.max(0, since), '+inf', 'WITHSCORES');
  const out: Array<[string, number]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) {
    const id = flat[i] as string;
    if (!known.has(id)) out.push([id, Number(flat[i + 1])]);
  }
  return out;
}
