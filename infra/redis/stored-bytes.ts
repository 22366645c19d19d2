/**
 * What a tenant's jobs keep in Redis, in bytes, against a budget (MAX_STORED_BYTES_PER_TENANT).
 * Redis is shared by every tenant and runs `noeviction`: once one tenant's inputs and outputs
 * fill it, every tenant's submits fail. A job's packed inputs live until it ends (at most
 * JOB_RETENTION_S), its packed outputs for JOB_RETENTION_S after it succeeded; compressed bodies
 * and models whose outputs outgrow their inputs make those bytes far more than the requests'.
 *
 *   <prefix>:stored-bytes:{<tenant>}:expiry   sorted set: charge id → expires at (epoch ms)
 *   <prefix>:stored-bytes:{<tenant>}:sizes    hash: charge id → bytes, and `#total` → their sum
 *
 * A charge is one thing kept: a job's inputs (id = the job id, at submit, before its entry is
 * written: api/use-cases/stored-bytes-slot.ts) or an entry's outputs (id = `out:<entryId>`,
 * by the worker that stores them: worker/entry-intake.ts). Every charge carries its expiry, the
 * retention of what it counts, so the ledger cannot drift for longer than that:
 * - admit: one script prunes charges past their expiry (at most PRUNE_MAX a call), then adds
 *   each charge unless the total would pass the budget. Idempotent per id. Admits of one tenant
 *   in one turn of the event loop share one call (as infra/redis/open-jobs.ts's do).
 * - charge: the same script with no budget: the outputs of a job already computed are kept
 *   (refusing them would throw the work away); the tenant's next submits see them and are refused.
 * - release: a charge removed before its expiry (a job's inputs once its entry ended, a slot
 *   given back at submit). Allowed when Redis is out of memory (`allow-oom`): it only frees.
 *   The worker batches its releases with open-jobs.ts's releaser (its `release` has this shape).
 *
 * Self-healing: a lost release leaves a charge that is pruned at its expiry; the total is
 * recomputed from nothing when the set is empty. So the total can be too high, for at most a
 * retention, never too low — except by a charge whose write failed while the bytes it counts
 * were written (the worker charges outputs before it writes them, so that too fails high).
 */
import type { Clock } from '../kernel/clock.ts';
import type { RedisClient } from './client.ts';
import { storedBytesKey } from './keys.ts';

/**
 * Charges pruned per call at most: a call stays a few milliseconds of Redis however many
 * charges expired together; the rest go at the next calls (the total errs high meanwhile).
 */
export const PRUNE_MAX = 1000;

/** The running total's field in the sizes hash (charge ids never start with `#`). */
const TOTAL = '#total';

const PRUNE = `
local expiry, sizes = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local total = tonumber(redis.call('HGET', sizes, '${TOTAL}') or '0')
local gone = redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, ${PRUNE_MAX})
for _, id in ipairs(gone) do total = total - tonumber(redis.call('HGET', sizes, id) or '0') end
if #gone > 0 then
  redis.call('ZREM', expiry, unpack(gone))
  redis.call('HDEL', sizes, unpack(gone))
end
if total < 0 or redis.call('ZCARD', expiry) == 0 then total = 0 end
`;

/** The reply's head: the oldest charge's expiry (-1: none), then `total` as it is now. */
const TAIL = `
local oldest = redis.call('ZRANGE', expiry, 0, 0, 'WITHSCORES')[2] or -1
if total == 0 then redis.call('DEL', expiry, sizes) else redis.call('HSET', sizes, '${TOTAL}', total) end
`;

/**
 * KEYS: expiry, sizes. ARGV: now ms, ttl ms, budget (-1: none), then id, bytes pairs. Returns
 * { oldest expiry or -1, then per id the total after it when charged, or -(total) - 1 when refused }.
 */
const ADMIT = `${PRUNE}
local ttl = tonumber(ARGV[2])
local budget = tonumber(ARGV[3])
local out = {}
local added = false
for i = 4, #ARGV, 2 do
  local id, bytes = ARGV[i], tonumber(ARGV[i + 1])
  if redis.call('ZSCORE', expiry, id) then
    out[#out + 1] = total
  elseif budget >= 0 and total + bytes > budget then
    out[#out + 1] = -total - 1
  else
    redis.call('ZADD', expiry, now + ttl, id)
    redis.call('HSET', sizes, id, bytes)
    total = total + bytes
    added = true
    out[#out + 1] = total
  end
end
${TAIL}
if added and redis.call('PTTL', expiry) < ttl then
  redis.call('PEXPIRE', expiry, ttl)
  redis.call('PEXPIRE', sizes, ttl)
end
table.insert(out, 1, oldest)
return out
`;

/** KEYS: expiry, sizes. ARGV: now ms, ids…. Returns the total after. */
const RELEASE = `#!lua flags=allow-oom
${PRUNE}
for i = 2, #ARGV do
  local bytes = redis.call('HGET', sizes, ARGV[i])
  if bytes then
    total = total - tonumber(bytes)
    redis.call('HDEL', sizes, ARGV[i])
    redis.call('ZREM', expiry, ARGV[i])
  end
end
if total < 0 or redis.call('ZCARD', expiry) == 0 then total = 0 end
${TAIL}
return total
`;

