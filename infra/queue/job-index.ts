/**
 * The job index: one key per job (`<prefix>:job:<id>`) so `GET /v1/jobs/{id}` finds the job from
 * its id alone. It holds where BullMQ holds the job — `<queue>#<entryId>`, the queue entry the
 * request is a member of (infra/contracts/entry.ts; a bare queue name, from before entries, means
 * the BullMQ job has the request's own id) — or the job's final view (JSON) once the job ended
 * outside BullMQ: a tombstone (tombstones.ts) or a result-cache hit. The entry writer
 * (entry-writer.ts) writes the entry form.
 * Every entry lives as long as the job's retention.
 */
import { parseMemberLocation } from '../contracts/entry.ts';
import type { JobView } from '../contracts/job.ts';
import type { RedisClient } from '../redis/client.ts';
import { jobIndexKey } from '../redis/keys.ts';

/** Where the index points: BullMQ's queue, or the final view of a job that ended outside it. */
export type Location = { kind: 'queue'; name: string; entryId: string } | { kind: 'tombstone'; view: JobView };

export interface JobIndex {
  /** null when no such job (or it has expired). */
  locate(jobId: string): Promise<Location | null>;
  /** Replaces the queue's name with the job's final view. */
  pointAtTombstone(view: JobView): Promise<void>;
  /** Records a job that finished without BullMQ; false when the id is already taken (ids are never reused). */
  recordFinished(view: JobView): Promise<boolean>;
}

export interface JobIndexOptions {
  prefix: string;
  retentionS: number;
}

export function createJobIndex(redis: RedisClient, { prefix, retentionS }: JobIndexOptions): JobIndex {
  const key = (jobId: string) => jobIndexKey(prefix, jobId);
  return {
    async locate(jobId) {
      const raw = await redis.get(key(jobId));
      if (raw === null) return null;
      // Queue names are "{infer.…}" (infra/contracts/job.ts); final views are JSON objects.
      if (raw.startsWith('{"')) return { kind: 'tombstone', view: JSON.parse(raw) as JobView };
      const { queue, entryId } = parseMemberLocation(raw, jobId);
      return { kind: 'queue', name: queue, entryId };
    },

    async pointAtTombstone(view) {
      await redis.set(key(view.id), JSON.stringify(view), 'EX', retentionS);
    },

    async recordFinished(view) {
      // NX: a finished record must not overwrite a job that has the id.
      return (await redis.set(key(view.id), JSON.stringify(view), 'EX', retentionS, 'NX')) === 'OK';
    },
  };
}
