/**
 * Bulk runs not yet ended, counted per tenant and in all (MAX_ACTIVE_BULK_RUNS_PER_TENANT,
 * MAX_ACTIVE_BULK_RUNS): each running run holds a driver's attention, up to a window of chunk
 * jobs in its model's queue and its record in Redis, so one tenant starting hundreds of small
 * runs took every other tenant's bulk capacity (issue 33, attack 5).
 *
 *   <p>:{bulk}:active-runs            zset: member = run ref, score = admitted at (epoch ms)
 *   <p>:{bulk}:active-runs:<tenant>   zset: the same, the tenant's runs only
 *
 * - admit: before a run is created (bulk-runs.ts `start`), one script checks both
 *   counts and adds the ref to both sets, or to neither: exact under any number of API and CLI
 *   processes. A ref already counted is admitted again without counting twice (a resume, a
 *   second start racing the first).
 * - release: the script that ends a run (run-store.ts FINISH: succeeded, failed, canceled)
 *   removes it from both sets in the same step as the status change; a start that admitted a
 *   run and then refused it (bad input, a lost race) releases it itself.
 * - self-healing: when a count reaches its cap, the script first looks at each counted run's
 *   record and drops those that are not running (ended by a path that did not release: a crash,
 *   a record deleted by hand) and those with no record admitted over ADMIT_GRACE_MS ago (a start
 *   that died between admit and create). A leaked slot thus lasts until the next refusal, never
 *   for good; a count is never too low.
 *
 * Same slot as the run records ({bulk}), so the script may read them.
 */
import type { RedisClient } from '../redis/client.ts';
import { bulkActiveRunsKey, bulkRunKey } from '../redis/keys.ts';

/** How long a counted ref may lack a record before it is taken for a start that died: a start's checks take seconds at most. */
export const ADMIT_GRACE_MS = 5 * 60_000;

/**
 * KEYS: all, tenant's. ARGV: ref, now, tenant cap, overall cap, grace ms, record key head.
 * Returns {1, tenant count, all count} when admitted, {2, …} when it was counted already, {0, …}
 * over the tenant's cap, {-1, …} over the overall cap (the counts as they stand).
 */
const ADMIT = `
local all, mine = KEYS[1], KEYS[2]
local ref, now = ARGV[1], tonumber(ARGV[2])
local tenantCap, allCap, grace, head = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6]
if redis.call('ZSCORE', mine, ref) then
  redis.call('ZADD', all, 'NX', now, ref)
  return {2, redis.call('ZCARD', mine), redis.call('ZCARD', all)}
end
local function prune(key)
  local members = redis.call('ZRANGE', key, 0, -1, 'WITHSCORES')
  for i = 1, #members, 2 do
    local status = redis.call('HGET', head .. members[i], 'status')
    if (status and status ~= 'running') or (not status and tonumber(members[i + 1]) < now - grace) then
      redis.call('ZREM', all, members[i])
      redis.call('ZREM', mine, members[i])
    end
  end
end
if redis.call('ZCARD', mine) >= tenantCap then prune(mine) end
local n = redis.call('ZCARD', mine)
if n >= tenantCap then return {0, n, redis.call('ZCARD', all)} end
if redis.call('ZCARD', all) >= allCap then prune(all) end
local total = redis.call('ZCARD', all)
if total >= allCap then return {-1, n, total} end
redis.call('ZADD', mine, now, ref)
redis.call('ZADD', all, now, ref)
return {1, n + 1, total + 1}`;

/** Caps that never refuse: a run already running is counted whatever the counts (one from before the caps, say). */
export const UNCAPPED: ActiveRunCaps = { perTenant: Number.MAX_SAFE_INTEGER, overall: Number.MAX_SAFE_INTEGER };

export interface ActiveRunCaps {
  /** MAX_ACTIVE_BULK_RUNS_PER_TENANT. */
  perTenant: number;
  /** MAX_ACTIVE_BULK_RUNS. */
  overall: number;
}

export type Admission =
  /** `added`: false when the ref was counted already (then a start that fails must not release it: it is another's). */
  { admitted: true; added: boolean } | { admitted: false; over: 'tenant' | 'overall'; tenantActive: number; allActive: number };

export type ActiveRuns = ReturnType<typeof createActiveRuns>;

export function createActiveRuns(redis: RedisClient, prefix: string) {
  const all = bulkActiveRunsKey(prefix);
  const head = bulkRunKey(prefix, '');
  return {
    /** Counts run `ref` of `tenant` as active unless a cap is reached; a ref already counted is admitted as is. */
    async admit(tenant: string, ref: string, caps: ActiveRunCaps, now: number): Promise<Admission> {
      const reply = (await redis.eval(
        ADMIT,
        2,
        all,
        bulkActiveRunsKey(prefix, tenant),
        ref,
        now,
        caps.perTenant,
        caps.overall,
        ADMIT_GRACE_MS,
        head,
      )) as [number, number, number];
      const [verdict, tenantActive, allActive] = reply.map(Number) as [number, number, number];
      if (verdict >= 1) return { admitted: true, added: verdict === 1 };
      return { admitted: false, over: verdict === 0 ? 'tenant' : 'overall', tenantActive, allActive };
    },

    /** No longer counted (a start that admitted and then did not create it). */
    async release(tenant: string, ref: string): Promise<void> {
      await redis.multi().zrem(all, ref).zrem(bulkActiveRunsKey(prefix, tenant), ref).exec();
    },

    /** The tenant's active runs as counted (pruned only at the caps): what the fair share weighs a run by. */
    count(tenant: string): Promise<number> {
      return redis.zcard(bulkActiveRunsKey(prefix, tenant));
    },
  };
}