const ADMIT_COMMAND = 'warmpoolStoredBytesAdmit';
const RELEASE_COMMAND = 'warmpoolStoredBytesRelease';

/** The slice of ioredis this module uses; the scripts are defined once and called by name (EVALSHA). */
export type StoredBytesRedis = Pick<RedisClient, 'defineCommand' | 'hget' | 'zrange'>;

type Script = (expiry: string, sizes: string, ...args: Array<string | number>) => Promise<unknown>;

export interface Admission {
  admitted: boolean;
  /** The tenant's kept bytes after this charge (before it, when refused). */
  total: number;
  /** When the oldest charge expires (epoch ms); null when there is none. */
  oldestExpiresAt: number | null;
}

export interface StoredBytes {
  /** Charges `bytes` for `id` unless the tenant's total would pass `budget`; idempotent per id. */
  admit(tenant: string, id: string, bytes: number, budget: number): Promise<Admission>;
  /** Charges `bytes` for `id` whatever the budget (what is already kept); resolves to the total after. */
  charge(tenant: string, id: string, bytes: number): Promise<number>;
  /** The charges' bytes are no longer kept. */
  release(tenant: string, ids: readonly string[]): Promise<void>;
  /** The tenant's kept bytes and oldest expiry, as of its last call's pruning. */
  usage(tenant: string): Promise<{ total: number; oldestExpiresAt: number | null }>;
}

export interface StoredBytesOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** How long a charge counts (JOB_RETENTION_S in ms): the longest what it counts is kept. */
  ttlMs: number;
  clock: Pick<Clock, 'now'>;
}

interface PendingAdmit {
  id: string;
  bytes: number;
  resolve: (a: Admission) => void;
  reject: (err: unknown) => void;
}

export function createStoredBytes(redis: StoredBytesRedis, options: StoredBytesOptions): StoredBytes {
  const { prefix, ttlMs, clock } = options;
  redis.defineCommand(ADMIT_COMMAND, { lua: ADMIT, numberOfKeys: 2 });
  redis.defineCommand(RELEASE_COMMAND, { lua: RELEASE, numberOfKeys: 2 });
  // defineCommand adds the methods at run time, which ioredis's types cannot know.
  const scripts = redis as unknown as Record<typeof ADMIT_COMMAND | typeof RELEASE_COMMAND, Script>;
  const keysOf = (tenant: string) => [storedBytesKey(prefix, tenant, 'expiry'), storedBytesKey(prefix, tenant, 'sizes')] as const;
  const run = async (tenant: string, budget: number, charges: readonly { id: string; bytes: number }[]) => {
    const [expiry, sizes] = keysOf(tenant);
    const args = charges.flatMap((c) => [c.id, Math.max(0, Math.ceil(c.bytes))]);
    const reply = (await scripts[ADMIT_COMMAND].call(redis, expiry, sizes, clock.now(), ttlMs, budget, ...args)) as unknown[];
    const oldest = Number(reply[0]);
    return { oldestExpiresAt: oldest >= 0 ? oldest : null, results: reply.slice(1).map(Number) };
  };
  /** Per tenant and budget: the admits of this turn of the event loop, sent together at its end. */
  const pending = new Map<string, { tenant: string; budget: number; admits: PendingAdmit[] }>();

  function send(key: string): void {
    const group = pending.get(key);
    if (!group) return;
    pending.delete(key);
    run(group.tenant, group.budget, group.admits).then(
      ({ oldestExpiresAt, results }) =>
        group.admits.forEach((a, i) => {
          const n = results[i] ?? -1;
          a.resolve({ admitted: n >= 0, total: n >= 0 ? n : -n - 1, oldestExpiresAt });
        }),
      (err: unknown) => {
        for (const a of group.admits) a.reject(err);
      },
    );
  }

  return {
    admit(tenant, id, bytes, budget) {
      const key = `${budget}\u0000${tenant}`;
      let group = pending.get(key);
      if (!group) {
        group = { tenant, budget, admits: [] };
        pending.set(key, group);
        setImmediate(() => send(key));
      }
      const g = group;
      return new Promise((resolve, reject) => g.admits.push({ id, bytes, resolve, reject }));
    },
    async charge(tenant, id, bytes) {
      const { results } = await run(tenant, -1, [{ id, bytes }]);
      return results[0] ?? 0;
    },
    async release(tenant, ids) {
      if (ids.length === 0) return;
      const [expiry, sizes] = keysOf(tenant);
      await scripts[RELEASE_COMMAND].call(redis, expiry, sizes, clock.now(), ...ids);
    },
    async usage(tenant) {
      const [expiry, sizes] = keysOf(tenant);
      const [total, oldest] = await Promise.all([redis.hget(sizes, TOTAL), redis.zrange(expiry, '0', '0', 'WITHSCORES')]);
      return { total: Number(total ?? 0), oldestExpiresAt: oldest[1] === undefined ? null : Number(oldest[1]) };
    },
  };
}
