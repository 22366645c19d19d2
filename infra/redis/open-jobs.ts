/**
 * A tenant's open jobs: accepted and not yet ended (queued or running). Bounding them
 * (MAX_OPEN_JOBS_PER_TENANT) keeps one tenant from filling Redis, which every tenant shares
 * and which runs `noeviction`, with accepted jobs.
 *
 *   <prefix>:open-jobs:<tenant>   sorted set: member = job id, score = accepted at (epoch ms)
 *
 * - admit: at submit (api/use-cases/submit-job.ts), one script prunes entries older than the
 *   horizon, counts, and adds the job unless the tenant is at its cap. Idempotent per job id.
 *   Admits of one tenant that arrive in the same turn of the event loop share one call (a
 *   script over many ids, in arrival order), sent as EVALSHA: under load that is one round
 *   trip per tenant per turn, not one per request with the script's text.
 * - release: when the job ends. The worker that ends it (succeeded, or failed for good, the
 *   stalled-job failure included: worker/intake.ts) releases it in batches (the releaser
 *   below); the API releases a queued job it ends itself (cancel, deadline:
 *   infra/queue/tombstones.ts), and one whose enqueue failed.
 *
 * Self-healing: a release that is lost (a worker killed between ending jobs and its next flush,
 * a write Redis refused) leaves an entry that ages out after the horizon (JOB_RETENTION_S). So
 * a count can be too high, by the releases lost and for at most a horizon, never too low; and
 * a job still queued after a whole horizon no longer counts (a tenant can hold at most the cap
 * per horizon that way, still a bound). The key expires a horizon after its last admit.
 */
import type { Clock } from '../kernel/clock.ts';
import { periodicFlush } from '../kernel/periodic-flush.ts';
import { openJobsKey } from './keys.ts';

/**
 * KEYS: the tenant's set. ARGV: now ms, horizon ms, cap, job ids…. Returns per id, in order,
 * the open count after it when admitted, or -(the count) - 1 when refused.
 */
const ADMIT = `
local key = KEYS[1]
local now = tonumber(ARGV[1])
local horizon = tonumber(ARGV[2])
local cap = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (now - horizon))
local open = redis.call('ZCARD', key)
local out = {}
local added = false
for i = 4, #ARGV do
  if redis.call('ZSCORE', key, ARGV[i]) then
    out[#out + 1] = open
  elseif open >= cap then
    out[#out + 1] = -open - 1
  else
    redis.call('ZADD', key, now, ARGV[i])
    open = open + 1
    added = true
    out[#out + 1] = open
  end
end
if added then redis.call('PEXPIRE', key, horizon) end
return out
`;

const COMMAND = 'warmpoolOpenJobsAdmit';

/** The slice of ioredis this module uses; the script is defined once and called by name (EVALSHA). */
export interface OpenJobsRedis {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  zrem(key: string, ...members: string[]): Promise<number>;
  zcard(key: string): Promise<number>;
}

type AdmitCommand = (key: string, now: number, horizonMs: number, max: number, ...ids: string[]) => Promise<number[]>;

interface PendingAdmit {
  id: string;
  max: number;
  resolve: (r: { admitted: boolean; open: number }) => void;
  reject: (err: unknown) => void;
}

export interface OpenJobs {
  /** Counts job `jobId` as open for `tenant` unless `max` are open already; `open`: the count after. */
  admit(tenant: string, jobId: string, max: number): Promise<{ admitted: boolean; open: number }>;
  /** The jobs have ended: they no longer count. */
  release(tenant: string, jobIds: readonly string[]): Promise<void>;
  /** Open jobs of `tenant`, as of its last admit's pruning. */
  count(tenant: string): Promise<number>;
}

export interface OpenJobsOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** An entry older than this no longer counts (JOB_RETENTION_S in ms). */
  horizonMs: number;
  clock: Pick<Clock, 'now'>;
}

export function createOpenJobs(redis: OpenJobsRedis, options: OpenJobsOptions): OpenJobs {
  const { prefix, horizonMs, clock } = options;
  redis.defineCommand(COMMAND, { lua: ADMIT, numberOfKeys: 1 });
  // defineCommand adds the method at run time, which ioredis's types cannot know.
  const admitMany = (redis as unknown as Record<typeof COMMAND, AdmitCommand>)[COMMAND].bind(redis);
  /** Per tenant and cap: the admits of this turn of the event loop, sent together at its end. */
  const pending = new Map<string, { tenant: string; max: number; admits: PendingAdmit[] }>();

  function send(key: string): void {
    const group = pending.get(key);
    if (!group) return;
    pending.delete(key);
    const ids = group.admits.map((a) => a.id);
    admitMany(openJobsKey(prefix, group.tenant), clock.now(), horizonMs, group.max, ...ids).then(
      (reply) => {
        group.admits.forEach((a, i) => {
          const n = Number(reply[i]);
          a.resolve(n >= 0 ? { admitted: true, open: n } : { admitted: false, open: -n - 1 });
        });
      },
      (err: unknown) => {
        for (const a of group.admits) a.reject(err);
      },
    );
  }

  return {
    admit(tenant, jobId, max) {
      const key = `${max}\u0000${tenant}`;
      let group = pending.get(key);
      if (!group) {
        group = { tenant, max, admits: [] };
        pending.set(key, group);
        setImmediate(() => send(key));
      }
      const g = group;
      return new Promise((resolve, reject) => g.admits.push({ id: jobId, max, resolve, reject }));
    },
    async release(tenant, jobIds) {
      if (jobIds.length > 0) await redis.zrem(openJobsKey(prefix, tenant), ...jobIds);
    },
    count: (tenant) => redis.zcard(openJobsKey(prefix, tenant)),
  };
}

export interface OpenJobsReleaser {
  /** Queues a release; written at the next flush. */
  release(tenant: string, jobId: string): void;
  /** Writes what is queued now; resolves once written (a failure goes to `onError`: those entries age out instead). */
  flush(): Promise<void>;
  /** Stops the timer and flushes. Idempotent. */
  close(): Promise<void>;
}

/**
 * Releases gathered in memory and written once per interval, one ZREM per tenant: a draining
 * worker ends thousands of jobs a second, and a Redis call each would cost it like the
 * per-job arrival writes did (infra/telemetry/arrival-counter.ts). The timer runs only while
 * releases wait.
 */
export function createOpenJobsReleaser(
  openJobs: Pick<OpenJobs, 'release'>,
  clock: Pick<Clock, 'sleep'>,
  options: { flushIntervalMs?: number; onError?: (err: unknown) => void } = {},
): OpenJobsReleaser {
  const intervalMs = options.flushIntervalMs ?? 1000;
  const onError = options.onError ?? (() => undefined);
  let held = new Map<string, string[]>();
  /** The writes under way: a flush resolves once every release queued before it is written. */
  let writing: Promise<void> = Promise.resolve();

  function flush(): Promise<void> {
    if (held.size === 0) return writing;
    const batch = [...held];
    held = new Map();
    const write = Promise.all(batch.map(([tenant, ids]) => openJobs.release(tenant, ids).catch(onError)));
    writing = Promise.all([writing, write]).then(() => undefined);
    return writing;
  }
  const timer = periodicFlush(flush, clock, intervalMs);

  return {
    release(tenant, jobId) {
      const ids = held.get(tenant);
      if (ids) ids.push(jobId);
      else held.set(tenant, [jobId]);
      timer.held();
    },
    flush,
    close: timer.close,
  };
}
