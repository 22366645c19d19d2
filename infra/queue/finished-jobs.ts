/**
 * A queue's finished jobs, read as they finish: for tools that count what a queue has done (the
 * bench's request watch, the chaos suite's ledger). BullMQ's completed and failed sets are sorted
 * by finishing time, so each read takes the ids scored from a little before the newest seen, and
 * reads the whole set only when its size says something finished earlier than that (a job whose
 * finishing time was taken before another's but written after it). Each new job costs one HMGET
 * of the fields asked for; a job whose reply was lost is read again next time.
 */
import type { Queue } from 'bullmq';
import type { RedisClient } from '../redis/client.ts';

export interface FinishedJob {
  id: string;
  /** Its score in the set: when it finished (epoch ms). */
  score: number;
  /** The job hash's `fields`, in order (null where absent). */
  values: Array<string | null>;
}

export interface FinishedJobsReader {
  /** The jobs that finished since the last read. */
  read(): Promise<FinishedJob[]>;
  /** Jobs read so far. */
  readonly seen: number;
  /** Forgets what was read (after the set was emptied). */
  reset(): void;
}

export interface FinishedJobsOptions {
  set: 'completed' | 'failed';
  /** Fields of the job's hash to read (e.g. `returnvalue`, `data`, `finishedOn`). */
  fields: readonly string[];
  /** How far before the newest finishing time seen each read looks again; default 1000 ms. */
  overlapMs?: number;
}

export function readFinishedJobs(
  redis: Pick<RedisClient, 'zcard' | 'zrangebyscore' | 'pipeline'>,
  queue: Pick<Queue, 'keys' | 'toKey'>,
  options: FinishedJobsOptions,
): FinishedJobsReader {
  const { set, fields } = options;
  const overlapMs = options.overlapMs ?? 1000;
  const seen = new Set<string>();
  let newest = 0;

  /** [id, score] of the set's members scored from `since` on that were not read yet. */
  async function unseen(key: string, since: number): Promise<Array<[string, number]>> {
    const flat = await redis.zrangebyscore(key, Math.max(0, since), '+inf', 'WITHSCORES');
    const out: Array<[string, number]> = [];
    for (let i = 0; i + 1 < flat.length; i += 2) {
      const id = flat[i] as string;
      if (!seen.has(id)) out.push([id, Number(flat[i + 1])]);
    }
    return out;
  }

  return {
    async read() {
      const key = queue.keys[set];
      if (!key) throw new Error(`BullMQ has no ${set} key for this queue`);
      const size = await redis.zcard(key);
      if (size <= seen.size) return [];
      let fresh = await unseen(key, newest - overlapMs);
      if (seen.size + fresh.length < size) fresh = await unseen(key, 0);
      if (fresh.length === 0) return [];
      const pipeline = redis.pipeline();
      for (const [id] of fresh) pipeline.hmget(queue.toKey(id), ...fields);
      const replies = (await pipeline.exec()) ?? [];
      const jobs: FinishedJob[] = [];
      fresh.forEach(([id, score], i) => {
        const [err, values] = replies[i] ?? [];
        if (err || !Array.isArray(values)) return;
        seen.add(id);
        newest = Math.max(newest, score);
        jobs.push({ id, score, values: values as Array<string | null> });
      });
      return jobs;
    },
    get seen() {
      return seen.size;
    },
    reset() {
      seen.clear();
      newest = 0;
    },
  };
}
