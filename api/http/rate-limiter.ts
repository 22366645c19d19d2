/**
 * A token bucket per key in Redis, shared by every API process: `burst` tokens at most,
 * refilled at `rps` per second, `cost` taken per take (one request; or a request body's bytes,
 * api/http/rate-limit.ts). One script does refill, take and the answer atomically, so concurrent
 * requests across processes never overdraw the bucket; it touches one key, so it runs on a Redis
 * Cluster as is. The script is the source of truth: nothing is admitted that it did not grant.
 *
 * Takes are served from the process's local leases on the bucket (api/http/rate-lease.ts): the
 * script is asked for a lease of up to a tenth of a second of the rate (and of the burst) when
 * the process's tokens for a key run out, so a busy key costs Redis about one call per lease, not
 * one per request; a key with a rate under 10/s (the auth-failure and simulation buckets) leases
 * one token at a time, exactly as before. That header states the bound on over-admission.
 *
 * The caller passes the time (its injected Clock's `now()`), not Redis's TIME: tests drive it,
 * and API hosts are assumed NTP-synced. A clock that goes backwards refills nothing (elapsed
 * time is clamped at 0 and the stored time never moves back). A bucket's key expires once it
 * would be full again, so idle tenants cost no memory.
 *
 * The script is a defined command: ioredis sends EVALSHA and only falls back to EVAL (sending
 * the script text) when Redis does not have it yet. Sending the text with every request cost
 * the API 8–10% of its CPU (docs/BENCHMARKS.md).
 */
import { rateLimitKey } from '../../infra/redis/keys.ts';
import { createLeases } from './rate-lease.ts';

/** The slice of ioredis this module uses: the command is defined once and then called by name. */
export interface RateLimitRedis {
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
}

const COMMAND = 'warmpoolRateLimitTake';

type TakeCommand = (key: string, now: number, rps: number, burst: number, need: number, want: number) => Promise<unknown>;

export interface TakeOptions {
  /** Epoch milliseconds. */
  now: number;
  /** Refill rate, tokens per second (> 0). */
  rps: number;
  /** Bucket size (≥ 1): the most requests allowed at once after a quiet spell. */
  burst: number;
  /** Tokens this take needs, 1 to `burst` (more could never be allowed); default 1. */
  cost?: number;
}

export interface TakeResult {
  allowed: boolean;
  /** When refused: how long until a token is there; 0 when allowed. */
  retryAfterMs: number;
}

export interface RateLimiter {
  take(key: string, options: TakeOptions): Promise<TakeResult>;
}

// KEYS[1] bucket; ARGV: now ms, rps, burst, need, want (≥ need). Takes `want` tokens when the
// bucket holds them, else `need`, else none. Returns {granted, retryAfterMs (for `need`)}.
// Floats are stored as strings (HSET); Redis truncates returned numbers, hence the ceil.
const TAKE = `
local now = tonumber(ARGV[1])
local rps = tonumber(ARGV[2])
local burst = tonumber(ARGV[3])
local need = tonumber(ARGV[4])
local want = tonumber(ARGV[5])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1]) or burst
local ts = tonumber(state[2]) or now
local elapsed = math.max(0, now - ts)
tokens = math.min(burst, tokens + elapsed * rps / 1000)
local granted = 0
local retry = 0
if tokens >= want then
  granted = want
elseif tokens >= need then
  granted = need
else
  retry = math.ceil((need - tokens) * 1000 / rps)
end
tokens = tokens - granted
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'ts', tostring(math.max(ts, now)))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) * 1000 / rps) + 1000)
return {granted, retry}
`;

export interface RateLimiterOptions {
  /** Key prefix (QUEUE_PREFIX). */
  prefix: string;
  /** How long leased tokens may be spent (api/http/rate-lease.ts); default 1 s. */
  leaseTtlMs?: number;
}

/** One limiter per process (and per Redis connection): its leases are that process's. */
export function createRateLimiter(redis: RateLimitRedis, options: RateLimiterOptions): RateLimiter {
  // Defining it again (another limiter on the same connection) replaces it with the same script.
  redis.defineCommand(COMMAND, { lua: TAKE, numberOfKeys: 1 });
  // defineCommand adds the method at run time, which ioredis's types cannot know.
  const commands = redis as unknown as Record<typeof COMMAND, TakeCommand>;
  const leases = createLeases(
    {
      async lease(key, { now, rps, burst, need, want }) {
        const bucket = rateLimitKey(options.prefix, key);
        const [granted, retryAfterMs] = (await commands[COMMAND](bucket, Math.floor(now), rps, burst, need, want)) as [number, number];
        return { granted, retryAfterMs };
      },
    },
    { ttlMs: options.leaseTtlMs },
  );
  return {
    take: (key, { now, rps, burst, cost = 1 }) => leases.take(key, { now, rps, burst, cost: Math.min(cost, burst) }),
  };
}
