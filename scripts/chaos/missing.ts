/**
 * Where a missing request stands in Redis, for a post-mortem in the report: an accepted request
 * that the API shows as unknown (404) or never terminal. Its trail, in the order the API wrote
 * it (infra/queue/entry-writer.ts): the index key `<p>:job:<id>` → the queue entry it names
 * (BullMQ's job: its state, attempts, failure; whether its data lists the request) → the entry's
 * inputs key. Where the trail breaks says which write was lost.
 */
import { type EntryData, isEntryData, parseMemberLocation } from '../../infra/contracts/entry.ts';
import { openQueueProbes, type QueueProbe } from '../../infra/queue/index.ts';
import { closeRedis, createRedis, type RedisClient } from '../../infra/redis/client.ts';
import { entryInputsKey, jobIndexKey } from '../../infra/redis/keys.ts';
import type { ChaosStack } from './stack.ts';

export interface MissingRequest {
  id: string;
  /** What GET /v1/jobs/{id} answered: `404` or the status it showed. */
  read: string;
}

/** One line per request: `job_… (404): <where its trail breaks>`, joined by `; `. */
export async function describeMissing(stack: ChaosStack, model: string, missing: readonly MissingRequest[]): Promise<string> {
  const redis = createRedis(stack.config.redisUrl);
  const probes = openQueueProbes(redis, stack.config.queuePrefix);
  try {
    const lines: string[] = [];
    for (const m of missing) {
      const trail = await trailOf(redis, stack.config.queuePrefix, (name) => probes.queue(name), m.id).catch(
        (err: unknown) => `unreadable (${err instanceof Error ? err.message : String(err)})`,
      );
      lines.push(`${m.id} (${m.read}): ${trail}`);
    }
    return `${model}: ${lines.join('; ')}`;
  } finally {
    await probes.close();
    await closeRedis(redis);
  }
}

type Reader = (name: string) => Pick<QueueProbe, 'inspect'>;

async function trailOf(redis: RedisClient, prefix: string, reader: Reader, id: string): Promise<string> {
  const indexed = await redis.get(jobIndexKey(prefix, id));
  if (indexed === null) return 'no index key';
  if (indexed.startsWith('{"')) return `index holds a final view: ${indexed.slice(0, 120)}`;
  const at = parseMemberLocation(indexed, id);
  const inputs = (await redis.exists(entryInputsKey(prefix, at.queue, at.entryId))) === 1 ? 'inputs stored' : 'no inputs key';
  const entry = await reader(at.queue).inspect(at.entryId);
  if (!entry) return `index → ${at.entryId}, which BullMQ does not hold; ${inputs}`;
  const data = entry.data;
  const listed = isEntryData(data) && (data as EntryData).members.some((m) => m.id === id) ? 'lists it' : 'does not list it';
  const failure = entry.failedReason ? `, failed: ${entry.failedReason.slice(0, 120)}` : '';
  return `entry ${at.entryId} ${entry.state} (attempts ${entry.attemptsMade}, stalls ${entry.stalls}${failure}), ${listed}; ${inputs}`;
}
